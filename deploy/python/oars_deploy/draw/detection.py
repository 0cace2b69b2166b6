"""Pictures of detection results, shared by evaluation (--show-dir, the HTML report), tools/infer.py and the
deploy predictor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oars_deploy.draw.boxes import draw_boxes
from oars_deploy.draw.layout import side_by_side


def draw_detection_sample(img_bgr: np.ndarray, pred: dict[str, np.ndarray], class_names: Sequence[str],
                          palette: np.ndarray, score_thr: float = 0.3,
                          gt: dict[str, np.ndarray] | None = None,
                          titles: Sequence[str] | None = None) -> np.ndarray:
    """One row: ground truth boxes (when known) | predicted boxes with scores at or above ``score_thr``.

    All boxes are in the pixels of ``img_bgr``. ``titles`` replaces the default panel titles.
    """
    panels, titles_ = [], []
    if gt is not None:
        panels.append(draw_boxes(img_bgr, gt["bboxes"], gt["labels"], None, class_names, palette))
        titles_.append(f"ground truth ({len(gt['labels'])})")
    kept = int((pred["scores"] >= score_thr).sum())
    panels.append(draw_boxes(img_bgr, pred["bboxes"], pred["labels"], pred["scores"], class_names, palette,
                             score_thr=score_thr))
    titles_.append(f"prediction ({kept} >= {score_thr:g})")
    return side_by_side(panels, list(titles) if titles is not None else titles_)
