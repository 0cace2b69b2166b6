"""The OpenVINO backend: ``model.xml`` (+ ``model.bin``) of ``tools/export.py --format openvino`` compiled for the
CPU, named inputs in, named outputs out, like every backend of :mod:`oars_deploy.backends`.

Why the inference precision is pinned to f32: on CPUs with AVX512-BF16 or AMX, OpenVINO's CPU plug-in runs FP32
models in bf16 unless told otherwise, which would make a deployed FP32 (or FP16-weight) model answer differently
from the one the export's parity check measured. INT8 models keep their quantised layers.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra

FEATURE = "--backend openvino"


class OpenVINOBackend:
    """An OpenVINO IR compiled by ``openvino.Core().compile_model(path, "CPU")``; ``threads`` sets the CPU plug-in's
    inference threads (default: OpenVINO's choice)."""

    def __init__(self, model_path: str, device: str = "cpu", threads: int | None = None) -> None:
        if device != "cpu":
            raise DeployError(f"{FEATURE} runs on the CPU; use --device cpu, not {device!r}")
        ov = require_extra("openvino", FEATURE)
        if not osp.isfile(model_path):
            raise DeployError(f"{FEATURE}: no OpenVINO model {model_path}; export one with tools/export.py "
                              "--format openvino")
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = int(threads)
        try:
            self.compiled = ov.Core().compile_model(model_path, "CPU", config)
        except Exception as err:  # OpenVINO raises its own pybind classes
            reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            raise DeployError(f"{FEATURE}: model file {model_path} (or its .bin beside it) is damaged or not an "
                              f"OpenVINO model ({type(err).__name__}: {reason[:300]}); re-export it with "
                              "tools/export.py --format openvino") from None
        self.request = self.compiled.create_infer_request()
        self.input_names = [port.get_any_name() for port in self.compiled.inputs]
        self.output_names = [port.get_any_name() for port in self.compiled.outputs]

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        feed = {k: np.ascontiguousarray(to_numpy(v)) for k, v in inputs.items()}
        unknown = set(feed) - set(self.input_names)
        if unknown:
            raise DeployError(f"the model has inputs {self.input_names}, not {sorted(unknown)}")
        results = self.request.infer(feed)
        # the request reuses its output buffers on the next call: copy
        return {name: np.array(results[port]) for name, port in zip(self.output_names, self.compiled.outputs)}
