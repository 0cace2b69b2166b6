"""``tools/browse_dataset.py`` pictures of detection samples: the augmented image with its ground-truth boxes
(and instance masks) and class names, as the model gets them (pipeline pixels: after resize, flip, mosaic...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from detection.evaluation.mask_rle import as_numpy_masks
from oars.visualization.browse import enlarge, packed_image, upscale_factor
from oars_deploy.draw import draw_boxes, get_palette, side_by_side
from oars_deploy.predictors.detection_boxes.draw_masks import draw_instance_masks


def _instances(sample: Any, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(bboxes float64 [N, 4] xyxy, labels int64 [N], bool masks [N, h, w] or None) of ``field``."""
    inst = getattr(sample, field, None)
    if inst is None:
        return np.zeros((0, 4)), np.zeros((0,), np.int64), None
    boxes = getattr(inst, "bboxes", None)
    labels = getattr(inst, "labels", None)
    boxes = np.zeros((0, 4)) if boxes is None else np.asarray(boxes.detach().cpu() if hasattr(boxes, "detach")
                                                             else boxes, dtype=np.float64).reshape(-1, 4)
    labels = np.zeros((0,), np.int64) if labels is None else np.asarray(
        labels.detach().cpu() if hasattr(labels, "detach") else labels, dtype=np.int64).reshape(-1)
    masks = getattr(inst, "masks", None)
    if masks is not None:
        masks = as_numpy_masks(masks, f"{field}.masks")
        masks = masks if len(masks) == len(labels) else None
    return boxes, labels, masks


def draw_pipeline_sample(sample: dict, dataset_meta: dict) -> np.ndarray:
    """The packed image with ``gt_instances`` drawn in class colours (masks filled under the boxes) and
    ``ignored_instances`` counted in the caption.

    Args:
        sample: ``{'inputs': uint8 [3, H, W] BGR, 'data_samples': DetDataSample}`` (``PackDetInputs``).
        dataset_meta: ``classes`` (names by label) and optionally ``palette`` (RGB rows).

    Returns:
        uint8 [H', W', 3] BGR, the image enlarged to >= 512 px on its long side plus a caption bar.
    """
    data = sample["data_samples"]
    img = packed_image(sample["inputs"], where="detection browse: inputs")
    classes = [str(c) for c in dataset_meta.get("classes") or ()]
    boxes, labels, masks = _instances(data, "gt_instances")
    if not classes:
        classes = [str(i) for i in range(int(labels.max()) + 1 if len(labels) else 1)]
    palette = get_palette(len(classes), dataset_meta.get("palette"))
    factor = upscale_factor(img.shape)
    img = enlarge(img, factor)
    if masks is not None and len(masks):
        # masks are scaled to the enlarged picture (nearest) by draw_instance_masks itself
        img = draw_instance_masks(img, masks, labels, palette, num_classes=len(classes))
    img = draw_boxes(img, boxes * factor, labels, None, classes, palette)
    ignored = len(_instances(data, "ignored_instances")[1])
    caption = f"{len(labels)} boxes" + (f", {ignored} ignored" if ignored else "")
    caption += f" | img_shape {tuple(data.metainfo.get('img_shape', img.shape[:2]))}"
    return side_by_side([img], [caption])
