"""Runtimes that execute the exported model: ONNX Runtime (CPU or CUDA) on model.onnx or, as ``ort``, on the mobile
format's model.ort (``tools/export.py --format ort``), OpenVINO on model.xml (``--format openvino``,
:mod:`oars_deploy.backends_openvino`), LiteRT on model.tflite (``--format litert``, :mod:`oars_deploy.backends_litert`),
ncnn on model.ncnn.param/.bin (``--format ncnn``, :mod:`oars_deploy.backends_ncnn`), MNN on model.mnn
(``--format mnn``, :mod:`oars_deploy.backends_mnn`), TensorRT (an engine built by ``tools/export.py --format
tensorrt``). Each maps ``{input name: array}`` to ``{output name: NumPy array}``; none knows what the outputs mean."""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError

BACKENDS = ("onnxruntime", "ort", "openvino", "ncnn", "mnn", "litert", "tensorrt")
# backend -> (deploy.yaml ``model`` key naming its file, the default file name, the --format that writes it)
MODEL_FILES = {"onnxruntime": ("onnx", "model.onnx", "onnx"), "ort": ("ort", "model.ort", "ort"),
               "openvino": ("openvino", "model.xml", "openvino"), "tensorrt": ("engine", "model.engine", "tensorrt"),
               "litert": ("litert", "model.tflite", "litert"), "ncnn": ("ncnn", "model.ncnn.param", "ncnn"),
               "mnn": ("mnn", "model.mnn", "mnn")}


class OrtBackend:
    """ONNX Runtime session on the CPU or, for ``device='cuda'``, the CUDAExecutionProvider (an error when this
    onnxruntime has none, instead of ORT's silent fall-back to the CPU)."""

    def __init__(self, model_path: str, device: str = "cpu", threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise DeployError(f"the onnxruntime backend needs the onnxruntime package (pip install onnxruntime, or "
                              f"onnxruntime-gpu for --device cuda): {err}") from None
        if not osp.isfile(model_path):
            raise DeployError(f"model file not found: {model_path}")
        available = ort.get_available_providers()
        if device == "cpu":
            providers = ["CPUExecutionProvider"]
        elif device.startswith("cuda"):
            if "CUDAExecutionProvider" not in available:
                raise DeployError(f"--device cuda: this onnxruntime has no CUDAExecutionProvider (available: "
                                  f"{available}); install onnxruntime-gpu, or use --device cpu")
            index = int(device.split(":", 1)[1]) if ":" in device else 0
            providers = [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        else:
            raise DeployError(f"device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.session = _open_session(ort, model_path, options, providers)
        if device.startswith("cuda") and "CUDAExecutionProvider" not in self.session.get_providers():
            raise DeployError("--device cuda: onnxruntime could not start the CUDAExecutionProvider (CUDA/cuDNN "
                              f"libraries missing?); the session runs on {self.session.get_providers()}")
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.input_names = [i.name for i in self.session.get_inputs()]

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        feed = {k: np.ascontiguousarray(to_numpy(v)) for k, v in inputs.items()}
        unknown = set(feed) - set(self.input_names)
        if unknown:
            raise DeployError(f"the model has inputs {self.input_names}, not {sorted(unknown)}")
        return dict(zip(self.output_names, self.session.run(self.output_names, feed)))


def _open_session(ort: Any, model_path: str, options: Any, providers: list) -> Any:
    """An ONNX Runtime session for ``model_path``; a file ONNX Runtime cannot load (truncated by a full disk or an
    interrupted copy, not ONNX at all, a graph it cannot run) is one :class:`DeployError` naming the file and how
    to get a good one, instead of ONNX Runtime's ``InvalidProtobuf``/``Fail`` traceback."""
    try:
        return ort.InferenceSession(model_path, sess_options=options, providers=providers)
    except Exception as err:  # onnxruntime raises its own pybind classes (InvalidProtobuf, Fail, InvalidGraph, ...)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DeployError(f"model file {model_path} is damaged or not an ONNX model ONNX Runtime can load "
                          f"({type(err).__name__}: {reason[:300]}); re-export it with tools/export.py") from None


class TensorRTBackend:
    """A TensorRT engine run by :class:`oars_deploy.tensorrt.TensorRTRunner` (tensorrt and CuPy, imported only
    when asked for)."""

    def __init__(self, engine_path: str, device: str = "cuda") -> None:
        if not osp.isfile(engine_path):
            raise DeployError(f"--backend tensorrt: no engine {engine_path}; build one with tools/export.py "
                              "--format tensorrt")
        if not device.startswith("cuda"):
            raise DeployError(f"--backend tensorrt runs on the GPU only; use --device cuda, not {device!r}")
        from oars_deploy.tensorrt import TensorRTRunner

        self.runner = TensorRTRunner(engine_path)

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        return self.runner(inputs)


def make_backend(name: str, model_dir: str, model: dict, device: str) -> Any:
    """The backend ``name`` for the model in ``model_dir``; ``model`` is deploy.yaml's ``model`` section, whose keys
    name the files (:data:`MODEL_FILES`: ``onnx`` default model.onnx, ``ort`` model.ort, ``openvino`` model.xml,
    ``ncnn`` model.ncnn.param, ``mnn`` model.mnn, ``engine`` model.engine). A file the export did not write is one
    message naming the --format that writes it."""
    if name not in MODEL_FILES:
        raise DeployError(f"backend must be one of {list(BACKENDS)}, got {name!r}")
    key, default, fmt = MODEL_FILES[name]
    path = osp.join(model_dir, model.get(key, default))
    if name in ("ort", "openvino", "litert", "ncnn", "mnn") and not osp.isfile(path):
        raise DeployError(f"--backend {name}: no {osp.basename(path)} in {model_dir}; export the model with "
                          f"tools/export.py --format {fmt}")
    if name in ("onnxruntime", "ort"):
        return OrtBackend(path, device)
    if name == "openvino":
        from oars_deploy.backends_openvino import OpenVINOBackend

        return OpenVINOBackend(path, device)
    if name == "litert":
        from oars_deploy.backends_litert import LiteRTBackend

        return LiteRTBackend(path, device)
    if name == "ncnn":
        from oars_deploy.backends_ncnn import NcnnBackend

        return NcnnBackend(path, device)
    if name == "mnn":
        from oars_deploy.backends_mnn import MnnBackend

        return MnnBackend(path, device)
    return TensorRTBackend(path, device)
