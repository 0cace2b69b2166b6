"""Video metrics (registered in ``video.registry.METRICS`` on import) and their functions."""

from video.evaluation.accuracy import AccMetric, top_k_accuracy, true_class_rank
from video.evaluation.activitynet_eval import (
    area_under_ar_an,
    average_recall_vs_num_proposals,
    detection_average_precision,
    interpolated_ap,
    segment_iou,
    tied_score_fraction,
)
from video.evaluation.localization_metrics import LocalizationMetric
from video.evaluation.multilabel import (
    MultiLabelMetric,
    class_average_precision,
    global_average_precision,
    hit_at_one,
)

__all__ = [
    'AccMetric',
    'LocalizationMetric',
    'MultiLabelMetric',
    'area_under_ar_an',
    'average_recall_vs_num_proposals',
    'class_average_precision',
    'detection_average_precision',
    'global_average_precision',
    'hit_at_one',
    'interpolated_ap',
    'segment_iou',
    'tied_score_fraction',
    'top_k_accuracy',
    'true_class_rank',
]
