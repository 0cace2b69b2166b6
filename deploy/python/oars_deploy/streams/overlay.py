"""A caption drawn over a stream's frame (the clip classifier's label and score), OpenCV, torch-free."""

from __future__ import annotations

import cv2
import numpy as np


def draw_caption(img: np.ndarray, lines: list[str]) -> np.ndarray:
    """A copy of ``img`` with ``lines`` written top-left, white on a dark box (readable on any frame).

    Args:
        img: HxWx3 uint8 BGR.
        lines: text lines, top first (ASCII: OpenCV's Hershey font has no other glyphs).

    Returns:
        HxWx3 uint8 BGR; the font grows with the frame and never drops below a readable size.
    """
    out = img.copy()
    h, w = out.shape[:2]
    font, scale = cv2.FONT_HERSHEY_SIMPLEX, float(np.clip(max(h, w) / 900, 0.35, 1.2))
    thick = max(1, int(round(scale * 1.5)))
    y = 2
    for line in lines:
        (tw, th), base = cv2.getTextSize(line, font, scale, thick)
        box_h = th + base + 4
        cv2.rectangle(out, (2, y), (min(w - 1, tw + 6), min(h - 1, y + box_h)), (32, 32, 32), cv2.FILLED)
        cv2.putText(out, line, (4, y + th + 2), font, scale, (255, 255, 255), thick, cv2.LINE_AA)
        y += box_h + 2
    return out
