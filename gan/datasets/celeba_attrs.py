"""CelebA's attribute file and the target-attribute sampling of attribute-editing GANs (StarGAN, AttGAN, STGAN)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np
import torch

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

# CelebA's hair-colour attributes: a face has at most one, so a sampled target keeps at most one of them on.
HAIR_COLOURS: tuple[str, ...] = ('Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Gray_Hair')


def read_attr_file(path: str) -> tuple[list[str], list[str], np.ndarray]:
    """Parse ``list_attr_celeba.txt``: line 1 the image count, line 2 the attribute names, then one line per
    image ``name v1 ... vN`` with values -1 / 1. ``path`` may be a URL (read through ``oars.data.storage``).

    Returns:
        (image names [M], attribute names [N], values int8 [M, N] in {-1, 1}).

    Raises ``DataFileNotFoundError`` for a missing file and ``DataError`` naming the file and line for a bad
    header, a row of the wrong length, a value other than -1 / 1, or a count that disagrees with line 1.
    """
    try:
        with storage.open_file(path, 'r', encoding='utf-8') as f:
            lines = [ln.split() for ln in f.read().splitlines() if ln.strip()]
    except FileNotFoundError:
        raise DataFileNotFoundError(f'CelebA attribute file not found: {path}') from None
    if len(lines) < 2 or len(lines[0]) != 1 or not lines[0][0].isdigit():
        raise DataError(f'{path}: expected line 1 = the number of images and line 2 = the attribute names '
                        f'(list_attr_celeba.txt format)')
    count, names, rows = int(lines[0][0]), lines[1], lines[2:]
    bad = next((i for i, r in enumerate(rows) if len(r) != len(names) + 1), None)
    if bad is not None:
        raise DataError(f'{path} row {bad + 1} ({rows[bad][0]}): {len(rows[bad]) - 1} values for {len(names)} '
                        f'attributes')
    if len(rows) != count:
        raise DataError(f'{path}: line 1 says {count} images but {len(rows)} rows follow')
    try:
        values = np.array([r[1:] for r in rows], dtype=np.int64).reshape(len(rows), len(names))
    except ValueError:
        raise DataError(f'{path}: attribute values must be integers -1 or 1') from None
    wrong = np.argwhere((values != 1) & (values != -1))
    if len(wrong):
        r, c = (int(v) for v in wrong[0])
        raise DataError(f'{path} row {r + 1} ({rows[r][0]}): attribute {names[c]} = {values[r, c]}, expected -1 or 1')
    return [r[0] for r in rows], names, values.astype(np.int8)


def select_attrs(path: str, names: Sequence[str], selected: Sequence[str]) -> list[int]:
    """Column indices of ``selected`` among the file's attribute ``names``; ``DataError`` naming an unknown
    attribute, the file and the closest valid names."""
    index = {n: i for i, n in enumerate(names)}
    cols = []
    for attr in selected:
        if attr not in index:
            close = difflib.get_close_matches(str(attr), list(names), n=3, cutoff=0.4)
            hint = f'; closest: {", ".join(close)}' if close else f'; valid: {", ".join(names)}'
            raise DataError(f'CelebA attribute {attr!r} is not in {path}{hint}')
        cols.append(index[attr])
    return cols


def sample_target_attrs(attrs: torch.Tensor, attr_names: Sequence[str],
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """Target attributes for attribute editing: the batch's attribute vectors in a random order (StarGAN's
    training rule: targets are real attribute combinations), with the hair colours kept mutually exclusive.

    Args:
        attrs: float [B, K] 0/1 attributes of the batch (any device).
        attr_names: the K names (``HAIR_COLOURS`` among them are made exclusive).
        generator: the torch generator of the permutation and of the tie-break (on ``attrs``' device).

    Returns:
        float [B, K] 0/1 (``attrs``' dtype and device). A row with several hair colours on keeps one of them,
        drawn uniformly; rows with at most one are the permuted rows unchanged.
    """
    if attrs.dim() != 2 or attrs.shape[1] != len(attr_names):
        raise ValueError(f'sample_target_attrs: attrs must be [B, K={len(attr_names)}] for attr_names '
                         f'{list(attr_names)}, got {tuple(attrs.shape)}')
    perm = torch.randperm(attrs.shape[0], generator=generator, device=generator.device if generator else None)
    target = attrs[perm.to(attrs.device)].clone()
    hair = [i for i, n in enumerate(attr_names) if n in HAIR_COLOURS]
    if len(hair) < 2:
        return target
    on = target[:, hair] > 0.5
    several = on.sum(1) > 1
    if bool(several.any()):
        noise = torch.rand(on.shape, generator=generator, device=generator.device if generator else None)
        keep = torch.where(on, noise.to(attrs.device) + 1.0, torch.zeros_like(target[:, hair])).argmax(1)
        one_hot = torch.nn.functional.one_hot(keep, len(hair)).to(target.dtype)
        target[:, hair] = torch.where(several[:, None], one_hot, target[:, hair])
    return target
