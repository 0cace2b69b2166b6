"""Segmentation metrics (registered in ``segmentation.registry.METRICS`` on import)."""

from segmentation.evaluation.agreement import batch_confusions, cohen_kappa, per_image_miou
from segmentation.evaluation.iou_metric import IoUMetric

__all__ = ['IoUMetric', 'batch_confusions', 'cohen_kappa', 'per_image_miou']
