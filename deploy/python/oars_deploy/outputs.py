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


def read_image(path: str) -> np.ndarray:
    """BGR uint8 HxWx3, as the pipeline's LoadImageFromFile reads it (the same messages when it cannot)."""
    if not osp.isfile(path):
        raise DeployError(f"image file not found: {path}")
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise DeployError(unreadable_image_message(path))
    return img
