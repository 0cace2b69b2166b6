"""Pictures of a clip's prediction: a strip of its frames with the true and top-k predicted labels, and a GIF.

Frames come from the model's input batch (``data_batch['inputs']``, uint8 BGR as the pipeline made them,
before the data preprocessor normalises them), so the pictures show exactly what the model saw.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import cv2
import numpy as np
import torch
from PIL import Image

GREEN, RED, WHITE, GREY = (40, 200, 40), (40, 40, 230), (255, 255, 255), (170, 170, 170)  # BGR
_FONT, _SCALE, _LINE = cv2.FONT_HERSHEY_SIMPLEX, 0.45, 18
_MIN_WIDTH = 320  # room for the label lines under a short strip
_MIN_GIF_WIDTH = 200


def first_view_frames(inputs: torch.Tensor | np.ndarray, num_crops: int = 1) -> np.ndarray:
    """The frames of a clip's first view, as the model got them.

    Args:
        inputs: one sample's uint8 input: NCHW ``[num_crops * num_clips * clip_len, 3, H, W]`` (2D models: the
            first view is the first crop, all its clips' frames) or NCTHW ``[num_crops * num_clips, 3, T, H, W]``
            (3D models: the first view is the first clip of the first crop).
        num_crops: spatial crops stacked views-major (ThreeCrop/TenCrop), from the sample's metainfo.

    Returns:
        uint8 [T, H, W, 3] frames (channel order unchanged: BGR from the video pipeline).
    """
    arr = inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else np.asarray(inputs)
    if arr.dtype != np.uint8:
        raise ValueError(f'video pictures: inputs must be the uint8 frames of the pipeline (FormatShape + '
                         f'PackActionInputs), got dtype {arr.dtype}')
    if arr.ndim == 4 and arr.shape[1] == 3:
        crops = max(1, int(num_crops))
        if arr.shape[0] % crops:
            raise ValueError(f'video pictures: {arr.shape[0]} NCHW frames do not split into num_crops={crops} views')
        return np.ascontiguousarray(arr[: arr.shape[0] // crops].transpose(0, 2, 3, 1))
    if arr.ndim == 5 and arr.shape[1] == 3:
        return np.ascontiguousarray(arr[0].transpose(1, 2, 3, 0))
    raise ValueError(f'video pictures: inputs must be NCHW [V*T, 3, H, W] or NCTHW [V, 3, T, H, W], got shape '
                     f'{tuple(arr.shape)}')


def even_frames(frames: np.ndarray, max_frames: int) -> np.ndarray:
    """At most ``max_frames`` frames spread evenly over ``frames`` [T, ...] (first and last kept)."""
    t = frames.shape[0]
    if t <= max_frames:
        return frames
    return frames[np.linspace(0, t - 1, num=max_frames).round().astype(np.int64)]


def _resize_height(img: np.ndarray, height: int) -> np.ndarray:
    h, w = img.shape[:2]
    if h == height:
        return img
    interp = cv2.INTER_AREA if height < h else cv2.INTER_LINEAR
    return cv2.resize(img, (max(1, round(w * height / h)), height), interpolation=interp)


def top_predictions(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` highest (class id, score) pairs, ties to the lower class id (as ``argmax``)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind='stable')[:k]
    return [(int(i), float(scores[i])) for i in order]


def label_lines(scores: np.ndarray | None, true_ids: Sequence[int] | None, class_names: Sequence[str],
                topk: int = 3) -> list[tuple[str, tuple[int, int, int]]]:
    """Text lines and BGR colours: ``true: ...`` (white), then each top-k prediction with its score, green
    when it is a true class, red when not (grey without ground truth)."""
    def name(i: int) -> str:
        return str(class_names[i]) if 0 <= i < len(class_names) else str(i)

    lines = []
    if true_ids is not None:
        lines.append(('true: ' + (', '.join(name(i) for i in true_ids) or '(none)'), WHITE))
    if scores is not None:
        for rank, (cls, score) in enumerate(top_predictions(scores, topk), 1):
            colour = GREY if true_ids is None else (GREEN if cls in true_ids else RED)
            lines.append((f'{rank}. {name(cls)} {score:.3f}', colour))
    return lines


def _text_panel(lines: Sequence[tuple[str, tuple[int, int, int]]], width: int, title: str = '') -> np.ndarray:
    rows = ([(title, GREY)] if title else []) + list(lines)
    panel = np.zeros((len(rows) * _LINE + 6, width, 3), dtype=np.uint8)
    for i, (text, colour) in enumerate(rows):
        cv2.putText(panel, text, (4, (i + 1) * _LINE - 4), _FONT, _SCALE, colour, 1, cv2.LINE_AA)
    return panel


def draw_clip_strip(frames: np.ndarray | None, scores: np.ndarray | None, true_ids: Sequence[int] | None,
                    class_names: Sequence[str], topk: int = 3, max_frames: int = 8, frame_height: int = 96,
                    title: str = '') -> np.ndarray:
    """One row of up to ``max_frames`` evenly spaced frames (each ``frame_height`` px high) above the true
    label and the top-``topk`` predictions with their scores (green: a true class, red: not).

    Args:
        frames: uint8 BGR [T, H, W, 3] (``first_view_frames``), or None (feature models: labels only).
        scores: float [C] class scores (``pred_score``) or None; true_ids: the clip's true classes or None.
        class_names: C names; title: a caption line (e.g. the file name).

    Returns:
        BGR uint8 [frame_height + text, W, 3], at least 320 px wide.
    """
    parts = []
    if frames is not None and len(frames):
        shown = [_resize_height(f, frame_height) for f in even_frames(np.asarray(frames), max_frames)]
        gap = np.full((frame_height, 2, 3), 110, dtype=np.uint8)  # grey: frames stay apart on dark video
        strip = np.concatenate([x for f in shown for x in (f, gap)][:-1], axis=1)
        parts.append(strip)
    width = max(_MIN_WIDTH, parts[0].shape[1] if parts else 0)
    if parts and parts[0].shape[1] < width:
        parts[0] = np.pad(parts[0], ((0, 0), (0, width - parts[0].shape[1]), (0, 0)))
    parts.append(_text_panel(label_lines(scores, true_ids, class_names, topk), width, title))
    return np.concatenate(parts, axis=0)


def gif_frames(frames: np.ndarray, scores: np.ndarray | None, true_ids: Sequence[int] | None,
               class_names: Sequence[str], frame_height: int = 128) -> list[np.ndarray]:
    """Each frame resized to ``frame_height`` with a caption bar under it: the top-1 prediction and its score
    (green when it is a true class, red when not), then the true label. Returns BGR uint8 frames."""
    lines = label_lines(scores, true_ids, class_names, topk=1)
    if true_ids is not None and scores is not None:
        lines = lines[1:] + lines[:1]  # the prediction first
    out = []
    for f in np.asarray(frames):
        img = _resize_height(f, frame_height)
        if img.shape[1] < _MIN_GIF_WIDTH:  # room for the caption: pad both sides
            left = (_MIN_GIF_WIDTH - img.shape[1]) // 2
            img = np.pad(img, ((0, 0), (left, _MIN_GIF_WIDTH - img.shape[1] - left), (0, 0)))
        bar = _text_panel(lines, img.shape[1])
        out.append(np.concatenate([img, bar], axis=0))
    return out


def write_gif(frames: Sequence[np.ndarray], path: str | os.PathLike, fps: float = 8.0) -> str:
    """Write BGR uint8 frames as an endlessly looping GIF (Pillow); returns the path.

    Pillow merges a frame identical to the one before it into a longer frame, so a clip whose sampled frames
    repeat (``out_of_bound_opt: repeat_last``) has fewer GIF frames than frames sampled.
    """
    if len(frames) == 0:
        raise ValueError('write_gif: no frames given')
    if fps <= 0:
        raise ValueError(f'write_gif: fps must be > 0, got {fps}')
    images = [Image.fromarray(np.ascontiguousarray(np.asarray(f)[..., ::-1])) for f in frames]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    images[0].save(path, format='GIF', save_all=True, append_images=images[1:], duration=max(20, round(1000 / fps)),
                   loop=0)
    return str(path)
