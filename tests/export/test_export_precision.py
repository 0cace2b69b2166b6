"""FP16 and INT8 graphs (oars.export.precision): written by export_model, checked against the FP32 graph on ONNX
Runtime, in the form TensorRT's strong typing / explicit quantization takes, and run by the deploy predictor."""

from __future__ import annotations

import copy
import os

import cv2
import numpy as np
import onnx
import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case
from onnx import numpy_helper

from detection.export.compare import detection_agreement
from oars.config import apply_overrides
from oars.export.check import ort_outputs, ort_session, synthetic_image
from oars.export.errors import ExportCheckError, ExportError
from oars.export.onnx_export import reduce_precision
from oars.export.precision import check_agreement, layers_reading_inputs, output_agreement
from oars.export.spec import ExportSpec
from oars.pipelines.export import export_model
from oars_deploy.deploy_config import read_deploy_yaml

DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")


@pytest.fixture(scope="module")
def calib_dir(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("calib")
    for i in range(10):
        cv2.imwrite(str(folder / f"img{i}.png"), synthetic_image(96, 128, seed=50 + i))
    return str(folder)


@pytest.fixture(scope="module")
def det_case(tmp_path_factory):
    return shrunk_export_case(DET_CFG, str(tmp_path_factory.mktemp("det_precision")))


def _with(cfg, *overrides: str):
    cfg = copy.deepcopy(cfg)
    apply_overrides(cfg, list(overrides))
    return cfg


def _initializer_types(model: onnx.ModelProto) -> set[int]:
    return {t.data_type for t in model.graph.initializer}


# ----------------------------------------------------------------------------- agreement measures
def test_output_agreement_hand_computed():
    ref = np.array([[1, 2], [3, 4]])
    assert output_agreement(ref, np.array([[1, 2], [3, 0]])) == 0.75  # labels: fraction equal
    r = np.array([3.0, 4.0])  # ||r|| = 5
    assert output_agreement(r, np.array([3.0, 4.5])) == pytest.approx(1 - 0.5 / 5)
    assert output_agreement(r, 2 * r) == 0.0  # a wrong scale is no agreement, although the cosine is 1
    assert output_agreement(r, np.array([np.nan, 4.0])) == 0.0
    assert output_agreement(r, r[:1]) == 0.0  # another shape
    assert output_agreement(np.zeros(3), np.zeros(3)) == 1.0


def _dets(boxes, scores, labels, m=4):
    n = len(scores)
    b, s, lab = np.zeros((1, m, 4), np.float32), np.zeros((1, m), np.float32), np.full((1, m), -1)
    b[0, :n], s[0, :n], lab[0, :n] = np.reshape(boxes, (n, 4)), scores, labels
    return {"num_dets": np.array([n]), "boxes": b, "scores": s, "labels": lab}


def test_detection_agreement_weights_by_score():
    ref = _dets([[0, 0, 10, 10], [20, 20, 30, 30]], [0.9, 0.1], [0, 1])
    # the confident detection found again (IoU 0.81), the weak one lost, one spurious weak detection added
    cand = _dets([[1, 1, 10, 10], [50, 50, 60, 60]], [0.8, 0.2], [0, 1])
    got = detection_agreement(ref, cand)
    assert got["detections_recall"] == pytest.approx(0.9 / 1.0)
    assert got["detections_precision"] == pytest.approx(0.8 / 1.0)
    relabelled = _dets([[0, 0, 10, 10], [20, 20, 30, 30]], [0.9, 0.1], [1, 0])  # same boxes, other classes
    assert detection_agreement(ref, relabelled) == {"detections_recall": 0.0, "detections_precision": 0.0}
    empty = _dets([], [], [])
    # nothing found by either graph: not measured (None), not a perfect 1.0
    assert detection_agreement(empty, empty) == {"detections_recall": None, "detections_precision": None}
    assert detection_agreement(empty, cand) == {"detections_recall": None, "detections_precision": 0.0}


def test_agreement_not_measured_passes_and_says_so():
    import runpy

    from demo_utils import ROOT

    format_check = runpy.run_path(os.path.join(ROOT, "tools/export.py"))["format_check"]
    empty = _dets([], [], [])
    check = check_agreement(empty, empty, "int8", agreement=detection_agreement)
    assert check["agreement"] == {"detections_recall": None, "detections_precision": None}
    line = format_check({"outputs": {}, "precision": {"precision": "int8", **check}}).splitlines()[-1]
    assert line == ("INT8 vs FP32 graph: agreement detections_recall not measured, detections_precision not measured "
                    "(needed 0.9)")


def test_check_agreement_names_the_output_and_threshold():
    ref = {"label": np.array([0, 1, 2, 3])}
    assert check_agreement(ref, {"label": np.array([0, 1, 2, 3])}, "fp16")["agreement"] == {"label": 1.0}
    with pytest.raises(ExportCheckError, match=r"INT8 model agrees .* output 'label' only 0\.7500 \(needed: 0\.9"):
        check_agreement(ref, {"label": np.array([0, 1, 2, 0])}, "int8")
    assert check_agreement(ref, {"label": np.array([0, 1, 2, 0])}, "int8", min_agreement=0.7)["min_agreement"] == 0.7
    for bad in (1.5, "high", -0.1):
        with pytest.raises(ExportError, match="export.min_agreement must be a number in \\[0, 1\\]"):
            check_agreement(ref, ref, "int8", min_agreement=bad)


# ----------------------------------------------------------------------------- export
def test_fp16_export(demo_case, tmp_path):
    cfg, ckpt = demo_case
    result = export_model(_with(cfg, "export.output_op=softmax"), ckpt, str(tmp_path), half=True, dynamic=True)
    deploy = read_deploy_yaml(result["deploy"])
    assert deploy["model"]["onnx"] == "model_fp16.onnx" and deploy["model"]["onnx_fp32"] == "model.onnx"
    assert deploy["model"]["precision"] == "fp16"
    fp16 = onnx.load(os.path.join(tmp_path, "model_fp16.onnx"))
    assert onnx.TensorProto.FLOAT16 in _initializer_types(fp16)  # weights are FP16 ...
    io = [*fp16.graph.input, *fp16.graph.output]
    assert all(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for v in io)  # ... the interface FP32
    agreement = result["check"]["precision"]["agreement"]["prob"]
    assert 0.99 <= agreement < 1.0  # really reduced, and close
    assert deploy["model"]["agreement_with_fp32"] == {"prob": agreement}


def test_int8_export_is_explicit_quantization(demo_case, calib_dir, tmp_path):
    cfg, ckpt = demo_case
    result = export_model(_with(cfg, "export.output_op=none"), ckpt, str(tmp_path), int8=True, calib_dir=calib_dir)
    deploy = read_deploy_yaml(result["deploy"])
    assert deploy["model"]["onnx"] == "model_int8.onnx" and deploy["model"]["precision"] == "int8"
    model = onnx.load(os.path.join(tmp_path, "model_int8.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    quant = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert quant
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):  # TensorRT: symmetric int8, zero point 0
            zero_point = inits[node.input[2]]
            assert zero_point.dtype == np.int8 and not zero_point.any()
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs[0].input[0] == "image" and convs[0].input[1] in inits  # the layer reading the image stays float
    for conv in convs[1:]:  # activations and weights of every other conv go through Q/DQ; weights per channel
        x, w = producer[conv.input[0]], producer[conv.input[1]]
        assert x.op_type == "DequantizeLinear" and w.op_type == "DequantizeLinear"
        weight, scale = inits[w.input[0]], inits[w.input[1]]
        assert weight.dtype == np.int8 and scale.shape == (weight.shape[0],) and weight.min() >= -127
        assert conv.input[2] in inits  # the bias stays float: TensorRT folds it in itself
    assert result["check"]["precision"]["agreement"]["logits"] >= 0.9


def test_int8_detection_export_reports_matched_detections(det_case, calib_dir, tmp_path):
    cfg, ckpt = det_case
    result = export_model(_with(cfg, "export.min_agreement=0.5"), ckpt, str(tmp_path), int8=True,
                          calib_dir=calib_dir)
    check = result["check"]["precision"]
    assert check["min_agreement"] == 0.5 and set(check["agreement"]) == {"detections_recall", "detections_precision"}
    assert all(0.5 <= v <= 1.0 for v in check["agreement"].values())


def _conv_net(path: str) -> None:
    """image [B,3,32,32] -> Conv 3x3 (16) -> Relu -> Conv 1x1 (4) -> logits: random weights, no biases, so every
    output depends on the input (a random-weight segmentor's logits are mostly its biases)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.3, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 16, 1, 1)).astype(np.float32) * 0.3, "w2")
    nodes = [onnx.helper.make_node("Conv", ["image", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             onnx.helper.make_node("Conv", ["r1", "w2"], ["logits"], name="conv2")]
    graph = onnx.helper.make_graph(
        nodes, "convnet", [onnx.helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, [1, 3, 32, 32])],
        [onnx.helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1, 4, 32, 32])], [w1, w2])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)


def test_int8_check_catches_bad_calibration(tmp_path):
    """Ranges calibrated on black images clip real ones: the agreement check fails; real calibration passes."""
    src = str(tmp_path / "model.onnx")
    _conv_net(src)
    assert layers_reading_inputs(src) == ["conv1"]  # stays float; conv2 is quantized
    spec = ExportSpec(module=None, input_name="image", output_names=["logits"], outputs=[], postprocess={})
    rng = np.random.default_rng(1)
    images = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    for method in ("entropy", "minmax", "percentile"):
        good = reduce_precision(spec, src, str(tmp_path / f"{method}.onnx"), "int8", images, method, images[:4])
        assert 0.9 <= good["agreement"]["logits"] < 1.0, method
    black = [np.zeros_like(x) for x in images]
    with pytest.raises(ExportCheckError, match="INT8 model agrees with the FP32 one on output 'logits' only"):
        reduce_precision(spec, src, str(tmp_path / "bad.onnx"), "int8", black, "entropy", images[:4])


def test_failed_precision_check_leaves_no_files(demo_case, calib_dir, tmp_path):
    cfg, ckpt = demo_case
    out = tmp_path / "out"
    with pytest.raises(ExportCheckError, match="FP16 model agrees with the FP32 one on output 'prob' only"):
        export_model(_with(cfg, "export.output_op=softmax", "export.min_agreement=1.0"), ckpt, str(out), half=True)
    assert not out.exists()  # not even the folder the export made


def test_precision_argument_errors(demo_case, calib_dir, tmp_path):
    cfg, ckpt = demo_case
    with pytest.raises(ExportError, match="--int8 needs --calib-dir"):
        export_model(cfg, ckpt, str(tmp_path), int8=True)
    with pytest.raises(ExportError, match="--calib-dir is for --int8"):
        export_model(cfg, ckpt, str(tmp_path), calib_dir=calib_dir)
    with pytest.raises(ExportError, match="no images"):
        export_model(cfg, ckpt, str(tmp_path), int8=True, calib_dir=str(tmp_path))
    with pytest.raises(ExportError, match="--calib-method must be one of"):
        export_model(cfg, ckpt, str(tmp_path), int8=True, calib_dir=calib_dir, calib_method="kl")
    with pytest.raises(ExportError, match="--calib-num must be at least 1, got 0"):
        export_model(cfg, ckpt, str(tmp_path), int8=True, calib_dir=calib_dir, calib_num=0)


def test_predictor_runs_the_reduced_graph(demo_case, calib_dir, tmp_path):
    """deploy.yaml points the predictor at model_int8.onnx: its output is ONNX Runtime's on that file."""
    from oars_deploy.predictor import Predictor

    cfg, ckpt = demo_case
    export_model(_with(cfg, "export.output_op=none"), ckpt, str(tmp_path), int8=True, calib_dir=calib_dir)
    predictor = Predictor(str(tmp_path))
    image = cv2.imread(os.path.join(calib_dir, "img0.png"))
    x, _ = predictor.preprocess([image])
    raw = predictor.infer(x)["logits"]
    direct = ort_outputs(ort_session(os.path.join(tmp_path, "model_int8.onnx")), "image", x)["logits"]
    np.testing.assert_array_equal(raw, direct)
    fp32 = ort_outputs(ort_session(os.path.join(tmp_path, "model.onnx")), "image", x)["logits"]
    assert not np.array_equal(raw, fp32)


def test_int8_calibration_sees_every_batch_in_groups(tmp_path, monkeypatch):
    """Calibration runs in groups of batches (bounded memory); MinMax ranges must equal a one-batch-at-a-time
    pass, and the last batch (the widest values here) must count."""
    from oars.export import precision

    src = str(tmp_path / "model.onnx")
    _conv_net(src)
    rng = np.random.default_rng(2)
    images = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) * (1 + (i == 11) * 3) for i in range(12)]

    def scales(path: str) -> dict[str, float]:
        model = onnx.load(path)
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        return {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node if n.op_type == "QuantizeLinear"}

    precision.quantize_int8(src, str(tmp_path / "grouped.onnx"), images, "image", "minmax")  # groups of 6
    monkeypatch.setattr(precision, "CALIB_GROUP", 1)
    precision.quantize_int8(src, str(tmp_path / "single.onnx"), images, "image", "minmax")
    precision.quantize_int8(src, str(tmp_path / "without_last.onnx"), images[:11], "image", "minmax")
    grouped = scales(str(tmp_path / "grouped.onnx"))
    assert grouped == pytest.approx(scales(str(tmp_path / "single.onnx")), rel=1e-6)
    assert grouped["r1"] > scales(str(tmp_path / "without_last.onnx"))["r1"]


