"""Segmentation metrics (registered in ``segmentation.registry.METRICS`` on import)."""

from segmentation.evaluation.iou_metric import IoUMetric

__all__ = ['IoUMetric']
