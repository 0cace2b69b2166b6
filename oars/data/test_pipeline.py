"""A config's test pipeline built for prediction: the steps that read and prepare one image, without the
annotation loaders (inference and the export's self-check feed files that have no labels).

Here, in the data floor, so that the exporter's self-check, the tasks' inference and the API all build it the
same way without importing each other.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import DefaultScope

from oars.errors import OarsError
from oars.tasks import activate


def build_test_pipeline(cfg: Config, drop: Sequence[str] = ()) -> Compose:
    """The test pipeline of ``cfg`` minus the transform types in ``drop`` (annotation loaders)."""
    loader = cfg.get("test_dataloader") or cfg.get("val_dataloader")
    if not loader:
        raise OarsError(f"{cfg.filename}: no test_dataloader/val_dataloader to take the test pipeline from")
    steps = [copy.deepcopy(t) for t in loader["dataset"]["pipeline"] if t.get("type") not in set(drop)]
    activate(cfg.get("default_scope"))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        return Compose(steps)
