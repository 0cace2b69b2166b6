"""Pictures of segmentation results, shared by evaluation (--show-dir), tools/infer.py and the deploy predictor."""

from __future__ import annotations

import numpy as np

from oars_deploy.draw.layout import side_by_side
from oars_deploy.draw.masks import colorize_mask, draw_legend, overlay_mask


def draw_sample(img_bgr: np.ndarray, pred: np.ndarray, palette: np.ndarray, gt: np.ndarray | None = None,
                class_names: list[str] | None = None) -> np.ndarray:
    """One row of panels: the image, its ground truth (when known) and the prediction as class
    colours, with a legend of the classes present."""
    panels, titles = [img_bgr], ["image"]
    if gt is not None:
        panels.append(colorize_mask(gt, palette))
        titles.append("ground truth")
    panels.append(colorize_mask(pred, palette))
    titles.append("prediction")
    panels.append(overlay_mask(img_bgr, pred, palette, alpha=0.5))
    titles.append("overlay")
    row = side_by_side(panels, titles)
    if class_names:
        present = np.unique(pred) if gt is None else np.union1d(np.unique(gt), np.unique(pred))
        row = draw_legend(row, class_names, palette, present_only_ids=present)
    return row
