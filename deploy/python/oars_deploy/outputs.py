"""Reading an input image as the pipeline does (:func:`read_image`), for every image predictor.

What each kind of model writes is its plug-in's (:mod:`oars_deploy.predictors`): segmentation ``<stem>_vis.png``
and ``<stem>.png`` (semantic_labels), detection ``<stem>_vis.png`` and ``detections.json`` (detection_boxes,
instance_masks), with the drawing functions tools/infer.py calls too; every run's results.jsonl is written by
:func:`oars_deploy.records.write_results`.
"""

from __future__ import annotations

import os.path as osp

import cv2
import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.image_files import unreadable_image_message
from oars_deploy.image_limits import MAX_FILE_PIXELS, file_size_problem


def read_image(path: str, max_pixels: int = MAX_FILE_PIXELS) -> np.ndarray:
    """BGR uint8 HxWx3, as the pipeline's LoadImageFromFile reads it (the same messages when it cannot).

    The size the file's header declares (:mod:`oars_deploy.image_header`) is checked against ``max_pixels`` before
    OpenCV decodes it; a file in a format whose header is not read here is left to OpenCV (a local file: its
    decoded size is checked after), one whose header is truncated or corrupt is refused.

    Raises:
        DeployError: not found, above ``max_pixels``, a corrupt header, or not decodable (naming the file).
    """
    if not osp.isfile(path):
        raise DeployError(f"image file not found: {path}")
    problem = file_size_problem(path, max_pixels)
    if problem is not None:
        raise DeployError(problem)
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise DeployError(unreadable_image_message(path))
    if img.shape[0] * img.shape[1] > max_pixels:
        raise DeployError(f"{path}: image of {img.shape[1]}x{img.shape[0]} = {img.shape[0] * img.shape[1]} pixels "
                          f"exceeds the limit of {max_pixels} pixels for an input image")
    return img
