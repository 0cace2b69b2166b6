"""Segmentation metrics (registered in ``segmentation.registry.METRICS`` on import)."""

from segmentation.evaluation.agreement import cohen_kappa, per_image_miou
from segmentation.evaluation.iou_metric import IoUMetric

__all__ = ['IoUMetric', 'cohen_kappa', 'per_image_miou']
