"""``tools/eval.py --show-dir`` for video: per clip a strip of the frames the model saw with the true and top-3
predicted labels (PNG) and an animated GIF of the frames, plus a summary grid of the strips."""

from __future__ import annotations

import os.path as osp
from typing import Any

import cv2
import numpy as np

from oars.engine.hooks.prediction_pictures import PredictionPicturesHookBase
from video.engine.clip_pictures import batch_inputs, clip_frames, clip_labels, clip_strip, clip_title
from video.engine.localization_pictures import LocalizationPictures
from video.engine.localization_records import is_localization_dataset
from video.registry import HOOKS
from video.visualization import gif_frames, write_gif


@HOOKS.register_module()
class PredictionPicturesHook(PredictionPicturesHookBase):
    """For the first ``max_images`` test clips write ``<out_dir>/<clip>.png`` (up to ``max_frames`` evenly spaced
    frames of the first view in one row, ``frame_height`` px high, above the true label and the ``topk``
    predictions with scores: green a true class, red not) and, with ``gif``, ``<out_dir>/<clip>.gif`` (every
    frame of the first view, at most ``max_gif_frames``, at ``gif_fps``); then ``summary.png``.

    Localisation test sets (timed segments, :func:`is_localization_dataset`) get one timeline picture per video
    instead (:class:`video.engine.localization_pictures.LocalizationPictures`).

    The frames are the test batch's uint8 ``inputs`` (BGR, after the pipeline's resizing and cropping). Feature
    models' clips (no frames) get the label panel alone and no GIF. Names repeated among clips get ``_1``, ...
    """

    def __init__(self, out_dir: str, max_images: int = 24, grid_cols: int = 2, topk: int = 3, max_frames: int = 8,
                 frame_height: int = 96, gif: bool = True, gif_fps: float = 8.0, max_gif_frames: int = 64) -> None:
        super().__init__(out_dir, max_images, grid_cols)
        for key, value in (('topk', topk), ('max_frames', max_frames), ('frame_height', frame_height),
                           ('max_gif_frames', max_gif_frames)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'PredictionPicturesHook: {key} must be a positive int, got {value!r}')
        if gif_fps <= 0:
            raise ValueError(f'PredictionPicturesHook: gif_fps must be > 0, got {gif_fps!r}')
        self.topk, self.max_frames, self.frame_height = topk, max_frames, frame_height
        self.gif, self.gif_fps, self.max_gif_frames = bool(gif), float(gif_fps), max_gif_frames
        self._names: set[str] = set()
        self._timelines: LocalizationPictures | None = None

    def before_test(self, runner) -> None:
        self._timelines = None
        if is_localization_dataset(runner.test_dataloader.dataset):  # timed segments: timelines instead of strips
            self._timelines = LocalizationPictures(self.out_dir, self.max_images)
            self._timelines.before_test(runner)
            return
        super().before_test(runner)
        self._names = set()

    def after_test(self, runner) -> None:
        if self._timelines is not None:
            self._timelines.after_test(runner)
            return
        super().after_test(runner)

    def draw(self, img: np.ndarray | None, sample: Any) -> np.ndarray:
        """The strip of ``img`` (the clip's frames, uint8 BGR [T, H, W, 3], or None) with the labels."""
        return clip_strip(sample, img, self.classes, self.topk, self.max_frames, self.frame_height)

    def _unique_name(self, sample: Any) -> str:
        stem = osp.splitext(clip_title(sample))[0] or 'clip'
        name, i = stem, 0
        while name in self._names:
            i += 1
            name = f'{stem}_{i}'
        self._names.add(name)
        return name

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        if self._timelines is not None:
            self._timelines.after_test_iter(runner, batch_idx, data_batch, outputs)
            return
        outputs = list(outputs or [])
        for sample, inputs in zip(outputs, batch_inputs(data_batch, len(outputs))):
            if len(self._rows) >= self.max_images:
                return
            frames = clip_frames(sample, inputs)
            row = self.draw(frames, sample)
            name = self._unique_name(sample)
            cv2.imwrite(osp.join(self.out_dir, name + '.png'), row)
            if self.gif and frames is not None:
                scores, true_ids = clip_labels(sample)
                shown = frames[: self.max_gif_frames]
                write_gif(gif_frames(shown, scores, true_ids, self.classes, max(self.frame_height, 128)),
                          osp.join(self.out_dir, name + '.gif'), self.gif_fps)
            self._rows.append(row)
