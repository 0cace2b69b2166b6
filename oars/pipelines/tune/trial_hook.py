"""The hook through which a training run becomes a search trial: after every validation it hands the searched
metric to the search engine (Optuna's ``trial.report`` / Ray Tune's ``tune.report``), which may stop the trial.

Why a hook and not a loop of our own: the trial is an ordinary run of the training pipeline (its work dir,
checkpoints, logs and resume are those of ``tools/train.py``); only the report is added. The hook runs after the
checkpoint hook (priority ``LOWEST``), so a stopped trial still has the checkpoint of its last validation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mmengine.hooks import Hook

from oars.config.registry_lookup import closest
from oars.errors import OarsError

# (metric value, step) -> None; raises the engine's own exception to stop the trial
Reporter = Callable[[float, int], None]


class MetricNotReportedError(OarsError):
    """The searched metric is not among the evaluator's; the message lists what the evaluator reports."""


def metric_value(metrics: Mapping[str, Any], name: str, config: str) -> float:
    """The value of ``name`` in a validation's metrics (exact key, or the one key ending in ``/name``).

    Raises:
        MetricNotReportedError: no such key, naming the config, the metric and the closest reported names.
    """
    if name in metrics:
        return float(metrics[name])
    suffixed = [k for k in metrics if k.endswith("/" + name)]
    if len(suffixed) == 1:
        return float(metrics[suffixed[0]])
    near = closest(name, list(metrics))
    hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    raise MetricNotReportedError(f"--metric {name!r}{hint}: the evaluator of {config} reports "
                                 f"{', '.join(sorted(metrics)) or 'nothing'}")


class TrialReportHook(Hook):
    """Reports the searched metric after each validation.

    Args:
        metric: the metric's key (``mIoU``, ``coco/bbox_mAP``; a unique ``.../name`` suffix is enough).
        report: called with (value, step) where step is the epochs (or iterations, for an iteration-based loop)
            done; it raises the engine's exception to stop a hopeless trial.
        config: the config's path, for messages.
    """

    priority = "LOWEST"

    def __init__(self, metric: str, report: Reporter, config: str) -> None:
        self.metric, self.report, self.config = metric, report, config
        self.last: float | None = None

    def after_val_epoch(self, runner: Any, metrics: dict[str, float] | None = None) -> None:
        if not metrics:  # a validation that measured nothing (an empty split): nothing to report
            return
        self.last = metric_value(metrics, self.metric, self.config)
        by_epoch = getattr(runner.train_loop, "max_epochs", None) is not None
        self.report(self.last, runner.epoch if by_epoch else runner.iter)
