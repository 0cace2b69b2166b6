"""TensorRT engines from the exported ONNX, and a runner for them (the ``tensorrt`` Python package, imported lazily).

Why here and not in the predictor: the engine is a build artefact of ``tools/export.py --format tensorrt`` (the
predictors only deserialize it). The optimisation profile comes from deploy.yaml's input spec: a dynamic batch
gets min 1 / opt = the export batch / max 8; a static input gets its own shape three times.
Precision is not a builder setting: the network is strongly typed, so an engine runs in the precision of the ONNX
graph it is built from (model_fp16.onnx, or model_int8.onnx with its Q/DQ nodes; see oars.export.precision). That
is the only way TensorRT 11 offers (it removed the FP16/INT8 builder flags and the calibrators) and works the same
on TensorRT 10.
Device buffers are torch CUDA tensors (torch is a dependency of the project; the tensorrt wheel brings no CUDA
array library of its own).
"""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from oars.export.errors import ExportError

MAX_DYNAMIC_BATCH = 8


def import_tensorrt() -> Any:
    """The ``tensorrt`` module, or an :class:`ExportError` that says how to get it."""
    try:
        import tensorrt as trt
    except ImportError as err:
        raise ExportError(f"TensorRT is not installed ({err}); `pip install tensorrt` on a machine with an NVIDIA GPU "
                          "and CUDA, or export with --format onnx and run the model with ONNX Runtime") from None
    return trt


def _require_cuda() -> Any:
    try:
        import torch
    except ImportError as err:
        raise ExportError(f"the TensorRT tools use torch CUDA tensors as device buffers; torch is missing: {err}"
                          ) from None
    if not torch.cuda.is_available():
        raise ExportError("TensorRT needs an NVIDIA GPU with CUDA, and torch.cuda.is_available() is False here")
    return torch


# ----------------------------------------------------------------------------- profile
def profile_shapes(deploy_cfg: dict, opt_batch: int | None = None,
                   max_batch: int = MAX_DYNAMIC_BATCH) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(min, opt, max) input shapes from deploy.yaml's ``input.shape`` ([B, C, H, W], -1 = dynamic).

    Only the batch axis may be dynamic: min 1, opt ``opt_batch`` (else ``input.opt_batch``, else 1), max
    ``max_batch``. A static shape is used as min = opt = max.
    """
    spec = deploy_cfg.get("input") or {}
    shape = spec.get("shape")
    if not (isinstance(shape, (list, tuple)) and len(shape) == 4):
        raise ExportError(f"deploy.yaml input.shape must be [B, C, H, W], got {shape!r}")
    b, c, h, w = (int(v) if v is not None else -1 for v in shape)
    if min(c, h, w) <= 0:
        raise ExportError(f"deploy.yaml input.shape {list(shape)}: only the batch axis may be dynamic for TensorRT "
                          "(export with a fixed export.input_shape H, W)")
    if b > 0:
        static = (b, c, h, w)
        return static, static, static
    opt = int(opt_batch or spec.get("opt_batch") or 1)
    if not 1 <= opt <= max_batch:
        raise ExportError(f"TensorRT profile: opt batch {opt} must be within [1, {max_batch}]")
    return (1, c, h, w), (opt, c, h, w), (max_batch, c, h, w)


# ----------------------------------------------------------------------------- build
def network_flags(trt: Any) -> int:
    """``create_network`` flags: strongly typed (opt-in on TensorRT 9/10, always on and the flag ignored on 11),
    and explicit batch on TensorRT < 10 (the only mode from 10 on)."""
    flags = 0
    kinds = trt.NetworkDefinitionCreationFlag
    if hasattr(kinds, "EXPLICIT_BATCH") and int(trt.__version__.split(".")[0]) < 10:
        flags |= 1 << int(kinds.EXPLICIT_BATCH)
    if hasattr(kinds, "STRONGLY_TYPED"):
        flags |= 1 << int(kinds.STRONGLY_TYPED)
    return flags


def build_engine(onnx_path: str, engine_path: str, deploy_cfg: dict, workspace_gb: float = 4,
                 opt_batch: int | None = None) -> str:
    """Build a serialized TensorRT engine from ``onnx_path`` and write it to ``engine_path`` (returned).

    ``deploy_cfg``: the deploy.yaml dict (input name and shape for the optimisation profile). The engine's
    precision is the ONNX graph's (strongly typed network). Errors name the ONNX file and TensorRT's parser
    messages.
    """
    trt = import_tensorrt()
    _require_cuda()
    if not osp.isfile(onnx_path):
        raise ExportError(f"ONNX model not found: {onnx_path}")
    input_name = (deploy_cfg.get("input") or {}).get("name", "image")
    shapes = profile_shapes(deploy_cfg, opt_batch)

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(onnx_path):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ExportError(f"TensorRT cannot parse {onnx_path}: {errors}")

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gb * (1 << 30)))
    profile = builder.create_optimization_profile()
    profile.set_shape(input_name, *shapes)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError(f"TensorRT failed to build an engine from {onnx_path} (see the TensorRT messages above)")
    from oars_deploy.atomic import atomic_write

    return atomic_write(engine_path, bytes(serialized))


# ----------------------------------------------------------------------------- run
class TensorRTRunner:
    """Runs a serialized engine on numpy inputs: ``runner({'image': x})`` or ``runner(x)`` -> {output name: array}.

    Buffers are torch CUDA tensors on the current stream; outputs are copied back to numpy.
    """

    def __init__(self, engine_path: str) -> None:
        trt = import_tensorrt()
        self.torch = _require_cuda()
        if not osp.isfile(engine_path):
            raise ExportError(f"TensorRT engine not found: {engine_path} (build it with tools/export.py --format "
                              "tensorrt)")
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        with open(engine_path, "rb") as f:
            self.engine = self.runtime.deserialize_cuda_engine(f.read())
        if self.engine is None:
            raise ExportError(f"cannot deserialize {engine_path} (built with another TensorRT version or GPU?)")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.input_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.dtypes = {n: np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))) for n in names}

    def _torch_dtype(self, dtype: np.dtype) -> Any:
        return self.torch.from_numpy(np.zeros(0, dtype=dtype)).dtype

    def __call__(self, inputs: dict[str, np.ndarray] | np.ndarray) -> dict[str, np.ndarray]:
        torch = self.torch
        if not isinstance(inputs, dict):
            inputs = {self.input_names[0]: inputs}
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise ExportError(f"TensorRTRunner: missing inputs {missing} (engine inputs: {self.input_names})")
        keep = []
        for name in self.input_names:
            x = np.ascontiguousarray(inputs[name], dtype=self.dtypes[name])
            tensor = torch.from_numpy(x).cuda()
            if not self.context.set_input_shape(name, tuple(x.shape)):
                raise ExportError(f"TensorRTRunner: input {name} shape {x.shape} is outside the engine's profile")
            self.context.set_tensor_address(name, tensor.data_ptr())
            keep.append(tensor)
        outputs = {}
        for name in self.output_names:
            shape = tuple(self.context.get_tensor_shape(name))
            out = torch.empty(shape, dtype=self._torch_dtype(self.dtypes[name]), device="cuda")
            self.context.set_tensor_address(name, out.data_ptr())
            outputs[name] = out
        stream = torch.cuda.current_stream()
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise ExportError("TensorRTRunner: execute_async_v3 failed")
        stream.synchronize()
        return {n: t.cpu().numpy() for n, t in outputs.items()}
