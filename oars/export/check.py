"""The export self-check: the exported model must give PyTorch's answer, or the export fails.

A deterministic synthetic image goes through the real test pipeline + data preprocessor (what PyTorch sees) and
through deploy.yaml's steps (what a predictor feeds the model); the two inputs must agree to 1e-6. The PyTorch
module then runs on its input and ONNX Runtime on the deploy input, and every output is compared.

The image is 2H x 3W for an H x W export input, another aspect ratio: with a keep-ratio Resize it is letterboxed
(resized to W x 2H/3 and padded), so the resize rule, the Pad step and the graph on a padded input are checked
too, not only the square case where padding never happens.
"""

from __future__ import annotations

import os.path as osp
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np
import torch
from mmengine.dataset import pseudo_collate

from oars.data.test_pipeline import build_test_pipeline
from oars.export.deploy_config import test_pipeline_cfg
from oars.export.errors import ExportCheckError, ExportError
from oars.export.spec import ExportSpec
from oars.extras import require_extra
from oars_deploy.preprocess import preprocess_one

PREPROCESS_ATOL = 1e-6


def synthetic_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A BGR uint8 image with gradients, shapes and noise (so that every layer sees structure)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([255 * xx / max(w - 1, 1), 255 * yy / max(h - 1, 1), 128 + 100 * np.sin(xx / 7 + yy / 11)], -1)
    img = img + rng.normal(0, 12, img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    for _ in range(4):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
        r = int(rng.integers(max(2, min(h, w) // 10), max(3, min(h, w) // 3)))
        if rng.random() < 0.5:
            cv2.circle(img, (cx, cy), r, colour, -1)
        else:
            cv2.rectangle(img, (cx - r, cy - r), (cx + r, cy + r), colour, -1)
    return img


def sample_inputs(cfg: Any, model: torch.nn.Module, steps: Sequence[dict], batch: int,
                  hw: tuple[int, int], seed: int = 0) -> tuple[torch.Tensor, np.ndarray, float]:
    """``batch`` synthetic images of 2H x 3W (another aspect ratio than the export input H x W) through the test
    pipeline + data preprocessor (torch, on the model's device) and through ``steps`` (numpy). A letterboxed
    pipeline output (smaller than H x W) is padded bottom/right with deploy.yaml's Pad value, as the fixed-size
    graph gets it from a predictor (that value is derived from the data preprocessor's pad value by
    ``preprocess_steps``, so the image region is what this compares). Returns both inputs and their max abs
    difference; raises
    :class:`ExportCheckError` when they differ beyond 1e-6 (relative to the values)."""
    h, w = hw
    drop = [s.get("type") for s in test_pipeline_cfg(cfg) if "Annotation" in str(s.get("type"))]
    pipeline = build_test_pipeline(cfg, drop=drop)
    torch_items, deploy_items = [], []
    with tempfile.TemporaryDirectory(prefix="oars-export-") as tmp:
        for i in range(batch):
            path = osp.join(tmp, f"sample_{i}.png")
            cv2.imwrite(path, synthetic_image(2 * h, 3 * w, seed + i))
            torch_items.append(pipeline({"img_path": path}))
            deploy_items.append(preprocess_one(cv2.imread(path, cv2.IMREAD_COLOR), steps)[0][None])
    with torch.no_grad():
        torch_input = model.data_preprocessor(pseudo_collate(torch_items), training=False)["inputs"]
    deploy_input = np.concatenate(deploy_items, 0)
    torch_input = _pad_to(torch_input, deploy_input.shape[-2:], steps)
    ref = torch_input.detach().float().cpu().numpy()
    if ref.shape != deploy_input.shape:
        raise ExportCheckError(f"{cfg.filename}: deploy.yaml preprocessing gives an input of shape "
                               f"{list(deploy_input.shape)}, the test pipeline + data preprocessor {list(ref.shape)}")
    diff = float(np.abs(ref - deploy_input).max())
    tol = PREPROCESS_ATOL * max(1.0, float(np.abs(ref).max()))
    if diff > tol:
        raise ExportCheckError(f"{cfg.filename}: deploy.yaml preprocessing differs from the test pipeline + data "
                               f"preprocessor by {diff:.3g} (max abs), tolerance {tol:.3g}; steps: {list(steps)}")
    return torch_input, deploy_input, diff


def _pad_to(image: torch.Tensor, hw: Sequence[int], steps: Sequence[dict]) -> torch.Tensor:
    """``image`` [B, C, h, w] padded bottom/right to ``hw`` with the value of deploy.yaml's Pad step (one number or
    one per channel); unchanged when it already has that size or is larger (the shape check then reports it)."""
    h, w = int(hw[0]), int(hw[1])
    ih, iw = image.shape[-2:]
    if (ih, iw) == (h, w) or ih > h or iw > w:
        return image
    value = next((s.get("value", 0) for s in steps if s.get("type") == "Pad"), 0)
    fill = torch.as_tensor(value, dtype=image.dtype, device=image.device).reshape(1, -1, 1, 1)
    out = fill.expand(image.shape[0], image.shape[1], h, w).clone()
    out[..., :ih, :iw] = image
    return out


def torch_args(inputs: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The module's positional arguments: one tensor (an image model) or the tensors of a multi-input graph."""
    return (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)


def graph_feeds(spec: ExportSpec, deploy_input: np.ndarray | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX Runtime's feeds by graph input name: ``{input_name: array}`` for a one-input graph, the mapping itself
    (checked to name every graph input) for a multi-input one (``ExportSpec.input_names``)."""
    if not isinstance(deploy_input, Mapping):
        return {spec.input_name: deploy_input}
    missing = [n for n in spec.graph_inputs if n not in deploy_input]
    if missing:
        raise ExportError(f"the export's sample inputs lack graph input(s) {missing}; they give {list(deploy_input)}")
    return {n: deploy_input[n] for n in spec.graph_inputs}


def torch_outputs(spec: ExportSpec, inputs: torch.Tensor | Sequence[torch.Tensor]) -> dict[str, np.ndarray]:
    """Run the spec's module eagerly on ``inputs`` (one tensor, or one per graph input in order); outputs by name as
    numpy arrays."""
    with torch.no_grad():
        outs = spec.module(*torch_args(inputs))
    outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)
    if len(outs) != len(spec.output_names):
        raise ExportError(f"the export module returns {len(outs)} tensors but the spec names "
                          f"{len(spec.output_names)} outputs ({spec.output_names})")
    return {name: o.detach().cpu().numpy() for name, o in zip(spec.output_names, outs)}


def ort_session(onnx_path: str, providers: Sequence[str] = ("CPUExecutionProvider",)) -> Any:
    ort = require_extra("onnxruntime", "running the exported ONNX graph")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(onnx_path, sess_options=opts, providers=list(providers))


def ort_outputs(session: Any, input_name: str, image: np.ndarray) -> dict[str, np.ndarray]:
    """ONNX Runtime on a one-input graph; outputs by name."""
    return ort_run(session, {input_name: image})


def ort_run(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX Runtime on ``feeds`` (graph input name -> array); outputs by name."""
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(feeds))))


def compare_outputs(spec: ExportSpec, expected: dict[str, np.ndarray], actual: dict[str, np.ndarray],
                    image: np.ndarray, atol: float | None = None, what: str = "") -> dict[str, dict]:
    """Per output ``{max_abs_diff, tolerance}``; :class:`ExportCheckError` naming the output on a mismatch."""
    atol = spec.atol if atol is None else atol
    missing = [n for n in spec.output_names if n not in actual]
    if missing:
        raise ExportCheckError(f"{what}the ONNX model has no output(s) {missing}; it has {list(actual)}")
    for name in spec.output_names:
        if expected[name].shape != actual[name].shape:
            raise ExportCheckError(f"{what}output {name!r}: ONNX Runtime gives shape {list(actual[name].shape)}, "
                                   f"PyTorch {list(expected[name].shape)}")
    if spec.compare is not None:
        diffs = spec.compare(expected, actual, image)
    else:
        diffs = {n: _max_abs_diff(expected[n], actual[n]) for n in spec.output_names}
    result = {}
    for name in spec.output_names:
        floating = np.issubdtype(expected[name].dtype, np.floating)
        scale = float(np.abs(expected[name]).max()) if floating and expected[name].size else 0.0
        name_atol = (spec.output_atol or {}).get(name, atol)
        tol = name_atol * max(1.0, scale)
        diff = float(diffs[name])
        if not diff <= tol:  # also catches NaN
            raise ExportCheckError(f"{what}output {name!r}: ONNX Runtime differs from PyTorch by {diff:.4g} (max abs), "
                                   f"tolerance {tol:.4g} (atol {name_atol:g}, x max |PyTorch output| when above 1)")
        result[name] = {"max_abs_diff": diff, "tolerance": tol}
    return result


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    if a.dtype == bool:
        a, b = a.astype(np.int64), b.astype(np.int64)
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
