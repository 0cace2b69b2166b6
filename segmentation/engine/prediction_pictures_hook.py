"""Pictures of evaluation results: image | ground truth | prediction | overlay, plus a summary grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from oars.engine.hooks.prediction_pictures import PredictionPicturesHookBase
from oars_deploy.predictors.semantic_labels.draw import draw_sample
from segmentation.registry import HOOKS


@HOOKS.register_module()
class PredictionPicturesHook(PredictionPicturesHookBase):
    """``tools/eval.py --show-dir``: one row per image (image | ground truth | prediction | overlay | legend)."""

    def draw(self, img: np.ndarray, sample: Any) -> np.ndarray:
        pred = sample.pred_sem_seg.data[0].cpu().numpy()
        gt = sample.gt_sem_seg.data[0].cpu().numpy() if "gt_sem_seg" in sample else None
        return draw_sample(img, pred, self.palette, gt, self.classes)
