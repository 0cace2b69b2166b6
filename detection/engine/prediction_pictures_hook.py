"""Pictures of evaluation results: ground truth | predicted boxes (and instance masks), plus a summary grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from detection.evaluation.gt_utils import sample_for_drawing
from detection.registry import HOOKS
from oars.engine.hooks.prediction_pictures import PredictionPicturesHookBase
from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample


@HOOKS.register_module()
class PredictionPicturesHook(PredictionPicturesHookBase):
    """``tools/eval.py --show-dir``: ground-truth boxes | predicted boxes with a score of at least ``score_thr``;
    instance masks (``pred_instances.masks``, ``gt_instances.masks``) are filled in the class colour under them."""

    def __init__(self, out_dir: str, max_images: int = 24, grid_cols: int = 3, score_thr: float = 0.3) -> None:
        super().__init__(out_dir, max_images, grid_cols)
        self.score_thr = score_thr

    def draw(self, img: np.ndarray, sample: Any) -> np.ndarray:
        pred, gt = sample_for_drawing(sample)
        return draw_detection_sample(img, pred, self.classes, self.palette, self.score_thr, gt=gt)

