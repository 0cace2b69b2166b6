"""``tools/eval.py --show-dir`` for temporal action localisation: one timeline picture per test video.

The video task's ``PredictionPicturesHook`` hands its work to :class:`LocalizationPictures` when the test dataset
holds timed segments (:func:`is_localization_dataset`), so the one name ``tools/eval.py`` adds serves both
recognition and localisation configs.
"""

from __future__ import annotations

import os
import os.path as osp
import re
from typing import Any

import cv2
import numpy as np

from oars_deploy.draw import make_grid
from oars_deploy.words import plural
from video.engine.localization_records import (
    localization_record,
    read_frames,
    timeline_picture,
    video_folder,
)


class LocalizationPictures:
    """Writes ``<out_dir>/<video>.png`` for the first ``max_images`` test videos: frames along time (when the
    config names the videos' folder as the dataset's ``data_prefix.video``), the ground-truth segments and the
    ``top_k`` best predicted ones (:func:`timeline_picture`); then ``summary.png``, the first ``grid_rows`` of
    them stacked.

    Args:
        out_dir: the pictures' folder (created).
        max_images: videos drawn.
        top_k: predicted segments drawn per video.
        num_frames: frames in each picture's strip.
        grid_rows: pictures in ``summary.png``.
    """

    def __init__(self, out_dir: str, max_images: int = 24, top_k: int = 5, num_frames: int = 12,
                 grid_rows: int = 6) -> None:
        for key, value in (('max_images', max_images), ('top_k', top_k), ('num_frames', num_frames),
                           ('grid_rows', grid_rows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'LocalizationPictures: {key} must be a positive int, got {value!r}')
        self.out_dir, self.max_images, self.top_k = out_dir, max_images, top_k
        self.num_frames, self.grid_rows = num_frames, grid_rows
        self.classes: list[str] = []
        self._folder: str | None = None
        self._rows: list[np.ndarray] = []
        self._names: set[str] = set()

    def before_test(self, runner) -> None:
        dataset = runner.test_dataloader.dataset
        os.makedirs(self.out_dir, exist_ok=True)
        self.classes = [str(c) for c in dataset.metainfo['classes']]
        self._folder = video_folder(dataset)
        self._rows, self._names = [], set()

    def _file_name(self, name: str) -> str:
        stem = re.sub(r'[^\w.-]+', '_', name).strip('.') or 'video'
        out, i = stem, 0
        while out in self._names:
            i += 1
            out = f'{stem}_{i}'
        self._names.add(out)
        return out

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        for sample in outputs or []:
            if len(self._names) >= self.max_images:
                return
            record = localization_record(sample, self._folder)
            picture = timeline_picture(record, self.classes, self.top_k, read_frames(record['video'],
                                                                                      self.num_frames))
            cv2.imwrite(osp.join(self.out_dir, self._file_name(record['name']) + '.png'), picture)
            if len(self._rows) < self.grid_rows:
                self._rows.append(picture)

    def after_test(self, runner) -> None:
        if self._rows:
            cv2.imwrite(osp.join(self.out_dir, 'summary.png'), make_grid(self._rows, ncols=1))
        runner.logger.info(f'timelines of {plural(len(self._names), "video")} written to {self.out_dir}'
                           + ('' if self._folder else ' (no frames: set the dataset\'s data_prefix.video to the '
                              'videos\' folder to draw them)'))
