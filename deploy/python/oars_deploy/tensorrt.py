"""Run a serialized TensorRT engine (``tools/export.py --format tensorrt``) without torch.

The ``tensorrt`` wheel brings no CUDA array library, so the device buffers are CuPy arrays (the optional
``cupy`` extra); both are imported only when a TensorRT backend is asked for. Not run in CI (no GPU there); the
GPU check is tests/deploy/test_deploy_python_predictor.py's gpu-marked test via tools/gpu_checks.sh.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra


def _import_runtime() -> tuple[Any, Any]:
    """(tensorrt, cupy), or a DeployError naming the runtime's extra that installs the missing one (a CUDA GPU is
    needed as well: a tensorrt that cannot load its CUDA libraries is told as installed but not importing)."""
    return require_extra("tensorrt", "--backend tensorrt"), require_extra("cupy", "--backend tensorrt")


class TensorRTRunner:
    """``runner({'image': x})`` -> {output name: NumPy array}; one execution context, CuPy device buffers."""

    def __init__(self, engine_path: str) -> None:
        trt, self.cp = _import_runtime()
        if not osp.isfile(engine_path):
            raise DeployError(f"TensorRT engine not found: {engine_path} (build it with tools/export.py --format "
                              "tensorrt)")
        self.runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        with open(engine_path, "rb") as f:
            self.engine = self.runtime.deserialize_cuda_engine(f.read())
        if self.engine is None:
            raise DeployError(f"cannot deserialize {engine_path} (built with another TensorRT version or GPU?)")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.input_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.dtypes = {n: np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))) for n in names}

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        cp = self.cp
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise DeployError(f"TensorRT engine: missing inputs {missing} (engine inputs: {self.input_names})")
        keep = []
        for name in self.input_names:
            x = cp.ascontiguousarray(cp.asarray(inputs[name], dtype=self.dtypes[name]))
            if not self.context.set_input_shape(name, tuple(x.shape)):
                raise DeployError(f"TensorRT engine: input {name} shape {x.shape} is outside the engine's profile")
            self.context.set_tensor_address(name, x.data.ptr)
            keep.append(x)
        outputs = {}
        for name in self.output_names:
            out = cp.empty(tuple(self.context.get_tensor_shape(name)), dtype=self.dtypes[name])
            self.context.set_tensor_address(name, out.data.ptr)
            outputs[name] = out
        stream = cp.cuda.get_current_stream()
        if not self.context.execute_async_v3(stream.ptr):
            raise DeployError("TensorRT engine: execute_async_v3 failed")
        stream.synchronize()
        return {n: cp.asnumpy(v) for n, v in outputs.items()}
