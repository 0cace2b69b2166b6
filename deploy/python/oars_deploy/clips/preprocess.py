"""deploy.yaml's video ``preprocess`` steps applied to decoded frames: the model input of one video (torch-free).

The steps mirror the test pipeline after decoding and the ``ActionDataPreprocessor`` (their semantics are the
schema; deploy/cpp implements them again):

- ``Resize``: every frame to the size :func:`clip_resize_size` gives (``short_side: s``; or ``scale: [w, h]`` with
  ``keep_ratio``: fit within the bounds, ``-1`` leaving one open; or ``scale: f``), ``cv2.resize`` with
  ``interpolation`` (bilinear = ``cv2.INTER_LINEAR``); sizes rounded half up, at least 1 pixel
  (:func:`oars_deploy.preprocess.scaled_size`, the image tasks' rule).
- ``CenterCrop {size: [w, h]}``: the centred box, offsets ``int(round(free / 2))`` (Python rounding, ties to
  even: torchvision's ``center_crop``).
- ``ThreeCrop {size: [w, h]}``: three views along the longer free axis, start, end, centre (the other axis
  centred); views-major frames.
- ``Normalize {mean, std, to_rgb}``: float32 ``((x[..., ::-1] if to_rgb) - mean) / std`` (the data preprocessor).
- ``FormatShape {input_format}``: ``NCHW`` -> [V*T, 3, H, W]; ``NCTHW`` -> [V, 3, T, H, W] (V views = crops x
  clips, T = clip_len).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.preprocess import scaled_size

INTERPOLATIONS = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC,
                  "area": cv2.INTER_AREA, "lanczos": cv2.INTER_LANCZOS4}
VIDEO_STEP_KEYS = {
    "Resize": (),
    "CenterCrop": ("size",),
    "ThreeCrop": ("size",),
    "Normalize": ("mean", "std", "to_rgb"),
    "FormatShape": ("input_format",),
}
INPUT_FORMATS = ("NCHW", "NCTHW")


def clip_resize_size(w: int, h: int, scale: float | Sequence[int] | None = None, short_side: int | None = None,
                     keep_ratio: bool = True) -> tuple[int, int]:
    """The (w, h) that frames of size (w, h) are resized to (``video.transforms.Resize`` calls this too).

    Args:
        w, h: frame size.
        scale: a factor (float), or bounds [w, h] (``keep_ratio``: the largest size of the frames' aspect ratio
            with long side <= max(bounds) and short side <= min(bounds), -1 = unbounded; else exactly [w, h]).
        short_side: the short side becomes this (the aspect ratio kept); exclusive with ``scale``.
        keep_ratio: see ``scale``.

    Returns:
        (new_w, new_h) positive ints.
    """
    if short_side is not None:
        return scaled_size(w, h, short_side / min(w, h))
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        return scaled_size(w, h, float(scale))
    if not keep_ratio:
        return int(scale[0]), int(scale[1])
    bounds = [math.inf if v == -1 else v for v in scale]
    return scaled_size(w, h, min(max(bounds) / max(w, h), min(bounds) / min(w, h)))


def centre_offset(free: int) -> int:
    """Offset of a centred crop with ``free`` = frame size - crop size (torchvision's rule, Python rounding)."""
    return int(round(free / 2.0))


def three_crop_offsets(w: int, h: int, cw: int, ch: int) -> list[tuple[int, int]]:
    """(x, y) of ThreeCrop's views: start, end, centre along the longer free axis, the other axis centred."""
    free_w, free_h = w - cw, h - ch
    if free_w >= free_h:
        y = centre_offset(free_h)
        return [(0, y), (free_w, y), (centre_offset(free_w), y)]
    x = centre_offset(free_w)
    return [(x, 0), (x, free_h), (x, centre_offset(free_h))]


def check_video_steps(steps: Any, where: str = "deploy.yaml") -> list[dict]:
    """Validate the video steps (types, keys); returns them. The last must be FormatShape."""
    if not isinstance(steps, list) or not steps:
        raise DeployError(f"{where}: preprocess must be a non-empty list of steps, got {steps!r}")
    for i, step in enumerate(steps):
        kind = step.get("type") if isinstance(step, dict) else None
        if kind not in VIDEO_STEP_KEYS:
            raise DeployError(f"{where}: preprocess[{i}].type must be one of {list(VIDEO_STEP_KEYS)} for a video "
                              f"model, got {kind!r}")
        for key in VIDEO_STEP_KEYS[kind]:
            if key not in step:
                raise DeployError(f"{where}: missing key preprocess[{i}] ({kind}).{key}")
        if kind == "Resize" and (("short_side" in step) == ("scale" in step)):
            raise DeployError(f"{where}: preprocess[{i}] (Resize) needs exactly one of short_side and scale, got "
                              f"{step}")
        if kind == "Resize" and step.get("interpolation", "bilinear") not in INTERPOLATIONS:
            raise DeployError(f"{where}: preprocess[{i}] (Resize).interpolation must be one of "
                              f"{list(INTERPOLATIONS)}, got {step.get('interpolation')!r}")
        if kind == "FormatShape" and step["input_format"] not in INPUT_FORMATS:
            raise DeployError(f"{where}: preprocess[{i}] (FormatShape).input_format must be one of "
                              f"{list(INPUT_FORMATS)}, got {step['input_format']!r}")
    if steps[-1]["type"] != "FormatShape":
        raise DeployError(f"{where}: the last video preprocess step must be FormatShape, got {steps[-1]}")
    return steps


def _resize(clip: np.ndarray, step: dict) -> np.ndarray:
    h, w = clip.shape[1:3]
    nw, nh = clip_resize_size(w, h, step.get("scale"), step.get("short_side"), bool(step.get("keep_ratio", True)))
    if (nw, nh) == (w, h):
        return clip
    flag = INTERPOLATIONS[step.get("interpolation", "bilinear")]
    out = np.empty((len(clip), nh, nw, 3), dtype=clip.dtype)
    for i in range(len(clip)):  # OpenCV has no batched resize; one call per frame into one array
        cv2.resize(np.ascontiguousarray(clip[i]), (nw, nh), dst=out[i], interpolation=flag)
    return out


def _crop_size(clip: np.ndarray, step: dict, index: int) -> tuple[int, int]:
    cw, ch = (int(v) for v in step["size"])
    h, w = clip.shape[1:3]
    if cw > w or ch > h:
        raise DeployError(f"preprocess[{index}] ({step['type']}): crop (w, h) = ({cw}, {ch}) is larger than the "
                          f"frames ({w}, {h})")
    return cw, ch


def preprocess_clip(frames: Sequence[np.ndarray] | np.ndarray, steps: list[dict], num_clips: int,
                    clip_len: int) -> np.ndarray:
    """Decoded frames of one video -> its model input.

    Args:
        frames: ``num_clips * clip_len`` HxWx3 uint8 BGR frames (clip-major, as sampled), or one [N, H, W, 3]
            array.
        steps: deploy.yaml's video preprocess steps (:func:`check_video_steps`).
        num_clips, clip_len: the sampling (views before cropping, frames per view).

    Returns:
        float32 [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW), V = crops x num_clips, C-contiguous.
    """
    clip = frames if isinstance(frames, np.ndarray) else np.stack(list(frames))
    if clip.ndim != 4 or clip.shape[-1] != 3 or clip.dtype != np.uint8:
        raise DeployError(f"preprocess: expected BGR uint8 frames [N, H, W, 3], got {clip.dtype} {clip.shape}")
    num_crops = 1
    out: Any = clip
    for i, step in enumerate(steps):
        kind = step["type"]
        if kind == "Resize":
            out = _resize(out, step)
        elif kind == "CenterCrop":
            cw, ch = _crop_size(out, step, i)
            h, w = out.shape[1:3]
            x, y = centre_offset(w - cw), centre_offset(h - ch)
            out = out[:, y:y + ch, x:x + cw]
        elif kind == "ThreeCrop":
            cw, ch = _crop_size(out, step, i)
            h, w = out.shape[1:3]
            out = np.concatenate([out[:, y:y + ch, x:x + cw] for x, y in three_crop_offsets(w, h, cw, ch)])
            num_crops *= 3
        elif kind == "Normalize":
            if step.get("to_rgb", False):
                out = out[..., ::-1]
            out = (out.astype(np.float32) - np.asarray(step["mean"], dtype=np.float32)) / np.asarray(
                step["std"], dtype=np.float32)
        elif kind == "FormatShape":
            views = num_crops * num_clips
            if len(out) != views * clip_len:
                raise DeployError(f"preprocess: {len(out)} frames, expected crops x clips x clip_len = "
                                  f"{num_crops} x {num_clips} x {clip_len}")
            if step["input_format"] == "NCHW":
                out = out.transpose(0, 3, 1, 2)
            else:
                n, h, w, c = out.shape
                out = out.reshape(views, clip_len, h, w, c).transpose(0, 4, 1, 2, 3)
    return np.ascontiguousarray(out, dtype=np.float32)
