"""Pictures of detection results, shared by evaluation (--show-dir, the HTML report), tools/infer.py and the
deploy predictor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oars_deploy.draw.boxes import draw_boxes
from oars_deploy.draw.layout import enlarge, enlarge_factor, side_by_side
from oars_deploy.predictors.detection_boxes.draw_masks import draw_instance_masks

MIN_SIDE = 320  # smaller images (the 128-px demo shapes: 3x) are enlarged to this before boxes and captions are drawn


def _panel(img_bgr: np.ndarray, found: dict[str, np.ndarray], class_names: Sequence[str], palette: np.ndarray,
           scores: np.ndarray | None, score_thr: float) -> np.ndarray:
    """Instance masks (when ``found`` has ``masks``) filled translucently, then the boxes on top."""
    masks = found.get("masks")
    if masks is not None:
        img_bgr = draw_instance_masks(img_bgr, masks, found["labels"], palette, num_classes=len(class_names),
                                      scores=scores, score_thr=score_thr)
    return draw_boxes(img_bgr, found["bboxes"], found["labels"], scores, class_names, palette, score_thr=score_thr)


def draw_detection_sample(img_bgr: np.ndarray, pred: dict[str, np.ndarray], class_names: Sequence[str],
                          palette: np.ndarray, score_thr: float = 0.3,
                          gt: dict[str, np.ndarray] | None = None,
                          titles: Sequence[str] | None = None, min_side: int = MIN_SIDE) -> np.ndarray:
    """One row: ground truth (when known) | predictions with scores at or above ``score_thr``.

    ``pred``: ``bboxes`` [K, 4], ``labels`` [K], ``scores`` [K] and optionally ``masks`` (bool [K, h, w], instance
    segmentation); ``gt``: ``bboxes``, ``labels`` and optionally ``masks``. Boxes are in the pixels of
    ``img_bgr``; masks are in those pixels or in a size they are scaled from (original-image masks on a resized
    picture). Masks are filled translucently in the class colour under their boxes. ``titles`` replaces the
    default panel titles. An image whose shorter side is below ``min_side`` is enlarged by a whole factor (nearest
    neighbour; boxes scaled with it) before drawing, so captions fit beside small objects; 0 keeps the size.
    """
    factor = enlarge_factor(img_bgr.shape[0], img_bgr.shape[1], min_side)
    if factor > 1:
        img_bgr = enlarge(img_bgr, factor)
        pred = dict(pred, bboxes=np.asarray(pred["bboxes"], dtype=np.float64) * factor)
        gt = None if gt is None else dict(gt, bboxes=np.asarray(gt["bboxes"], dtype=np.float64) * factor)
    panels, titles_ = [], []
    if gt is not None:
        panels.append(_panel(img_bgr, gt, class_names, palette, None, 0.0))
        titles_.append(f"ground truth ({len(gt['labels'])})")
    kept = int((pred["scores"] >= score_thr).sum())
    panels.append(_panel(img_bgr, pred, class_names, palette, pred["scores"], score_thr))
    titles_.append(f"prediction ({kept} >= {score_thr:g})")
    return side_by_side(panels, list(titles) if titles is not None else titles_)
