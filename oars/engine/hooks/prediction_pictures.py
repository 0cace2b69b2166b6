"""The ``--show-dir`` hook's shared part: one picture per test image (up to a limit) plus a summary grid.

Each task subclasses it with ``draw(img, sample)`` (its own picture of prediction vs ground truth) and registers
the subclass as ``PredictionPicturesHook`` in its scope; ``tools/eval.py --show-dir`` adds it by that name.
"""

from __future__ import annotations

import os
import os.path as osp
from typing import Any

import cv2
import numpy as np
from mmengine.hooks import Hook

from oars_deploy.draw import get_palette, make_grid


class PredictionPicturesHookBase(Hook):
    """During testing, write ``<out_dir>/<image>.png`` for the first ``max_images`` images and
    ``<out_dir>/summary.png`` (a grid of them). Subclasses implement :meth:`draw`."""

    priority = "LOW"

    def __init__(self, out_dir: str, max_images: int = 24, grid_cols: int = 3) -> None:
        self.out_dir = out_dir
        self.max_images = max_images
        self.grid_cols = grid_cols
        self._rows: list[np.ndarray] = []
        self.classes: list[str] = []
        self.palette: np.ndarray | None = None

    def draw(self, img: np.ndarray, sample: Any) -> np.ndarray:
        """One picture (BGR) of ``sample``'s prediction (and ground truth) on ``img``, the original image."""
        raise NotImplementedError(f"{type(self).__name__} must implement draw(img, sample)")

    def before_test(self, runner) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        self._rows = []
        meta = runner.test_dataloader.dataset.metainfo
        self.classes = list(meta["classes"])
        self.palette = get_palette(len(self.classes), meta.get("palette"))

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        for sample in outputs or []:
            if len(self._rows) >= self.max_images:
                return
            img_path = sample.metainfo["img_path"]
            row = self.draw(cv2.imread(img_path, cv2.IMREAD_COLOR), sample)
            cv2.imwrite(osp.join(self.out_dir, osp.splitext(osp.basename(img_path))[0] + ".png"), row)
            self._rows.append(row)

    def after_test(self, runner) -> None:
        if self._rows:
            cv2.imwrite(osp.join(self.out_dir, "summary.png"), make_grid(self._rows, ncols=self.grid_cols))
            runner.logger.info(f"pictures of {len(self._rows)} predictions written to {self.out_dir}")
