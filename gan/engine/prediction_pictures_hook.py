"""``tools/eval.py --show-dir`` for GANs: input | output | target per sample, or the generated grid of a noise model."""

from __future__ import annotations

import os
import os.path as osp
from typing import Any

import cv2
import numpy as np
from mmengine.model import is_model_wrapper

from gan.registry import HOOKS
from gan.visualization import generated_grid, grid_columns, sample_row, source_field
from oars.engine.hooks.prediction_pictures import PredictionPicturesHookBase
from oars_deploy.draw import make_grid


@HOOKS.register_module()
class PredictionPicturesHook(PredictionPicturesHookBase):
    """During testing, for the first ``max_images`` samples:

    * image-to-image models (the sample has a source image): ``<out_dir>/<image name>.png`` = input | output |
      target, and ``summary.png``, a grid of those rows;
    * noise models (DCGAN, CGAN): ``<out_dir>/generated.png``, a near-square grid of the generated images in test
      order, and ``<out_dir>/NNNNNN.png`` per image.

    Pictures are drawn from the data samples' tensors (the contract's fields), not re-read from files.
    """

    def __init__(self, out_dir: str, max_images: int = 24, grid_cols: int = 3) -> None:
        super().__init__(out_dir, max_images, grid_cols)
        self._fakes: list = []
        self._direction = 'AtoB'
        self._count = 0

    def before_test(self, runner) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        self._rows, self._fakes, self._count = [], [], 0
        meta = dict(getattr(runner.test_dataloader.dataset, 'metainfo', None) or {})
        self.classes = [str(c) for c in meta.get('classes') or ()]
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self._direction = str(getattr(model, 'direction', 'AtoB'))

    def draw(self, img: np.ndarray | None, sample: Any) -> np.ndarray:
        """``input | output | target`` of one sample (``img`` is unused: the sample carries its images)."""
        return sample_row(sample, self._direction)

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        for sample in outputs or []:
            if self._count >= self.max_images:
                return
            self._count += 1
            if 'fake_img' not in sample:
                raise ValueError("PredictionPicturesHook: the model's test output has no 'fake_img' (GAN models "
                                 'set it at predict time)')
            if source_field(sample, self._direction) is None:
                self._fakes.append(sample.fake_img.cpu())
                continue
            row = self.draw(None, sample)
            path = sample.metainfo.get('img_path')
            name = osp.splitext(osp.basename(path))[0] if path else f'{self._count - 1:06d}'
            cv2.imwrite(osp.join(self.out_dir, name + '.png'), row)
            self._rows.append(row)

    def after_test(self, runner) -> None:
        if self._fakes:
            ncols = grid_columns(len(self._fakes))  # test order (sorted by class), not a class sweep
            for i, fake in enumerate(self._fakes):
                cv2.imwrite(osp.join(self.out_dir, f'{i:06d}.png'), generated_grid([fake], 1, pad=0))
            cv2.imwrite(osp.join(self.out_dir, 'generated.png'), generated_grid(self._fakes, ncols))
            runner.logger.info(f'a grid of {len(self._fakes)} generated images written to {self.out_dir}')
        if self._rows:
            cv2.imwrite(osp.join(self.out_dir, 'summary.png'), make_grid(self._rows, ncols=self.grid_cols))
            runner.logger.info(f'pictures of {len(self._rows)} translations written to {self.out_dir}')
