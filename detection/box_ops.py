"""NumPy faces of ``torchvision.ops`` box functions, for the code that holds boxes as arrays
(transforms in DataLoader workers, metrics, export comparisons).

One implementation per operation: the arithmetic is torchvision's, these wrappers only convert
arrays and define the empty cases, so every caller gets the same edge-case behaviour.
"""

from __future__ import annotations

import numpy as np
import torch
from torchvision.ops import box_iou, clip_boxes_to_image


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` with every box in ``b``.

    Args:
        a: [K, 4] xyxy boxes (any float dtype).
        b: [N, 4] xyxy boxes.

    Returns:
        float64 [K, N]; 0 (not NaN) where both boxes are empty, [K, 0] or [0, N] when one side is empty.
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    return np.nan_to_num(box_iou(torch.from_numpy(a), torch.from_numpy(b)).numpy(), nan=0.0)


def clip_boxes(boxes: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Clip xyxy boxes [N, 4] to an image of ``shape`` (H, W); returns a new array of the input's dtype."""
    boxes = np.asarray(boxes).reshape(-1, 4)
    clipped = clip_boxes_to_image(torch.from_numpy(np.ascontiguousarray(boxes)), (int(shape[0]), int(shape[1])))
    return clipped.numpy().astype(boxes.dtype, copy=False)

