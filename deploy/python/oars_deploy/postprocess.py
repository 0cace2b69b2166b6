"""What the plug-ins' post-processing shares (NumPy or CuPy, torch-free): resizes with PyTorch's index rules and
the choice of a model output by name.

A kind's own post-processing is in its plug-in (``oars_deploy.predictors.<kind>.postprocess``): the label maps of
``semantic_labels``, the boxes (and pasted masks) of ``detection_boxes``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from oars_deploy.arrays import module_of
from oars_deploy.errors import DeployError


def _source_index(out_size: int, in_size: int, align_corners: bool, xp: ModuleType) -> tuple[Any, Any, Any]:
    """PyTorch's bilinear source indices (i0, i1) and weight of i1 for each output position (float32 math)."""
    dst = xp.arange(out_size, dtype=xp.float32)
    if align_corners:
        scale = np.float32((in_size - 1) / (out_size - 1)) if out_size > 1 else np.float32(0)
        src = dst * scale
    else:
        # scale * (dst + 0.5) - 0.5 with one rounding, as PyTorch's compiled kernel (fused multiply-add) gets it
        scale = float(np.float32(in_size / out_size))
        src = xp.maximum((scale * (dst.astype(xp.float64) + 0.5) - 0.5).astype(xp.float32), np.float32(0))
    i0 = xp.minimum(xp.floor(src).astype(xp.int64), in_size - 1)
    i1 = xp.minimum(i0 + 1, in_size - 1)
    lam = xp.clip(src - i0.astype(xp.float32), 0, 1).astype(xp.float32)
    return i0, i1, lam


def resize_bilinear(x: Any, size: tuple[int, int], align_corners: bool = False) -> Any:
    """[C, H, W] float -> [C, h, w], as ``F.interpolate(mode='bilinear', align_corners=...)`` (no antialias)."""
    xp = module_of(x)
    h, w = size
    if tuple(x.shape[-2:]) == (h, w):
        return x
    y0, y1, ly = _source_index(h, x.shape[-2], align_corners, xp)
    x0, x1, lx = _source_index(w, x.shape[-1], align_corners, xp)
    top = x[:, y0, :]
    bottom = x[:, y1, :]
    rows = top * (1 - ly)[None, :, None] + bottom * ly[None, :, None]
    return rows[:, :, x0] * (1 - lx)[None, None, :] + rows[:, :, x1] * lx[None, None, :]


def resize_nearest(x: Any, size: tuple[int, int]) -> Any:
    """[..., H, W] -> [..., h, w] by OpenCV's / PyTorch's 'nearest' rule: src = min(floor(dst * in / out), in - 1)."""
    xp = module_of(x)
    h, w = size
    ih, iw = x.shape[-2:]
    if (ih, iw) == (h, w):
        return x
    ys = xp.minimum(xp.floor(xp.arange(h) * (ih / h)).astype(xp.int64), ih - 1)
    xs = xp.minimum(xp.floor(xp.arange(w) * (iw / w)).astype(xp.int64), iw - 1)
    return x[..., ys[:, None], xs[None, :]]


def pick_output(outputs: dict[str, Any], name: str, what: str) -> Any:
    """The output ``name``, or the only output a one-output model has; else a :class:`DeployError` naming
    ``what`` needs it and the outputs there are."""
    if name in outputs:
        return outputs[name]
    if len(outputs) == 1:
        return next(iter(outputs.values()))
    raise DeployError(f"the model has no output {name!r} ({what}); its outputs are {sorted(outputs)}")
