"""deploy.yaml's ``preprocess`` steps applied to BGR uint8 images: the same float input the PyTorch model gets.

One implementation for the export self-check, the TensorRT INT8 calibrator (oars.export) and the Python predictor
(this package); it imports no torch. The step semantics are those of oars_deploy.deploy_config (the schema); the
deploy/cpp predictor implements them again in C++.

Each step reproduces one piece of the evaluation path bit for bit:
- Resize: oars' ``Resize`` (keep_ratio: fit inside (W, H); then albumentations' resize, which for a 3-channel
  uint8 image is ``cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)``).
- Normalize: the data preprocessor's ``(x[..., ::-1] if to_rgb).float() - mean) / std`` in float32.
- Pad: bottom/right to ``size`` (W, H) with ``value`` (a number or one per channel; after Normalize, as the data
  preprocessor pads).
- Permute: HWC -> CHW; the images are stacked into [B, C, H, W].

The resize always runs in OpenCV on the host (CuPy has no bit-identical bilinear uint8 resize); with CuPy the
resized uint8 image is uploaded and Normalize/Pad/Permute run on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import cv2
import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError

INTERPOLATIONS = {"linear": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST, "cubic": cv2.INTER_CUBIC,
                  "area": cv2.INTER_AREA}
STEP_TYPES = ("Resize", "Normalize", "Pad", "Permute")


def scaled_size(w: int, h: int, factor: float) -> tuple[int, int]:
    """The one size rule of every keep-ratio resize (this file's ``fit_inside``, oars' ``Resize``/``rescale_size``
    in the training pipeline): (w, h) times ``factor``, rounded half up, at least 1 pixel per side. A 2000x3 image
    fitted into 64x64 would otherwise get height int(0.096 + 0.5) = 0, which neither OpenCV nor a model takes."""
    return max(1, int(w * factor + 0.5)), max(1, int(h * factor + 0.5))


def fit_inside(w: int, h: int, size: Sequence[int]) -> tuple[int, int]:
    """keep_ratio: the (w, h) scaled by ``min(W / w, H / h)`` (deploy.yaml's rule; for the square sizes of the
    configs this is oars' Resize, i.e. mmcv's ``rescale_size``, bit for bit), by :func:`scaled_size`."""
    return scaled_size(w, h, min(size[0] / w, size[1] / h))


def _pair(step: dict, key: str, index: int) -> tuple[int, int]:
    value = step.get(key)
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and v > 0
                                                                          for v in value)):
        raise DeployError(f"deploy.yaml preprocess[{index}] ({step.get('type')}): {key} must be [W, H] positive ints, "
                          f"got {value!r}")
    return int(value[0]), int(value[1])


def _triple(step: dict, key: str, index: int) -> np.ndarray:
    value = step.get(key)
    if not (isinstance(value, (list, tuple)) and len(value) in (1, 3)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise DeployError(f"deploy.yaml preprocess[{index}] (Normalize): {key} must be a list of 1 or 3 numbers, "
                          f"got {value!r}")
    return np.asarray(value, dtype=np.float32)


def check_steps(steps: Any) -> list[dict]:
    """Validate the steps (types and the keys each needs); returns them as a list of dicts."""
    if not isinstance(steps, list) or not steps:
        raise DeployError(f"deploy.yaml: preprocess must be a non-empty list of steps, got {steps!r}")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("type") not in STEP_TYPES:
            raise DeployError(f"deploy.yaml preprocess[{i}]: type must be one of {list(STEP_TYPES)}, got {step!r}")
        kind = step["type"]
        if kind in ("Resize", "Pad"):
            _pair(step, "size", i)
        if kind == "Resize" and step.get("interpolation", "linear") not in INTERPOLATIONS:
            raise DeployError(f"deploy.yaml preprocess[{i}] (Resize): interpolation must be one of "
                              f"{list(INTERPOLATIONS)}, got {step.get('interpolation')!r}")
        if kind == "Normalize":
            _triple(step, "mean", i)
            if (_triple(step, "std", i) <= 0).any():
                raise DeployError(f"deploy.yaml preprocess[{i}] (Normalize): std values must be > 0, got {step['std']}")
    if steps[-1]["type"] != "Permute":
        raise DeployError(f"deploy.yaml: the last preprocess step must be Permute (HWC -> CHW), got {steps[-1]}")
    return steps


def resize(img: np.ndarray, step: dict, meta: dict) -> np.ndarray:
    """oars' Resize: to ``size`` (W, H), or fit inside it with ``keep_ratio``; updates img_shape/scale_factor."""
    h, w = img.shape[:2]
    size = tuple(step["size"])
    new_w, new_h = fit_inside(w, h, size) if step.get("keep_ratio", False) else size
    if (new_w, new_h) != (w, h):
        img = cv2.resize(img, (new_w, new_h), interpolation=INTERPOLATIONS[step.get("interpolation", "linear")])
    sw, sh = meta["scale_factor"]
    meta["scale_factor"] = (sw * new_w / w, sh * new_h / h)
    meta["img_shape"] = (new_h, new_w)
    return img


