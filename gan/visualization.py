"""Pictures of GAN results: data-sample tensors -> BGR uint8 arrays, generated grids and input | output | target rows.

Why here and not in ``oars_deploy.draw``: the inputs are the gan contract's data-sample fields (float [C, H, W]
RGB in 0..255, torch tensors); the layout itself (``make_grid``, ``side_by_side``) is the shared oars_deploy one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
import torch

from oars_deploy.draw import make_grid, side_by_side

MIN_PANEL_SIDE = 128  # small GAN images (28-64 px) are enlarged (nearest, whole factor) so captions stay readable
MIN_CELL_SIDE = 64  # cells of generated grids (32-px CGAN digits): enlarged likewise, so the samples can be read


def to_bgr(img: torch.Tensor | np.ndarray) -> np.ndarray:
    """One image: float/uint8 [C, H, W] RGB (C = 3) or grey (C = 1) in 0..255 -> uint8 [H, W, 3] BGR (rounded,
    clipped). Raises ValueError for another shape."""
    t = torch.as_tensor(img).detach().cpu()
    if t.dim() != 3 or t.shape[0] not in (1, 3):
        raise ValueError(f'gan pictures: expected an image [C, H, W] with C = 1 or 3, got {tuple(t.shape)}')
    arr = t.float().round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
    if arr.shape[2] == 1:
        return cv2.cvtColor(arr[..., 0], cv2.COLOR_GRAY2BGR)
    return np.ascontiguousarray(arr[..., ::-1])


def enlarge(img: np.ndarray, min_side: int = MIN_PANEL_SIDE) -> np.ndarray:
    """Nearest-neighbour upscale by the smallest whole factor that brings the shorter side to >= ``min_side``."""
    factor = math.ceil(min_side / max(1, min(img.shape[:2])))
    if factor <= 1:
        return img
    return cv2.resize(img, (img.shape[1] * factor, img.shape[0] * factor), interpolation=cv2.INTER_NEAREST)


def grid_columns(num: int, num_classes: int = 0) -> int:
    """Columns of a grid of ``num`` images: ``num_classes`` when the images sweep the classes (column = class),
    else the ceiling of the square root (a near-square grid)."""
    if num_classes and num_classes <= num:
        return int(num_classes)
    return max(1, math.ceil(math.sqrt(num)))


def generated_grid(images: Sequence[torch.Tensor] | torch.Tensor, ncols: int | None = None,
                   pad: int = 2, min_side: int = MIN_CELL_SIDE) -> np.ndarray:
    """N images [C, H, W] (0..255) -> one BGR uint8 grid, ``ncols`` per row (near-square by default), each image
    enlarged (nearest, whole factor) to a short side of at least ``min_side`` (0: as generated)."""
    imgs = [enlarge(to_bgr(im), min_side) for im in images]
    if not imgs:
        raise ValueError('gan pictures: no images for a grid')
    return make_grid(imgs, ncols=ncols or grid_columns(len(imgs)), pad=pad)


def source_field(sample: Any, direction: str = 'AtoB') -> str | None:
    """The data-sample field holding the generator's input image, or None for noise models (DCGAN, CGAN).

    Pix2Pix/CycleGAN translate ``real_A`` -> B (``direction: BtoA``: ``real_B`` -> A); StarGAN/AttGAN/STGAN
    edit ``real_A`` (the source image) and set no ``real_B``.
    """
    if direction == 'BtoA' and 'real_B' in sample:
        return 'real_B'
    return 'real_A' if 'real_A' in sample else None


def target_field(sample: Any, direction: str = 'AtoB') -> str | None:
    """The field with the translation's ground truth: ``gt_img``, else the other domain's real image."""
    if 'gt_img' in sample:
        return 'gt_img'
    other = 'real_A' if direction == 'BtoA' else 'real_B'
    return other if other in sample else None


def sample_row(sample: Any, direction: str = 'AtoB', caption: str = '') -> np.ndarray:
    """``input | output | target`` (the target only when the sample has one) for an image-to-image sample, or
    ``generated | real`` for a noise model's sample; each panel enlarged to >= 128 px. BGR uint8 [H, W, 3]."""
    src, tgt = source_field(sample, direction), target_field(sample, direction)
    panels, titles = [], []
    if src is not None:
        panels.append(sample.get(src))
        titles.append('input')
    panels.append(sample.get('fake_img'))
    titles.append(f'output {caption}'.strip() if caption else 'output')
    if tgt is not None and tgt != src:
        panels.append(sample.get(tgt))
        titles.append('target' if src is not None else 'real')
    return side_by_side([enlarge(to_bgr(p)) for p in panels], titles)
