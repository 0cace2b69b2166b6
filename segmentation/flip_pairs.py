"""Left/right label pairs of human parsing (LIP: left/right arm 14/15, leg 16/17, shoe 18/19): checked once, used by
the flip augmentation (:class:`segmentation.transforms_parsing.RandomFlipParsing`) and the flip test-time
augmentation (``test_cfg.aug.flip_label_pairs``, :func:`segmentation.models.segmentors.tta.tta_inference`).

Why: a mirrored person's left arm is where a right arm would be. A flipped training image whose labels are not
swapped teaches the model that left and right look alike (it learns to guess); a flipped test view whose predicted
channels are not swapped back votes "right arm" on the left arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LIP_FLIP_PAIRS: tuple[tuple[int, int], ...] = ((14, 15), (16, 17), (18, 19))


def check_flip_pairs(pairs: Any, owner: str, num_classes: int | None = None) -> tuple[tuple[int, int], ...]:
    """``pairs`` (None or a list of [a, b] class ids) as a tuple of int pairs; ValueError naming ``owner`` (the
    config key) for anything else: not pairs, negative ids, a pair of one id, an id in two pairs, or (with
    ``num_classes``) an id that is not a class."""
    if pairs is None:
        return ()
    expected = "a list of [left, right] class-id pairs such as [[14, 15], [16, 17], [18, 19]] (or null)"
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise ValueError(f"{owner} must be {expected}, got {pairs!r}")
    out: list[tuple[int, int]] = []
    for pair in pairs:
        if (isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in pair)):
            raise ValueError(f"{owner} must be {expected}, got the entry {pair!r}")
        a, b = int(pair[0]), int(pair[1])
        if a == b:
            raise ValueError(f"{owner}: the pair [{a}, {b}] swaps a class with itself; expected two different ids")
        out.append((a, b))
    ids = [v for pair in out for v in pair]
    repeated = sorted({v for v in ids if ids.count(v) > 1})
    if repeated:
        raise ValueError(f"{owner}: class ids {repeated} appear in more than one pair; each id may be swapped once")
    if num_classes is not None and ids and max(ids) >= num_classes:
        raise ValueError(f"{owner}: class id {max(ids)} is not a class of the model (num_classes={num_classes}, ids "
                         f"0..{num_classes - 1})")
    return tuple(out)


def pair_permutation(pairs: Sequence[tuple[int, int]], size: int) -> np.ndarray:
    """int64 [size]: the identity with each pair's two entries exchanged (``perm[a] = b``, ``perm[b] = a``). Used
    as a lookup table on label values (``perm[label]``) and as a channel index on class scores
    (``scores[:, perm]``); it is its own inverse."""
    perm = np.arange(size, dtype=np.int64)
    for a, b in pairs:
        perm[a], perm[b] = b, a
    return perm


def swap_label_pairs(label: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """``label`` (integer class ids, any shape) with the ids of each pair exchanged; other values (the ignore
    index included) unchanged. Same dtype; vectorised (one table lookup)."""
    if not pairs:
        return label
    size = max(int(label.max(initial=0)) + 1, max(max(p) for p in pairs) + 1)
    return pair_permutation(pairs, size)[label].astype(label.dtype, copy=False)
