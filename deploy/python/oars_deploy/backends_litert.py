"""The LiteRT (TensorFlow Lite) backend: ``model.tflite`` of ``tools/export.py --format litert`` run by
``ai_edge_litert``'s interpreter, named inputs in, named outputs out, like every backend of
:mod:`oars_deploy.backends`.

Why layouts are mapped here: the converter (onnx2tf) writes channels-last models (an NCHW image input becomes NHWC,
an NCTHW clip NTHWC, a [N, C, H, W] logits output [N, H, W, C]), while the predictor plug-ins feed and read the ONNX
graph's layout. The backend reads the interpreter's input details and transposes each fed array to the shape the
model takes; the outputs are put back into the ONNX layout with the permutations the export wrote beside the model
(:data:`LAYOUT_FILE`: ``{"outputs": {name: permutation}}``), since an output's shape alone cannot say which of two
equal-sized axes is the channel one. The plug-ins stay unchanged.
"""

from __future__ import annotations

import json
import os.path as osp
from collections.abc import Sequence
from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.extras import Extras, runtime_install_command

FEATURE = "--backend litert"
LAYOUT_FILE = "litert_layout.json"
# the runtime's extra for LiteRT (deploy/python/pyproject.toml [litert]): named in the missing-package message
LITERT_EXTRAS = Extras(packages={"ai_edge_litert": ("ai-edge-litert", "litert")}, install=runtime_install_command,
                       error=DeployError, distribution="oars-deploy")


def layout_permutation(shape_from: Sequence[int], shape_to: Sequence[int]) -> list[int] | None:
    """The axis permutation ``p`` with ``shape_from[p] == shape_to``: the identity when the shapes are equal, else
    channels-first -> channels-last (``[0, 2, ..., r-1, 1]``) or back (``[0, r-1, 1, ..., r-2]``); ``None`` when
    none fits. A dimension of ``shape_to`` below 1 (a dynamic one, -1) matches any size."""
    rank = len(shape_from)
    if rank != len(shape_to):
        return None
    candidates = [list(range(rank))]
    if rank >= 3:
        candidates += [[0, *range(2, rank), 1], [0, rank - 1, *range(1, rank - 1)]]
    for perm in candidates:
        if all(t < 1 or shape_from[p] == t for p, t in zip(perm, shape_to)):
            return perm
    return None


class LiteRTBackend:
    """A ``.tflite`` model run by ``ai_edge_litert.interpreter.Interpreter`` through its default signature (which
    keeps the ONNX graph's input and output names); ``threads``: the interpreter's CPU threads (default: its
    choice)."""

    def __init__(self, model_path: str, device: str = "cpu", threads: int | None = None) -> None:
        if device != "cpu":
            raise DeployError(f"{FEATURE} runs on the CPU; use --device cpu, not {device!r}")
        interpreter = LITERT_EXTRAS.require("ai_edge_litert.interpreter", FEATURE)
        if not osp.isfile(model_path):
            raise DeployError(f"{FEATURE}: no LiteRT model {model_path}; export one with tools/export.py "
                              "--format litert")
        try:
            self.interpreter = interpreter.Interpreter(model_path=model_path, num_threads=threads)
            signatures = self.interpreter.get_signature_list()
            self.runner = self.interpreter.get_signature_runner(next(iter(signatures))) if signatures else None
        except Exception as err:  # LiteRT raises ValueError / RuntimeError with its own wording
            reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            raise DeployError(f"{FEATURE}: model file {model_path} is damaged or not a LiteRT model "
                              f"({type(err).__name__}: {reason[:300]}); re-export it with tools/export.py "
                              "--format litert") from None
        if self.runner is None:
            raise DeployError(f"{FEATURE}: {model_path} has no signature naming its inputs and outputs; re-export "
                              "it with tools/export.py --format litert")
        self.inputs = self.runner.get_input_details()
        self.input_names = list(self.inputs)
        self.output_names = list(signatures[next(iter(signatures))]["outputs"])
        self.output_layout = read_layout(osp.join(osp.dirname(model_path), LAYOUT_FILE))

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        unknown = set(inputs) - set(self.input_names)
        if unknown:
            raise DeployError(f"the model has inputs {self.input_names}, not {sorted(unknown)}")
        feed = {}
        for name, value in inputs.items():
            x = np.asarray(to_numpy(value))
            detail = self.inputs[name]
            want = [int(d) for d in detail.get("shape_signature", detail["shape"])]
            perm = layout_permutation(x.shape, want)
            if perm is None:
                raise DeployError(f"{FEATURE}: input {name!r} has shape {list(x.shape)}; the LiteRT model takes "
                                  f"{want} (channels last)")
            feed[name] = np.ascontiguousarray(x.transpose(perm), dtype=detail["dtype"])
        out = self.runner(**feed)
        return {name: np.ascontiguousarray(np.asarray(out[name]).transpose(self.output_layout[name]))
                if name in self.output_layout else np.array(out[name]) for name in self.output_names}


def read_layout(path: str) -> dict[str, list[int]]:
    """The output permutations of :data:`LAYOUT_FILE` (``{}`` without the file: outputs as the model gives them)."""
    if not osp.isfile(path):
        return {}
    try:
        with open(path) as f:
            outputs = json.load(f)["outputs"]
        return {str(k): [int(a) for a in v] for k, v in outputs.items()}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DeployError(f"{FEATURE}: {path} is not the layout file the export writes ({type(err).__name__}: "
                          f"{err}); re-export the model with tools/export.py --format litert") from None
