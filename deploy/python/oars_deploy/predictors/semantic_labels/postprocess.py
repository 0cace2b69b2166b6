"""Model outputs -> per-image label maps in original image pixels, mirroring the PyTorch segmentors' predict path
(segmentation/models/segmentors/encoder_decoder.py ``postprocess_result``): crop the padding off (``img_shape``),
resize to ``ori_shape`` (bilinear with PyTorch's ``F.interpolate`` index rule for logits and probabilities, then
argmax; nearest for an in-graph argmax label map, the only choice for labels).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.postprocess import pick_output, resize_bilinear, resize_nearest

SEG_OUTPUT_OPS = {"argmax": "label", "softmax": "prob", "none": "logits"}


def segmentation(outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
    """Per image ``{'label': [H, W] int64}`` at the original size (NumPy).

    ``post``: ``output_op`` (argmax | softmax | none), ``resize_to_original`` (bilinear: scores resized then
    argmax, as PyTorch; nearest: argmax at the input size, then the label map resized), ``crop_to_resized``
    (default true: drop the bottom/right padding first), ``align_corners`` (default false, the segmentor's).
    """
    op = post.get("output_op", "argmax")
    if op not in SEG_OUTPUT_OPS:
        raise DeployError(f"deploy.yaml postprocess.output_op must be one of {list(SEG_OUTPUT_OPS)}, got {op!r}")
    mode = post.get("resize_to_original", "nearest" if op == "argmax" else "bilinear")
    if mode not in ("nearest", "bilinear") or (op == "argmax" and mode != "nearest"):
        raise DeployError(f"deploy.yaml postprocess.resize_to_original must be 'nearest' or 'bilinear' ('nearest' "
                          f"for output_op argmax), got {mode!r} with output_op {op!r}")
    out = pick_output(outputs, SEG_OUTPUT_OPS[op], f"output_op {op}")
    crop = bool(post.get("crop_to_resized", True))
    align_corners = bool(post.get("align_corners", False))
    results = []
    for i, meta in enumerate(metas):
        h, w = meta["img_shape"] if crop else out.shape[-2:]
        ori = tuple(meta["ori_shape"])
        if op == "argmax":
            label = resize_nearest(out[i, :h, :w], ori)
        elif mode == "nearest":
            label = resize_nearest(out[i, :, :h, :w].argmax(0), ori)
        else:
            label = resize_bilinear(out[i, :, :h, :w].astype("float32"), ori, align_corners).argmax(0)
        results.append({"label": to_numpy(label).astype(np.int64)})
    return results
