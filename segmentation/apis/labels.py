"""Class labels at the original image size without the full-size logits.

``EncoderDecoder.postprocess_result`` resizes the ``[C, h, w]`` logits bilinearly to the original ``(H, W)`` and
takes the argmax: ``C x H x W`` float32 plus an int64 ``H x W`` label map, 5.1 GB of RSS for an 8000x8000 image
with 4 classes in ``tools/infer.py``. :func:`upsample_argmax` gives the same labels one class plane at a time:
each plane is the same bilinear kernel on the same global coordinates (so the values are bit for bit those of
the full resize), and a running maximum keeps the first largest class as ``argmax`` does. Peak memory is two
float32 planes, one bool plane and the label map (10 bytes per pixel for uint8 labels) whatever ``C`` is.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from segmentation.models.utils import resize


def label_dtype(num_classes: int) -> torch.dtype:
    """The smallest integer type holding class ids ``0 .. num_classes - 1`` (uint8 up to 256 classes)."""
    if num_classes <= 256:
        return torch.uint8
    return torch.int16 if num_classes <= 32768 else torch.int32


def upsample_argmax(logits: torch.Tensor, size: Sequence[int], align_corners: bool = False) -> torch.Tensor:
    """``resize(logits[None], size).argmax(1)[0]`` without holding the resized ``[C, H, W]`` logits.

    Args:
        logits: ``[C, h, w]`` float class scores (the model's, at the resized image size).
        size: ``(H, W)`` to resize to (the original image size).
        align_corners: the segmentor's ``align_corners``.

    Returns:
        ``[H, W]`` class ids of dtype :func:`label_dtype` ``(C)``, equal to the full resize's argmax (ties go to
        the lower class, as ``argmax``).
    """
    if logits.ndim != 3 or logits.shape[0] == 0:
        raise ValueError(f"upsample_argmax: logits must be [C, h, w] with C >= 1, got {list(logits.shape)}")
    size = (int(size[0]), int(size[1]))
    num_classes = int(logits.shape[0])
    best = resize(logits[None, :1], size, align_corners)[0, 0].clone()  # clone: resize may return its input
    label = torch.zeros(size, dtype=label_dtype(num_classes), device=logits.device)
    better = torch.empty(size, dtype=torch.bool, device=logits.device)
    for c in range(1, num_classes):
        plane = resize(logits[None, c:c + 1], size, align_corners)[0, 0]
        torch.gt(plane, best, out=better)
        label.masked_fill_(better, c)
        torch.maximum(best, plane, out=best)
        del plane
    return label
