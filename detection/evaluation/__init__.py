"""Detection metrics (registered in ``detection.registry.METRICS`` on import) and their building blocks."""

from detection.evaluation.analysis import class_pr_curves, confusion_matrix, image_errors, worst_images
from detection.evaluation.ap import average_precision, eval_ap, iou_matrix, match_image, pr_curves
from detection.evaluation.coco_metric import CocoMetric
from detection.evaluation.gt_utils import (
    gt_in_original,
    gt_masks_in_original,
    image_record,
    masks_to_original,
    predicted_masks,
    predictions,
    sample_for_drawing,
    to_original,
)
from detection.evaluation.mask_rle import decode_masks, encode_masks
from detection.evaluation.voc_metric import VOCMetric

__all__ = [
    'CocoMetric',
    'VOCMetric',
    'average_precision',
    'class_pr_curves',
    'confusion_matrix',
    'decode_masks',
    'encode_masks',
    'eval_ap',
    'gt_in_original',
    'gt_masks_in_original',
    'image_errors',
    'image_record',
    'iou_matrix',
    'masks_to_original',
    'match_image',
    'predicted_masks',
    'predictions',
    'pr_curves',
    'sample_for_drawing',
    'to_original',
    'worst_images',
]
