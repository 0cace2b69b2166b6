"""oars.export.tensorrt: what runs without a GPU (clear errors, profile shapes, network flags, calibration batches)
here, and engine-vs-ONNX Runtime parity (FP32, FP16 and INT8 graphs) on a GPU with the tensorrt package (tests
marked gpu)."""

from __future__ import annotations

import importlib.util
import os
import sys

import cv2
import numpy as np
import pytest
from demo_utils import ROOT

from oars.errors import OarsError
from oars.export.errors import ExportError
from oars.export.precision import calibration_batches, calibration_images, convert_fp16, quantize_int8
from oars.export.tensorrt import TensorRTRunner, build_engine, network_flags, profile_shapes
from oars_deploy.preprocess import preprocess

SEG_CFG = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
STEPS = [
    {"type": "Resize", "size": [64, 64], "keep_ratio": True, "interpolation": "linear"},
    {"type": "Normalize", "mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375], "to_rgb": True},
    {"type": "Pad", "size": [64, 64], "value": 0.0},
    {"type": "Permute"},
]


def _deploy(shape, **input_extra) -> dict:
    return {"input": {"name": "image", "shape": list(shape), **input_extra}, "preprocess": STEPS}


# ----------------------------------------------------------------------------- CPU
def test_profile_static_shape_is_min_opt_max():
    assert profile_shapes(_deploy([2, 3, 64, 96])) == ((2, 3, 64, 96),) * 3


def test_profile_dynamic_batch():
    assert profile_shapes(_deploy([-1, 3, 64, 64])) == ((1, 3, 64, 64), (1, 3, 64, 64), (8, 3, 64, 64))
    assert profile_shapes(_deploy([-1, 3, 64, 64]), opt_batch=4)[1] == (4, 3, 64, 64)
    assert profile_shapes(_deploy([-1, 3, 64, 64], opt_batch=2))[1] == (2, 3, 64, 64)


def test_profile_rejects_dynamic_spatial_axes_and_bad_opt():
    with pytest.raises(ExportError, match="only the batch axis"):
        profile_shapes(_deploy([-1, 3, -1, 64]))
    with pytest.raises(ExportError, match="opt batch"):
        profile_shapes(_deploy([-1, 3, 64, 64]), opt_batch=9)
    with pytest.raises(ExportError, match="input.shape"):
        profile_shapes({"input": {"shape": [3, 64, 64]}})


def test_missing_tensorrt_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # import tensorrt -> ImportError
    with pytest.raises(OarsError, match="pip install tensorrt"):
        build_engine(str(tmp_path / "model.onnx"), str(tmp_path / "model.engine"), _deploy([1, 3, 64, 64]))
    with pytest.raises(OarsError, match="pip install tensorrt"):
        TensorRTRunner(str(tmp_path / "model.engine"))


def test_calibration_batches_use_the_deploy_preprocessing(tmp_path):
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(80, 80), (60, 100), (100, 50)]):
        cv2.imwrite(str(tmp_path / f"c{i}.png"), (rng.random((h, w, 3)) * 255).astype(np.uint8))
    (tmp_path / "notes.txt").write_text("not an image")
    files = calibration_images(str(tmp_path))
    assert [os.path.basename(f) for f in files] == ["c0.png", "c1.png", "c2.png"]
    batches = list(calibration_batches(files, _deploy([2, 3, 64, 64]), batch=2))
    assert [b.shape for b in batches] == [(2, 3, 64, 64)] * 2 and batches[0].dtype == np.float32
    for k, f in enumerate(files):
        ref = preprocess([cv2.imread(f)], STEPS)[0][0]
        np.testing.assert_allclose(batches[k // 2][k % 2], ref, atol=1e-6)
    np.testing.assert_array_equal(batches[1][1], batches[1][0])  # the last batch is filled up with its last image


def test_calibration_dir_errors(tmp_path):
    with pytest.raises(ExportError, match="not a folder"):
        calibration_images(str(tmp_path / "missing"))
    with pytest.raises(ExportError, match="no images"):
        calibration_images(str(tmp_path))


class _Flag:
    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value


@pytest.mark.parametrize("version,names,expected", [
    ("8.6.1", ("EXPLICIT_BATCH",), 1 << 0),  # 8.x: explicit batch must be asked for; no strong typing yet
    ("10.3.0", ("EXPLICIT_BATCH", "STRONGLY_TYPED"), 1 << 1),  # 10.x: explicit batch is the only mode
    ("11.4.0", ("STRONGLY_TYPED",), 1 << 1),  # 11.x: strong typing always on, the flag accepted
])
def test_network_flags_are_strongly_typed_on_every_version(version, names, expected):
    """No precision builder flags exist any more (TensorRT 11): the network must be strongly typed."""
    kinds = type("NetworkDefinitionCreationFlag", (), {n: _Flag(i) for i, n in
                                                       enumerate(("EXPLICIT_BATCH", "STRONGLY_TYPED")) if n in names})
    trt = type("trt", (), {"__version__": version, "NetworkDefinitionCreationFlag": kinds})
    assert network_flags(trt) == expected


# ----------------------------------------------------------------------------- GPU
def _needs_tensorrt():
    if importlib.util.find_spec("tensorrt") is None:
        pytest.skip("the tensorrt package is not installed")


def _export(config: str, folder: str, overrides: list[str], dynamic: bool = False) -> str:
    """A shrunk random-weight model exported with oars' export_model (the deploy/cpp test's helper)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
    from test_deploy_cpp import _export as export_shrunk

    return export_shrunk(config, folder, overrides, dynamic=dynamic)


def _ort(model_dir: str, x: np.ndarray, file: str = "model.onnx") -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(os.path.join(model_dir, file), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"image": x})))


def _engine(model_dir: str, half: bool, file: str | None = None) -> TensorRTRunner:
    """An engine of model.onnx, or of its FP16 graph (``half``), or of ``file``; precision is the graph's."""
    from oars_deploy.deploy_config import read_deploy_yaml

    deploy = read_deploy_yaml(os.path.join(model_dir, "deploy.yaml"))
    onnx_path = os.path.join(model_dir, file or "model.onnx")
    if half:
        onnx_path = convert_fp16(onnx_path, os.path.join(model_dir, "model_fp16.onnx"))
    path = os.path.join(model_dir, os.path.basename(onnx_path) + ".engine")
    return TensorRTRunner(build_engine(onnx_path, path, deploy))


def _input(batch: int = 2) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((batch, 3, 64, 64)).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("half,atol", [(False, 1e-3), (True, 5e-2)])
def test_tensorrt_segmentation_logits_match_onnxruntime(tmp_path, half, atol):
    _needs_tensorrt()
    model_dir = _export(SEG_CFG, str(tmp_path), ["export.output_op=none", "export.input_shape=[2,3,64,64]"])
    x = _input()
    ref, got = _ort(model_dir, x), _engine(model_dir, half)(x)
    scale = max(1.0, float(np.abs(ref["logits"]).max()))
    assert np.abs(got["logits"].astype(np.float32) - ref["logits"]).max() <= atol * scale


@pytest.mark.gpu
def test_tensorrt_segmentation_labels_match_onnxruntime(tmp_path):
    _needs_tensorrt()
    model_dir = _export(SEG_CFG, str(tmp_path), [])
    x = _input(1)
    ref, got = _ort(model_dir, x), _engine(model_dir, False)(x)
    assert (got["label"].astype(np.int64) == ref["label"]).mean() >= 0.999


@pytest.mark.gpu
def test_tensorrt_dynamic_batch_profile(tmp_path):
    _needs_tensorrt()
    model_dir = _export(SEG_CFG, str(tmp_path), ["export.output_op=none"], dynamic=True)
    runner = _engine(model_dir, False)  # profile: min 1, opt 1 (the export batch), max 8
    for batch in (1, 3, 8):
        x = _input(batch)
        np.testing.assert_allclose(runner(x)["logits"], _ort(model_dir, x)["logits"], atol=1e-3, rtol=1e-3)


def _detections_match(ref: dict, got: dict, score_atol: float, box_atol: float) -> None:
    """Per image, the engine's detections and ORT's as sets: same count, each with a partner of the same label."""
    for i in range(len(ref["num_dets"])):
        n_ref, n_got = int(ref["num_dets"][i]), int(got["num_dets"][i])
        assert abs(n_ref - n_got) <= max(2, n_ref // 10), f"image {i}: {n_got} detections vs {n_ref}"
        unused = list(range(n_got))
        missed = 0
        for k in range(n_ref):
            match = next((j for j in unused if int(got["labels"][i, j]) == int(ref["labels"][i, k])
                          and abs(float(got["scores"][i, j]) - float(ref["scores"][i, k])) <= score_atol
                          and np.abs(got["boxes"][i, j] - ref["boxes"][i, k]).max() <= box_atol), None)
            if match is None:
                missed += 1
            else:
                unused.remove(match)
        assert missed <= max(2, n_ref // 10), f"image {i}: {missed} of {n_ref} detections without a partner"


@pytest.mark.gpu
@pytest.mark.parametrize("half", [False, True])
def test_tensorrt_yolov3_with_nms_matches_onnxruntime(tmp_path, half):
    _needs_tensorrt()
    model_dir = _export(DET_CFG, str(tmp_path), ["export.postprocess=true", "export.input_shape=[2,3,64,64]"])
    x = _input()
    ref, got = _ort(model_dir, x), _engine(model_dir, half)(x)
    _detections_match(ref, got, score_atol=5e-3 if half else 1e-3, box_atol=0.5 if half else 1e-2)


@pytest.mark.gpu
def test_tensorrt_yolov3_raw_matches_onnxruntime(tmp_path):
    _needs_tensorrt()
    model_dir = _export(DET_CFG, str(tmp_path), ["export.postprocess=false"])
    x = _input(1)
    ref, got = _ort(model_dir, x), _engine(model_dir, False)(x)
    np.testing.assert_allclose(got["scores"], ref["scores"], atol=1e-3)
    np.testing.assert_allclose(got["boxes"], ref["boxes"], atol=1e-2)


@pytest.mark.gpu
def test_tensorrt_int8_qdq_graph_matches_onnxruntime(tmp_path):
    """The INT8 engine comes from the Q/DQ graph (explicit quantization): close to ONNX Runtime on that graph."""
    _needs_tensorrt()
    model_dir = _export(SEG_CFG, str(tmp_path), ["export.output_op=none", "export.input_shape=[2,3,64,64]"])
    x = _input()
    quantize_int8(os.path.join(model_dir, "model.onnx"), os.path.join(model_dir, "model_int8.onnx"), [x], "image")
    ref, got = _ort(model_dir, x, "model_int8.onnx"), _engine(model_dir, False, "model_int8.onnx")(x)
    rel = np.linalg.norm(got["logits"] - ref["logits"]) / max(np.linalg.norm(ref["logits"]), 1e-12)
    assert rel <= 0.05
