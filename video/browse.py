"""``tools/browse_dataset.py`` pictures of video samples: a strip of the clip's frames as the pipeline samples
and augments them (first view), above its true label; feature models show their frame features as a heat map."""

from __future__ import annotations

import os.path as osp

import cv2
import numpy as np
import torch

from oars.visualization.browse import MIN_LONG_SIDE, enlarge, upscale_factor
from oars_deploy.draw import side_by_side
from video.evaluation.fields import gt_class_ids, has_gt, sample_name
from video.visualization import draw_clip_strip, even_frames, first_view_frames

MAX_FRAMES = 8  # frames shown per strip, evenly spread over the clip


def _feature_panels(inputs: dict) -> np.ndarray | None:
    """Each 2-D feature of ``inputs`` (``[T, D]`` or ``[D, T]``) as a grey heat map (min..max per modality),
    side by side; None when there is none."""
    panels, titles = [], []
    for key, value in inputs.items():
        arr = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value, dtype=np.float32)
        if arr.ndim != 2 or arr.size == 0:
            continue
        lo, hi = float(arr.min()), float(arr.max())
        grey = np.zeros(arr.shape, np.uint8) if hi <= lo else np.rint((arr - lo) * (255.0 / (hi - lo))).astype(np.uint8)
        grey = cv2.resize(grey, (MIN_LONG_SIDE, max(64, min(MIN_LONG_SIDE, grey.shape[0] * 8))),
                          interpolation=cv2.INTER_NEAREST)
        panels.append(cv2.applyColorMap(grey, cv2.COLORMAP_VIRIDIS))
        titles.append(f"{key} {tuple(arr.shape)}")
    return side_by_side(panels, titles) if panels else None


def draw_pipeline_sample(sample: dict, dataset_meta: dict) -> np.ndarray:
    """One clip: up to 8 evenly spaced frames of its first view (or its feature maps) above the true label.

    Args:
        sample: ``{'inputs': uint8 [V*T, 3, H, W] / [V, 3, T, H, W] BGR frames, a [C, T] feature sequence or a
            dict of them, 'data_samples': ActionDataSample}`` (``PackActionInputs``).
        dataset_meta: ``classes`` (names by id).

    Returns:
        uint8 BGR [H', W', 3], at least 512 px wide.
    """
    data = sample["data_samples"]
    inputs = sample["inputs"]
    classes = [str(c) for c in dataset_meta.get("classes") or ()]
    true_ids = gt_class_ids(torch.as_tensor(data.gt_label), len(classes)) if has_gt(data) else None
    title = osp.basename(sample_name(data).rstrip("/\\"))
    if hasattr(inputs, "shape") and len(inputs.shape) == 2:  # one feature sequence (localizers: [C, T])
        inputs = {"features": inputs}
    if isinstance(inputs, dict):
        features = _feature_panels(inputs)
        strip = draw_clip_strip(None, None, true_ids, classes, title=title)
        if features is None:
            return enlarge(strip, upscale_factor(strip.shape), nearest=True)
        strip = np.pad(strip, ((0, 0), (0, max(0, features.shape[1] - strip.shape[1])), (0, 0)))
        features = np.pad(features, ((0, 0), (0, strip.shape[1] - features.shape[1]), (0, 0)))
        return np.concatenate([features, strip], axis=0)
    frames = first_view_frames(inputs, int(data.metainfo.get("num_crops", 1) or 1))
    shown = even_frames(frames, MAX_FRAMES)
    h, w = frames.shape[1:3]
    # each frame's height so that the strip is >= 512 px wide and a frame >= 128 px high
    height = max(128, int(np.ceil(MIN_LONG_SIDE * h / (len(shown) * max(1, w)))))
    inds = data.metainfo.get("frame_inds")
    if inds is not None:
        title += f" | frames {np.asarray(inds).reshape(-1)[:16].tolist()}"
    return draw_clip_strip(frames, None, true_ids, classes, max_frames=MAX_FRAMES, frame_height=height, title=title)
