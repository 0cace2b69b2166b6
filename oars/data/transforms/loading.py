"""Read an image from disk into the results dict (OpenCV, BGR)."""

from __future__ import annotations

import os

import cv2
import numpy as np

from oars.errors import DataError, DataFileNotFoundError
from oars.registry import TRANSFORMS

_COLOR_FLAGS = {
    'color': cv2.IMREAD_COLOR,
    'grayscale': cv2.IMREAD_GRAYSCALE,
    'unchanged': cv2.IMREAD_UNCHANGED,
}


@TRANSFORMS.register_module()
class LoadImageFromFile:
    """Load ``results['img_path']`` with ``cv2.imread``; set ``img`` (H×W×3 uint8 BGR for 'color'),
    ``img_shape`` and ``ori_shape`` (H, W).

    ``color_type``: 'color' | 'grayscale' | 'unchanged'. ``to_float32`` converts to float32.
    """

    def __init__(self, to_float32: bool = False, color_type: str = 'color') -> None:
        if color_type not in _COLOR_FLAGS:
            raise DataError(f'LoadImageFromFile: color_type {color_type!r} is not one of {list(_COLOR_FLAGS)}')
        self.to_float32 = to_float32
        self.color_type = color_type

    def __call__(self, results: dict) -> dict:
        path = results.get('img_path')
        if path is None:
            raise KeyError("LoadImageFromFile needs results['img_path']")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise DataFileNotFoundError(f'image file not found: {path}')
        img = cv2.imread(path, _COLOR_FLAGS[self.color_type])
        if img is None:
            raise DataFileNotFoundError(f'could not read image (unsupported or corrupt file): {path}')
        if self.to_float32:
            img = img.astype(np.float32)
        results['img'] = img
        results['img_shape'] = tuple(int(s) for s in img.shape[:2])
        results['ori_shape'] = tuple(int(s) for s in img.shape[:2])
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(to_float32={self.to_float32}, color_type={self.color_type!r})'
