"""Pictures of evaluation results: ground truth | predicted boxes, plus a summary grid."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
from mmengine.hooks import Hook

from detection.evaluation.gt_utils import gt_in_original, has_gt, predictions
from detection.registry import HOOKS
from detection.visualization import draw_detection_sample
from oars.visualization import get_palette, make_grid


@HOOKS.register_module()
class PredictionPicturesHook(Hook):
    """During testing, write ``<out_dir>/<image>.png`` for the first ``max_images`` images and
    ``<out_dir>/summary.png`` (a grid of them). Predictions below ``score_thr`` are not drawn."""

    priority = "LOW"

    def __init__(self, out_dir: str, max_images: int = 24, grid_cols: int = 3, score_thr: float = 0.3) -> None:
        self.out_dir = out_dir
        self.max_images = max_images
        self.grid_cols = grid_cols
        self.score_thr = score_thr
        self._rows: list[np.ndarray] = []

    def before_test(self, runner) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        self._rows = []
        meta = runner.test_dataloader.dataset.metainfo
        self._classes = list(meta["classes"])
        self._palette = get_palette(len(self._classes), meta.get("palette"))

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        for sample in outputs or []:
            if len(self._rows) >= self.max_images:
                return
            img_path = sample.metainfo["img_path"]
            img = cv2.imread(img_path, cv2.IMREAD_COLOR)
            gt = gt_in_original(sample) if has_gt(sample) else None
            row = draw_detection_sample(img, predictions(sample), self._classes,
                                        self._palette, self.score_thr, gt=gt)
            cv2.imwrite(osp.join(self.out_dir, osp.splitext(osp.basename(img_path))[0] + ".png"), row)
            self._rows.append(row)

    def after_test(self, runner) -> None:
        if self._rows:
            cv2.imwrite(osp.join(self.out_dir, "summary.png"), make_grid(self._rows, ncols=self.grid_cols))
            runner.logger.info(f"pictures of {len(self._rows)} predictions written to {self.out_dir}")