def test_cli_int8(demo_case, calib_dir, tmp_path, monkeypatch, capsys):
    """tools/export.py --int8 --calib-dir --calib-num --calib-method: writes both graphs and prints the agreement."""
    import runpy
    import sys

    from oars.config import dump_config

    cfg, ckpt = demo_case
    cfg_path = str(tmp_path / "cfg.yaml")
    dump_config(cfg, cfg_path)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["export.py", "-c", cfg_path, "-w", ckpt, "-o", str(out), "--int8",
                                      "--calib-dir", calib_dir, "--calib-num", "4", "--calib-method", "minmax"])
    runpy.run_path(os.path.join(ROOT, "tools/export.py"), run_name="__main__")
    text = capsys.readouterr().out
    assert f"wrote {out / 'model_int8.onnx'}" in text
    assert "INT8 vs FP32 graph: agreement label " in text and "(needed 0.9)" in text
    assert read_deploy_yaml(str(out / "deploy.yaml"))["model"]["onnx"] == "model_int8.onnx"


def test_detection_agreement_matches_degenerate_boxes_by_their_corners():
    # boxes clipped to zero height (random-weight FCOS gives 88 % of its score mass such boxes): IoU 0 even with
    # themselves, so an identical candidate once agreed 0.12; corners within the self-check's box_atol match them
    flat = [[10, 12, 14, 12], [30, 40, 30, 44]]
    ref = _dets(flat, [0.5, 0.3], [0, 1])
    same = _dets(np.array(flat) + 1e-3, [0.5, 0.3], [0, 1])
    assert detection_agreement(ref, same) == {"detections_recall": 1.0, "detections_precision": 1.0}
    moved = _dets(np.array(flat) + [[0, 0, 0, 2], [0, 0, 0, 0]], [0.5, 0.3], [0, 1])  # the first one: 2 px taller
    assert detection_agreement(ref, moved)["detections_recall"] == pytest.approx(0.3 / 0.8)
    relabelled = _dets(flat, [0.5, 0.3], [1, 0])
    assert detection_agreement(ref, relabelled) == {"detections_recall": 0.0, "detections_precision": 0.0}


