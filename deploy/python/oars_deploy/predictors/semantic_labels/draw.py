"""Pictures of segmentation results, shared by evaluation (--show-dir), tools/infer.py and the deploy predictor."""

from __future__ import annotations

import cv2
import numpy as np

from oars_deploy.draw.layout import enlarge, enlarge_factor, side_by_side
from oars_deploy.draw.masks import colorize_mask, draw_legend, overlay_mask

MIN_SIDE = 256  # panels of smaller images (the 128-px demo shapes) are enlarged to this, so shapes and captions read
PICTURE_MAX_SIDE = 2048  # long side of each panel of <stem>_vis.png; larger images are drawn scaled down


def picture_inputs(img: np.ndarray, label: np.ndarray, max_side: int = PICTURE_MAX_SIDE) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """The image (area) and labels (nearest) scaled so that the long side is at most ``max_side``.

    Why: the picture of an 8000x8000 image is three full-size panels (image, prediction, overlay) of 192 MB each;
    the label PNG keeps the full size, the picture need not.

    Args:
        img: uint8 [H, W, 3] BGR. label: integer [H, W] class ids. max_side: the longest side kept.

    Returns:
        (uint8 [h, w, 3], label [h, w] of the same dtype); the inputs themselves when already small enough.
    """
    h, w = label.shape[:2]
    factor = max_side / max(h, w)
    if factor >= 1:
        return img, label
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    # nearest by index (OpenCV's rule, floor(dst * src / dst_size)): any integer dtype, int64 included
    rows = np.arange(size[1]) * h // size[1]
    cols = np.arange(size[0]) * w // size[0]
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA), label[rows[:, None], cols[None, :]]


def draw_sample(img_bgr: np.ndarray, pred: np.ndarray, palette: np.ndarray, gt: np.ndarray | None = None,
                class_names: list[str] | None = None, min_side: int = MIN_SIDE) -> np.ndarray:
    """One row of panels: the image, its ground truth (when known) and the prediction as class
    colours, with a legend of the classes present.

    Args:
        img_bgr: uint8 [H, W, 3] BGR image.
        pred: integer [H, W] class ids (255: ignore).
        palette: [C, 3] RGB rows.
        gt: integer [H, W] class ids or None.
        class_names: C names for the legend (no legend when None).
        min_side: an image whose shorter side is below this is enlarged by a whole factor (nearest neighbour)
            before drawing, so small images are large enough to read; 0 keeps the size.

    Returns:
        uint8 [H', W', 3] BGR picture.
    """
    factor = enlarge_factor(img_bgr.shape[0], img_bgr.shape[1], min_side)
    # colours and the overlay are per-pixel, so they are drawn at the image's own size and the panels enlarged
    # after (nearest neighbour: the same pixels as drawing on enlarged inputs, a factor^2 less work)
    pred_colour = colorize_mask(pred, palette)
    panels, titles = [img_bgr], ["image"]
    if gt is not None:
        panels.append(colorize_mask(gt, palette))
        titles.append("ground truth")
    panels.append(pred_colour)
    titles.append("prediction")
    panels.append(overlay_mask(img_bgr, pred, palette, alpha=0.5, colour=pred_colour))
    titles.append("overlay")
    panels = [enlarge(p, factor) for p in panels]
    row = side_by_side(panels, titles)
    if class_names:
        present = ids_present(pred) if gt is None else np.union1d(ids_present(gt), ids_present(pred))
        row = draw_legend(row, class_names, palette, present_only_ids=present)
    return row


def ids_present(mask: np.ndarray) -> np.ndarray:
    """The sorted ids in an integer [H, W] class-id ``mask`` (``np.unique``'s answer by counting, several times
    faster on label maps: drawn once per frame of a stream)."""
    flat = np.asarray(mask).ravel()
    if flat.size == 0:
        return flat.astype(np.int64)
    if flat.min() < 0:
        return np.unique(flat)
    return np.flatnonzero(np.bincount(flat.astype(np.int64, copy=False)))
