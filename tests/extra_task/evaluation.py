"""Accuracy of the dominant-shape classifier (a fraction 0-1, as every metric of the suite)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmengine.evaluator import BaseMetric

from extra_task.registry import METRICS


def _value(sample: Any, key: str) -> int:
    value = sample[key] if isinstance(sample, dict) else getattr(sample, key)
    return int(value)


@METRICS.register_module()
class DominantShapeAccuracy(BaseMetric):
    """``accuracy``: the fraction of images whose predicted class is the dominant shape; ``num_images``."""

    default_prefix: str | None = None

    def __init__(self, collect_device: str = "cpu", prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        # mmengine's Evaluator hands the metric the samples as dicts (BaseDataElement.to_dict())
        self.results.extend((_value(s, "pred_label"), _value(s, "gt_label")) for s in data_samples)

    def compute_metrics(self, results: list) -> dict[str, float]:
        correct = sum(pred == gt for pred, gt in results)
        return {"accuracy": correct / max(1, len(results)), "num_images": float(len(results))}