def test_detection_agreement_leaves_out_ties_broken_in_another_order():
    # four candidates of one score, a top-2 cut: ONNX Runtime kept the first two, another runtime (sorting equals
    # in another order) the last two; the untied detection is found in both. Only the tie is left out.
    tied = [[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10], [0, 40, 10, 50]]
    ref = _dets([[60, 60, 70, 70], *tied[:2]], [0.9, 0.25, 0.25], [0, 1, 1])
    other_order = _dets([[60, 60, 70, 70], *tied[2:]], [0.9, 0.25 + 1e-7, 0.25 + 1e-7], [0, 1, 1])
    assert detection_agreement(ref, other_order) == {"detections_recall": 1.0, "detections_precision": 1.0}
    # the same boxes with distinct scores: no tie explains the two lost ones
    untied = _dets([[60, 60, 70, 70], *tied[2:]], [0.9, 0.3, 0.2], [0, 1, 1])
    assert detection_agreement(ref, untied)["detections_recall"] == pytest.approx(0.9 / 1.4)
    # a tie on one side only (the candidate found none of that score) is no excuse either
    lost = _dets([[60, 60, 70, 70]], [0.9], [0])
    assert detection_agreement(ref, lost)["detections_recall"] == pytest.approx(0.9 / 1.4)
    # all scores tied and every tie split: nothing left to measure, not a perfect 1.0
    only_tie = _dets(tied[:2], [0.25, 0.25], [1, 1])
    assert detection_agreement(only_tie, _dets(tied[2:], [0.25, 0.25], [1, 1])) == {
        "detections_recall": None, "detections_precision": None}
