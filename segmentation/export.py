"""Segmentation export hook: normalised image -> logits at the input size -> argmax | softmax | nothing.

Whole-image inference only: a config whose test_cfg is slide is exported whole-image at export.input_shape (a
sliding window over a fixed-size input is the same network run on crops; the predictor resizes the image to
the input instead), and deploy.yaml's postprocess says so.
"""

from __future__ import annotations

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from oars.export.errors import ExportCheckError, ExportError
from oars.export.spec import ExportOptions, ExportSpec

OUTPUT_OPS = {"argmax": "label", "softmax": "prob", "none": "logits"}


class SegmentorExport(nn.Module):
    """The traced graph: ``encode_decode`` (backbone, neck, decode head, bilinear resize to the input) + op."""

    def __init__(self, segmentor: nn.Module, output_op: str) -> None:
        super().__init__()
        self.segmentor = segmentor
        self.output_op = output_op

    def logits(self, image: torch.Tensor) -> torch.Tensor:
        return self.segmentor.encode_decode(image)

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor]:
        logits = self.logits(image)
        if self.output_op == "argmax":
            return (logits.argmax(dim=1),)
        if self.output_op == "softmax":
            return (logits.softmax(dim=1),)
        return (logits,)


def build_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of an ``EncoderDecoder`` (see the module docstring)."""
    op = str(options.extra.get("output_op", "argmax")).lower()
    if op not in OUTPUT_OPS:
        raise ExportError(f"{cfg.filename}: export.output_op must be one of {list(OUTPUT_OPS)}, got "
                          f"{options.extra.get('output_op')!r}")
    module = SegmentorExport(model, op).eval()
    b, _, h, w = options.input_shape
    batch = -1 if options.dynamic else b
    num_classes = int(model.num_classes)
    name = OUTPUT_OPS[op]
    if op == "argmax":
        output = {"name": name, "shape": [batch, h, w], "dtype": "int64",
                  "meaning": "class id per pixel of the input (argmax of the logits)"}
    else:
        meaning = "class probabilities (softmax over C)" if op == "softmax" else "class logits"
        output = {"name": name, "shape": [batch, num_classes, h, w], "dtype": "float32",
                  "meaning": f"{meaning} per pixel of the input"}
    test_cfg = dict(getattr(model, "test_cfg", None) or {})
    postprocess = {
        "type": "segmentation",
        "output_op": op,
        "resize_to_original": "nearest" if op == "argmax" else "bilinear",
        "num_classes": num_classes,
        "inference": "whole",
        "crop_to_resized": True,  # drop the Pad region (bottom/right) before resizing to the original size
    }
    if test_cfg.get("mode") == "slide":
        postprocess["note"] = (f"the config's test_cfg is slide (crop_size {list(test_cfg['crop_size'])}, stride "
                               f"{list(test_cfg['stride'])}); exported as whole-image inference at {h}x{w}")
    compare = _label_compare(module) if op == "argmax" else None
    return ExportSpec(module=module, input_name="image", output_names=[name], outputs=[output],
                      postprocess=postprocess, atol=1e-4, compare=compare, predictor="semantic_labels")


def _label_compare(module: SegmentorExport):
    """Labels may differ only where the logits are tied to within float noise: the returned 'difference' of
    ``label`` is the largest logit gap (top logit minus the logit of the class ONNX Runtime chose, relative to
    max(1, max |logit|)) over the pixels that differ, 0 when none do; the core compares it with atol."""

    def compare(expected: dict, actual: dict, image: np.ndarray) -> dict:
        exp, act = expected["label"], actual["label"]
        wrong = exp != act
        if not wrong.any():
            return {"label": 0.0}
        if wrong.mean() > 0.01:
            raise ExportCheckError(f"output 'label': {int(wrong.sum())} of {wrong.size} pixels differ between ONNX "
                                   "Runtime and PyTorch (more than 1%: not float noise)")
        param = next(module.parameters())
        with torch.no_grad():
            logits = module.logits(torch.from_numpy(image).to(param.device, param.dtype)).float().cpu().numpy()
        b, y, x = np.nonzero(wrong)
        top = logits[b, exp[b, y, x], y, x]
        chosen = logits[b, act[b, y, x], y, x]
        return {"label": float(np.max(top - chosen)) / max(1.0, float(np.abs(logits).max()))}

    return compare