def normalize(img: Any, step: dict, xp: ModuleType) -> Any:
    """``((img[..., ::-1] if to_rgb) as float32 - mean) / std`` in float32, like the data preprocessor."""
    if step.get("to_rgb", False):
        img = img[..., ::-1]
    img = img.astype(xp.float32)
    mean = xp.asarray(np.asarray(step["mean"], dtype=np.float32))
    std = xp.asarray(np.asarray(step["std"], dtype=np.float32))
    return (img - mean) / std


def pad(img: Any, step: dict, xp: ModuleType, index: int) -> Any:
    """Bottom/right padding to ``size`` (W, H) with ``value``; an image larger than that is an error."""
    w, h = step["size"]
    ih, iw = img.shape[:2]
    if ih > h or iw > w:
        raise DeployError(f"preprocess[{index}] (Pad): the image is {iw}x{ih} (WxH) after resizing, larger than the "
                          f"model input {w}x{h}; the deploy.yaml steps do not fit this model")
    if (ih, iw) == (h, w):
        return img
    out = xp.empty((h, w) + tuple(img.shape[2:]), dtype=img.dtype)
    out[...] = xp.asarray(np.asarray(step.get("value", 0), dtype=np.float64)).astype(img.dtype)
    out[:ih, :iw] = img
    return out


def preprocess_one(img: np.ndarray, steps: list[dict], xp: ModuleType = np) -> tuple[Any, dict]:
    """One BGR uint8 HxWx3 image -> (CHW array, meta with ori_shape, img_shape, pad_shape, scale_factor (w, h))."""
    if not isinstance(img, np.ndarray) or img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        what = f"{img.dtype} array of shape {img.shape}" if isinstance(img, np.ndarray) else type(img).__name__
        raise DeployError(f"preprocess: expected a BGR uint8 HxWx3 image (cv2.imread), got a {what}")
    h, w = img.shape[:2]
    meta: dict[str, Any] = {"ori_shape": (h, w), "img_shape": (h, w), "scale_factor": (1.0, 1.0)}
    out: Any = img
    for i, step in enumerate(steps):
        kind = step["type"]
        if kind == "Resize":  # OpenCV on the host, also on the CuPy path (bit-identical to the pipeline)
            out = resize(to_numpy(out), step, meta)
            continue
        if xp is not np and isinstance(out, np.ndarray):
            out = xp.asarray(np.ascontiguousarray(out))
        if kind == "Normalize":
            out = normalize(out, step, xp)
        elif kind == "Pad":
            out = pad(out, step, xp, i)
        elif kind == "Permute":
            out = xp.ascontiguousarray(out.transpose(2, 0, 1))
    meta["pad_shape"] = tuple(int(s) for s in out.shape[-2:])
    return out, meta


def preprocess(images: Sequence[np.ndarray], steps: list[dict], xp: ModuleType = np,
               dtype: str = "float32") -> tuple[Any, list[dict]]:
    """BGR uint8 images -> ([B, C, H, W] array of ``dtype`` (NumPy or CuPy), one meta dict per image)."""
    if len(images) == 0:
        raise DeployError("preprocess: no images given")
    outs, metas = zip(*(preprocess_one(img, steps, xp) for img in images))
    shapes = {tuple(o.shape) for o in outs}
    if len(shapes) != 1:
        raise DeployError(f"preprocess: the images came out in different shapes {sorted(shapes)}; deploy.yaml needs a "
                          "Pad step to the model input size")
    batch = xp.stack(outs)
    if batch.dtype != dtype:
        batch = batch.astype(dtype)
    return batch, list(metas)
