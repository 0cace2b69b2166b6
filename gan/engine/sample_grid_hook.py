"""Training progress you can look at: a grid of generated images from fixed inputs every N iterations."""

from __future__ import annotations

import copy
import os
import os.path as osp
import random
from typing import Any

import cv2
import numpy as np
import torch
from mmengine.dataset import pseudo_collate
from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from gan.registry import HOOKS
from gan.structures import GANDataSample
from gan.visualization import generated_grid, grid_columns, sample_row
from oars_deploy.draw import make_grid


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f'SampleGridHook: {name} must be an integer >= {low}, got {value!r}')
    return value


@HOOKS.register_module()
class SampleGridHook(Hook):
    """Every ``interval`` training iterations (and after the last), write ``<work_dir>/<out_dir>/iter_XXXXXX.png``.

    The inputs never change during a run, so successive grids show the same samples improving:

    * noise models (the model has ``noise_size``: DCGAN, CGAN): ``num`` samples whose noise is drawn from
      ``seed + i`` (the models' per-sample ``seed`` metainfo); with ``num_classes`` (CGAN) sample i has label
      ``i % num_classes`` and the grid has one column per class. Nothing needs saving: a resumed run draws the same.
    * image-to-image models: the first ``num`` samples of the validation set (the training set when there is none),
      drawn as ``input | output | target`` rows. Fetching them saves and restores the python / numpy / torch random
      state, so a run with the hook trains exactly as one without.

    The model runs in eval mode without gradients (EMA generator when configured) and is put back in train mode.
    Only the main process draws. Args: ``interval`` (iterations), ``num`` (samples), ``out_dir`` (relative to the
    work dir unless absolute), ``seed``, ``ncols`` (None: one per class or near-square).
    """

    priority = 'LOW'

    def __init__(self, interval: int = 1000, num: int = 16, out_dir: str = 'samples', seed: int = 0,
                 ncols: int | None = None) -> None:
        self.interval = _check_int('interval', interval, 1)
        self.num = _check_int('num', num, 1)
        self.seed = _check_int('seed', seed, 0)
        self.ncols = None if ncols is None else _check_int('ncols', ncols, 1)
        self.out_dir = out_dir
        self._batch: dict | None = None

    @staticmethod
    def _model(runner) -> torch.nn.Module:
        return runner.model.module if is_model_wrapper(runner.model) else runner.model

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        if self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner):
            self.write(runner, runner.iter + 1)

    def write(self, runner, iteration: int) -> str | None:
        """Draw the grid of ``iteration``; returns the file written (None on other ranks)."""
        if not is_main_process():
            return None
        model = self._model(runner)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                grid = self._draw(runner, model)
        finally:
            model.train(was_training)
        out_dir = self.out_dir if osp.isabs(self.out_dir) else osp.join(runner.work_dir, self.out_dir)
        os.makedirs(out_dir, exist_ok=True)
        path = osp.join(out_dir, f'iter_{iteration:06d}.png')
        if not cv2.imwrite(path, grid):
            raise OSError(f'SampleGridHook: could not write {path}')
        return path

    def _draw(self, runner, model) -> np.ndarray:
        if hasattr(model, 'noise_size'):
            num_classes = int(getattr(model, 'num_classes', 0) or 0)
            samples = [GANDataSample(metainfo={'seed': self.seed + i, **({'label': i % num_classes}
                                                                         if num_classes else {})})
                       for i in range(self.num)]
            out = model.predict({}, samples)
            return generated_grid([s.fake_img for s in out], self.ncols or grid_columns(self.num, num_classes))
        data = self.data_preprocessor_input(model, self._fixed_batch(runner))
        out = model.predict(data['inputs'], data['data_samples'])
        direction = str(getattr(model, 'direction', 'AtoB'))
        return make_grid([sample_row(s, direction) for s in out], ncols=self.ncols or 2)

    @staticmethod
    def data_preprocessor_input(model, batch: dict) -> dict:
        """The fixed batch normalised on the model's device (fresh data samples: predict writes into them)."""
        return model.data_preprocessor(copy.deepcopy(batch), False)

    def _fixed_batch(self, runner) -> dict:
        """The first ``num`` samples of the validation (else training) set, collated once."""
        if self._batch is None:
            dataset = None
            for name in ('val_dataloader', 'train_dataloader'):
                try:
                    loader = getattr(runner, name)
                except Exception:  # noqa: BLE001 - mmengine raises when the loop or loader is not configured
                    continue
                if loader is not None and hasattr(loader, 'dataset'):
                    dataset = loader.dataset
                    break
            if dataset is None or len(dataset) == 0:
                raise ValueError('SampleGridHook: an image-to-image model needs a val_dataloader or '
                                 'train_dataloader to take its fixed inputs from')
            state = random.getstate(), np.random.get_state(), torch.get_rng_state()
            try:
                self._batch = pseudo_collate([dataset[i] for i in range(min(self.num, len(dataset)))])
            finally:
                random.setstate(state[0])
                np.random.set_state(state[1])
                torch.set_rng_state(state[2])
        return self._batch
