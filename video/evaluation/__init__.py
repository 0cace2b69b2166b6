"""Video metrics (registered in ``video.registry.METRICS`` on import) and their functions."""

from video.evaluation.accuracy import AccMetric, top_k_accuracy, true_class_rank
from video.evaluation.multilabel import (
    MultiLabelMetric,
    class_average_precision,
    global_average_precision,
    hit_at_one,
)

__all__ = [
    'AccMetric',
    'MultiLabelMetric',
    'class_average_precision',
    'global_average_precision',
    'hit_at_one',
    'top_k_accuracy',
    'true_class_rank',
]
