"""Test-time augmentation for segmentors: multi-scale and flipped views of a batch, softmax probabilities averaged.

``test_cfg.aug`` = ``{scales: [0.75, 1.0, 1.25], flip: true, flip_direction: [horizontal]}``, plus, for human
parsing, ``flip_label_pairs: [[14, 15], [16, 17], [18, 19]]`` (default none): the class channels of a mirrored
view's prediction are swapped pair by pair after un-flipping, since a mirrored left arm is predicted as a right arm
(horizontal and vertical flips mirror; a diagonal flip is a 180-degree rotation and keeps left and right). Each
scale resizes the
(padded) batch, the flipped copies go in the same forward as the unflipped view, and every view's logits are
un-flipped, resized back to the batch size and turned into probabilities before the average. Probabilities, not
logits, are averaged (as mmseg's ``SegTTAModel``): a view that is very confident somewhere cannot outvote the others
by the scale of its logits alone.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from segmentation.flip_pairs import check_flip_pairs, pair_permutation

from ..utils import resize

# flip direction -> tensor dims of a [B, C, H, W] batch it reverses (the same names as RandomFlip's metainfo)
FLIP_DIMS: dict[str, tuple[int, ...]] = {"horizontal": (3,), "vertical": (2,), "diagonal": (2, 3)}
AUG_KEYS = ("scales", "flip", "flip_direction", "size_divisor", "flip_label_pairs")
MIRRORS = ("horizontal", "vertical")  # the flips that exchange a person's left and right


def _fail(key: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"EncoderDecoder: test_cfg.aug.{key} must be {expected}, got {value!r}")


def check_aug_cfg(aug: Any) -> dict[str, Any]:
    """Validate ``test_cfg.aug`` and return it normalised.

    Returns ``{'scales': [float > 0, ...], 'flip': bool, 'flip_direction': [str, ...], 'size_divisor': int | None}``
    plus ``'flip_label_pairs': ((a, b), ...)`` when given (:func:`segmentation.flip_pairs.check_flip_pairs`);
    ``flip_direction`` (a name or a list of names from :data:`FLIP_DIMS`, default ``[horizontal]``) is kept even when
    ``flip`` is false but then unused. ``scales`` defaults to ``[1.0]``; ``size_divisor`` (None: the data
    preprocessor's) pads each scaled view up to a multiple of it, for backbones such as U-Net that need one.
    Raises ValueError naming the key, the value and what was expected.
    """
    if not isinstance(aug, Mapping):
        raise ValueError(f"EncoderDecoder: test_cfg.aug must be a mapping such as {{scales: [0.75, 1.0, 1.25], "
                         f"flip: true}}, got {aug!r}")
    unknown = [k for k in aug if k not in AUG_KEYS]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), AUG_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"EncoderDecoder: unknown key test_cfg.aug.{unknown[0]}{hint}; valid keys: {list(AUG_KEYS)}")
    scales = aug.get("scales", [1.0])
    if isinstance(scales, (int, float)) and not isinstance(scales, bool):
        scales = [scales]
    if (not isinstance(scales, Sequence) or isinstance(scales, str) or not scales
            or any(isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0
                   for s in scales)):
        raise _fail("scales", scales, "a non-empty list of positive numbers (resize factors of the input)")
    flip = aug.get("flip", False)
    if not isinstance(flip, bool):
        raise _fail("flip", flip, "true or false")
    directions = aug.get("flip_direction", ["horizontal"])
    if isinstance(directions, str):
        directions = [directions]
    if (not isinstance(directions, Sequence) or not directions
            or any(not isinstance(d, str) or d not in FLIP_DIMS for d in directions)):
        raise _fail("flip_direction", directions, f"a non-empty list of {list(FLIP_DIMS)}")
    if len(set(directions)) != len(directions):
        raise _fail("flip_direction", directions, "a list without repeats")
    divisor = aug.get("size_divisor")
    if divisor is not None and (isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1):
        raise _fail("size_divisor", divisor, "an int >= 1 or null (the data preprocessor's)")
    out = {"scales": [float(s) for s in scales], "flip": flip, "flip_direction": list(directions),
           "size_divisor": divisor}
    pairs = check_flip_pairs(aug.get("flip_label_pairs"), "EncoderDecoder: test_cfg.aug.flip_label_pairs")
    if pairs:  # only when asked for: every other model's normalised aug stays as it was
        out["flip_label_pairs"] = pairs
    return out


def tta_inference(
    inputs: torch.Tensor,
    infer: Callable[[torch.Tensor], torch.Tensor],
    scales: Sequence[float],
    flip_directions: Sequence[str] = (),
    size_divisor: int = 1,
    pad_val: float = 0.0,
    align_corners: bool = False,
    flip_label_pairs: Sequence[tuple[int, int]] = (),
) -> torch.Tensor:
    """Average softmax probabilities of ``infer`` over scaled and flipped views of a batch.

    Args:
        inputs: the normalised, padded batch [B, C, H, W] (float).
        infer: views [N, C, h, w] -> logits [N, K, h, w] (whole-image or sliding-window inference).
        scales: resize factors; scale s runs on a (round(s H), round(s W)) bilinear resize of ``inputs``.
        flip_directions: names from :data:`FLIP_DIMS`; each adds a flipped copy per scale, stacked in the same
            forward as the unflipped view ([(1 + len) B, ...]), so a scale is one call of ``infer``.
        size_divisor: each scaled view is padded at the bottom/right with ``pad_val`` (normalised space, as the
            data preprocessor pads) up to a multiple of it; the padding is cropped off the logits.
        align_corners: of the bilinear resizes (input down/up, logits back to (H, W)).
        flip_label_pairs: class-id pairs whose channels are exchanged in the logits of each mirrored view
            (horizontal, vertical) after un-flipping; empty: none.

    Returns:
        float probabilities [B, K, H, W] (sum 1 over K): the mean over ``len(scales) * (1 + len(flip_directions))``
        views of the softmax of each view's logits, un-flipped and resized to (H, W).
    """
    b, _, h, w = inputs.shape
    dims = [FLIP_DIMS[d] for d in flip_directions]
    swaps = [bool(flip_label_pairs) and d in MIRRORS for d in flip_directions]
    perm = None
    total: torch.Tensor | None = None
    for scale in scales:
        sh, sw = max(1, round(h * scale)), max(1, round(w * scale))
        x = resize(inputs, (sh, sw), align_corners)
        views = torch.cat([x, *(x.flip(d) for d in dims)]) if dims else x
        ph, pw = (math.ceil(sh / size_divisor) * size_divisor, math.ceil(sw / size_divisor) * size_divisor)
        if (ph, pw) != (sh, sw):
            views = F.pad(views, (0, pw - sw, 0, ph - sh), value=float(pad_val))
        logits = infer(views)[..., :sh, :sw]
        parts = logits.split(b)
        for part, d, swap in zip(parts, [None, *dims], [False, *swaps]):
            part = part if d is None else part.flip(d)
            if swap:
                if perm is None:
                    perm = torch.from_numpy(pair_permutation(flip_label_pairs, part.shape[1])).to(part.device)
                part = part.index_select(1, perm)
            prob = resize(part, (h, w), align_corners).softmax(dim=1)
            total = prob if total is None else total.add_(prob)
    assert total is not None  # scales is never empty (check_aug_cfg)
    return total.div_(len(scales) * (1 + len(dims)))
