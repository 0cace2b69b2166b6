"""The old home of ``train``, ``evaluate`` and ``print_config``, which are pipelines now (:mod:`oars.pipelines.train`,
:mod:`oars.pipelines.evaluate`); kept so that ``from oars.engine.entry import train, evaluate, load`` goes on
working. Nothing inside oars imports this module (the engine does not reach up into the pipelines).
"""

from __future__ import annotations

from oars.engine.run_setup import load as load  # tests and tools load configs through entry
from oars.pipelines.evaluate import _require_hook as _require_hook  # noqa: F401  (tests call it by this path)
from oars.pipelines.evaluate import evaluate as evaluate
from oars.pipelines.train import print_config as print_config
from oars.pipelines.train import train as train
