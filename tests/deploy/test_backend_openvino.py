"""The runtime's edge backends (oars_deploy.backends_openvino, oars_deploy.backends): OpenVINO on model.xml and
ONNX Runtime on the mobile format's model.ort map named inputs to named outputs as ONNX Runtime on model.onnx
does, ``oars-infer --backend openvino|ort`` runs them without torch, and every way they cannot start is one
message (the file the export did not write, another device, a damaged file, a missing package with its pip
command). Tiny hand-built graphs: milliseconds to make, no torch export."""

from __future__ import annotations

import os.path as osp

import numpy as np
import pytest
from hidden_packages import hide_packages
from test_deploy_python_predictor import _images, run_infer_without_torch
from tiny_exports import tiny_segmentor_dir

from oars_deploy.backends import BACKENDS, OrtBackend, make_backend
from oars_deploy.cli import run as infer_main
from oars_deploy.errors import DeployError
from oars_deploy.records import read_results

ov = pytest.importorskip("openvino", reason="the runtime's openvino extra is not installed")


def _with_edge_files(folder: str) -> str:
    """model.xml/.bin (OpenVINO) and model.ort (ONNX Runtime's format) beside the folder's model.onnx."""
    import onnxruntime as ort

    onnx_path = osp.join(folder, "model.onnx")
    ov.save_model(ov.convert_model(onnx_path), osp.join(folder, "model.xml"), compress_to_fp16=False)
    options = ort.SessionOptions()
    options.optimized_model_filepath = osp.join(folder, "model.ort")
    options.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    return folder


@pytest.fixture()
def model_dir(tmp_path) -> str:
    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 2)
    return _with_edge_files(folder)


def test_edge_backends_give_onnx_runtime_outputs(model_dir):
    x = np.random.default_rng(0).normal(size=(2, 3, 32, 32)).astype(np.float32)
    ref = OrtBackend(osp.join(model_dir, "model.onnx"))({"image": x})
    for name in ("openvino", "ort"):
        backend = make_backend(name, model_dir, {}, "cpu")
        got = backend({"image": x})
        assert list(got) == ["logits"] and got["logits"].dtype == np.float32
        # FP32 inference even on a bf16-capable CPU (OpenVINO's default there would differ by ~1e-2)
        np.testing.assert_allclose(got["logits"], ref["logits"], rtol=0, atol=1e-5)
    openvino = make_backend("openvino", model_dir, {"openvino": "model.xml"}, "cpu")
    first = openvino({"image": x})["logits"]
    kept = first.copy()
    second = openvino({"image": -x})["logits"]  # the request reuses its buffers: an earlier result must not change
    assert not np.array_equal(second, kept)
    np.testing.assert_array_equal(first, kept)
    with pytest.raises(DeployError, match=r"the model has inputs \['image'\], not \['img'\]"):
        openvino({"img": x})
    assert BACKENDS == ("onnxruntime", "ort", "openvino", "ncnn", "mnn", "litert", "tensorrt")


def test_oars_infer_backends_give_the_same_records_without_torch(model_dir, tmp_path):
    images = _images(str(tmp_path / "images"), [40, 32])
    outs = {}
    for backend in ("onnxruntime", "openvino", "ort"):
        out = str(tmp_path / f"out_{backend}")
        proc = run_infer_without_torch("--model-dir", model_dir, "-i", images, "-o", out, "--backend", backend)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[backend] = read_results(out)
    assert len(outs["onnxruntime"]) == 2
    assert outs["openvino"] == outs["onnxruntime"] == outs["ort"]


def test_backend_errors_are_one_message(model_dir, tmp_path, monkeypatch):
    bare, _ = tiny_segmentor_dir(str(tmp_path / "bare"), 1)  # model.onnx only
    images = _images(str(tmp_path / "images"), [32])
    for name, fmt, file in (("openvino", "openvino", "model.xml"), ("ort", "ort", "model.ort")):
        with pytest.raises(DeployError, match=rf"^--backend {name}: no {file} in {bare}; export the model with "
                                              rf"tools/export.py --format {fmt}$"):
            infer_main(["--model-dir", bare, "-i", images, "-o", str(tmp_path / "o"), "--backend", name])
    with pytest.raises(DeployError, match=r"^--backend openvino runs on the CPU; use --device cpu, not 'cuda'$"):
        make_backend("openvino", model_dir, {}, "cuda")
    with open(osp.join(model_dir, "broken.xml"), "w") as f:
        f.write("<net name='x'>")  # truncated
    with pytest.raises(DeployError, match=r"broken.xml \(or its .bin beside it\) is damaged or not an OpenVINO "
                                          r"model .*re-export it with tools/export.py --format openvino$"):
        make_backend("openvino", model_dir, {"openvino": "broken.xml"}, "cpu")
    with pytest.raises(DeployError, match=r"backend must be one of \['onnxruntime', 'ort', 'openvino', 'ncnn', 'mnn', "
                                          r"'litert', 'tensorrt'\]"):
        make_backend("paddle-lite", model_dir, {}, "cpu")
    hide_packages(monkeypatch, "openvino")
    with pytest.raises(DeployError, match=r"^--backend openvino needs openvino, .*pip install"):
        make_backend("openvino", model_dir, {}, "cpu")
