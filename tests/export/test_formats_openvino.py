"""--format openvino (oars.export.formats.openvino): OpenVINO IR written from the exported ONNX graph at FP32, FP16
and INT8, parity-checked against ONNX Runtime FP32 on the self-check inputs (printed, kept in deploy.yaml, failing
the export below the threshold with nothing left behind), and run by ``oars-infer --backend openvino`` with the
records ONNX Runtime gives."""

from __future__ import annotations

import os
import os.path as osp
import re

import numpy as np
import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case
from format_cases import (
    export_cli,
    infer_records,
    leftovers,
    perturb_weights,
    unknown_operator_onnx,
    with_overrides,
    write_images,
)
from hidden_packages import hide_packages

from oars.export.errors import ExportCheckError, ExportError
from oars.export.formats import FORMATS, FormatJob
from oars.export.formats.openvino import OPENVINO, float_kept_ops
from oars.pipelines.export import export_model
from oars_deploy.deploy_config import read_deploy_yaml

pytest.importorskip("openvino", reason="the edge extra (pip install -e '.[edge]') is not installed")

DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
LINE = re.compile(r"^openvino (FP32|FP16|INT8) vs ONNX Runtime: max abs diff (\S+) \(agreement (\d\.\d{3})\)$", re.M)


@pytest.fixture(scope="module")
def calib_dir(tmp_path_factory) -> str:
    return write_images(str(tmp_path_factory.mktemp("calib")))


def test_cli_unet_fp32_parity_printed_stored_and_infer_matches(demo_case, tmp_path, monkeypatch, capsys):
    cfg, ckpt = demo_case
    out = export_cli(monkeypatch, cfg, ckpt, str(tmp_path), "--format", "openvino")
    text = capsys.readouterr().out
    match = LINE.search(text)
    assert match and match.group(1) == "FP32" and match.group(3) == "1.000", text
    assert "wrote out/model.xml" in text and "wrote out/model.bin" in text
    assert sorted(os.listdir(out)) == ["deploy.yaml", "model.bin", "model.onnx", "model.xml"]  # onnx: the reference
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert {k: deploy["model"][k] for k in ("format", "backend", "openvino", "onnx")} == {
        "format": "openvino", "backend": "openvino", "openvino": "model.xml", "onnx": "model.onnx"}
    parity = deploy["parity"]
    assert parity["line"] == match.group(0) and parity["precision"] == "fp32"
    assert parity["agreement"] == {"label": 1.0} and parity["min_agreement"] == {"label": 0.99}  # labels at FP32
    images = write_images(str(tmp_path / "images"), count=3, seed=7)
    ov_records = infer_records("out", "images", "pred_openvino", "openvino")
    ort_records = infer_records("out", "images", "pred_ort", "onnxruntime")
    assert len(ov_records) == 3 and os.listdir(images)
    assert ov_records == ort_records  # agreement 1.0 recorded: the same label maps, so the same records


def test_fp16_unet_weights_in_fp16(demo_case, tmp_path):
    cfg, ckpt = demo_case
    result = export_model(with_overrides(cfg, "export.output_op=none"), ckpt, str(tmp_path), fmt="openvino", half=True)
    parity = result["format"]["parity"]
    assert parity["precision"] == "fp16" and parity["min_agreement"] == {"logits": 0.99}
    assert 0.99 <= parity["agreement"]["logits"] < 1.0  # FP16 weights: close, not equal
    assert 'element_type="f16"' in (tmp_path / "model.xml").read_text()
    assert not (tmp_path / "model_fp16.onnx").exists()  # OpenVINO compresses from the FP32 graph itself
    assert (tmp_path / "model.bin").stat().st_size < 0.6 * (tmp_path / "model.onnx").stat().st_size


def test_int8_unet_quantized_by_nncf_first_layer_in_float(demo_case, calib_dir, tmp_path):
    cfg, ckpt = demo_case
    result = export_model(with_overrides(cfg, "export.output_op=none"), ckpt, str(tmp_path), fmt="openvino", int8=True,
                          calib_dir=calib_dir)
    parity = result["format"]["parity"]
    assert parity["precision"] == "int8" and parity["inputs"] >= 1  # compared on calibration images
    assert 0.9 <= parity["agreement"]["logits"] < 1.0
    xml = (tmp_path / "model.xml").read_text()
    assert 'type="FakeQuantize"' in xml
    import openvino as ov

    model = ov.Core().read_model(str(tmp_path / "model.xml"))
    first = [op for op in model.get_ordered_ops() if op.get_type_name() == "Convolution"][0]
    assert first.input_value(0).get_node().get_type_name() == "Parameter"  # no FakeQuantize before the first conv
    assert read_deploy_yaml(str(tmp_path / "deploy.yaml"))["parity"]["precision"] == "int8"


def test_float_kept_ops_are_the_input_layer_and_the_tail():
    import openvino as ov

    # x -> conv (reads the input) -> relu -> conv -> add bias -> sigmoid -> multiply: the first conv and the
    # sigmoid/multiply after the last conv stay in float; the last conv and its bias add are quantised together
    ops = ov.opset13
    x = ops.parameter([1, 3, 8, 8], np.float32, name="image")
    w = ops.constant(np.ones((4, 3, 1, 1), np.float32))
    c1 = ops.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1], name="conv_in")
    r = ops.relu(c1, name="relu")
    c2 = ops.convolution(r, ops.constant(np.ones((2, 4, 1, 1), np.float32)), [1, 1], [0, 0], [0, 0], [1, 1],
                         name="conv_out")
    b = ops.add(c2, ops.constant(np.ones((1, 2, 1, 1), np.float32)), name="bias")
    s = ops.sigmoid(b, name="decode_sigmoid")
    m = ops.multiply(s, ops.constant(np.float32(64.0)), name="decode_scale")
    model = ov.Model([m], [x])
    assert sorted(float_kept_ops(model)) == ["conv_in", "decode_scale", "decode_sigmoid"]


def test_forced_disagreement_fails_and_leaves_nothing(demo_case, tmp_path, monkeypatch):
    """A writer whose IR differs from the ONNX graph (one weight tensor tripled) fails the export; neither the
    format's files nor model.onnx / deploy.yaml are left, and no staging folder."""
    cfg, ckpt = demo_case
    perturb_weights(monkeypatch, OPENVINO)
    out = tmp_path / "out"
    with pytest.raises(ExportCheckError, match=r"--format openvino: the openvino FP32 model agrees with ONNX Runtime "
                                               r"FP32 on 'logits' only 0\.\d+ \(needed 0\.999; --min-agreement"):
        export_model(with_overrides(cfg, "export.output_op=none"), ckpt, str(out), fmt="openvino")
    assert leftovers(out) == []
    monkeypatch.undo()
    export_model(with_overrides(cfg, "export.output_op=none"), ckpt, str(out), fmt="openvino")  # the good case writes
    assert sorted(leftovers(out)) == ["deploy.yaml", "model.bin", "model.onnx", "model.xml"]


def test_too_high_min_agreement_fails_the_cli(demo_case, tmp_path, monkeypatch, capsys):
    """The CLI prints the one line (no traceback) and exits 2; nothing is left in the output folder."""
    cfg, ckpt = demo_case
    with pytest.raises(SystemExit) as code:
        export_cli(monkeypatch, with_overrides(cfg, "export.output_op=none"), ckpt, str(tmp_path),
                   "--format", "openvino", "--half", "--min-agreement", "1.0")
    err = capsys.readouterr().err
    assert code.value.code == 2 and "Traceback" not in err
    assert re.fullmatch(r"error: --format openvino: the openvino FP16 model agrees with ONNX Runtime FP32 on "
                        r"'logits' only 0\.99\d+ \(needed 1; --min-agreement sets the threshold\); the export was "
                        r"not written\n", err), err
    assert leftovers(tmp_path / "out") == []
    with pytest.raises(ExportError, match=r"export.min_agreement must be a number in \[0, 1\], got 2.0"):
        export_model(cfg, ckpt, str(tmp_path / "x"), fmt="openvino", min_agreement=2.0)


def test_unknown_operator_refused_naming_it(tmp_path):
    src = unknown_operator_onnx(str(tmp_path / "model.onnx"))
    job = FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path))
    with pytest.raises(ExportError) as err:
        OPENVINO.write(job)
    assert str(err.value) == ("--format openvino cannot hold operator(s) com.example:FancyOp of this graph (OpenVINO "
                              "has no conversion rule for it); export it with --format onnx (ONNX Runtime), which "
                              "runs every operator of the exported graph")


def test_missing_packages_and_unknown_format_are_one_line(demo_case, tmp_path, monkeypatch):
    cfg, ckpt = demo_case
    with pytest.raises(ExportError, match=r"^unsupported export format 'paddle-lite'; expected one of: "
                                          r"onnx\|tensorrt\|openvino\|ort\|ncnn\|mnn\|litert$"):
        export_model(cfg, ckpt, str(tmp_path), fmt="paddle-lite")
    hide_packages(monkeypatch, "nncf")
    with pytest.raises(ExportError, match=r"^--format openvino --int8 needs nncf, .*pip install"):
        export_model(cfg, ckpt, str(tmp_path), fmt="openvino", int8=True, calib_dir=str(tmp_path))
    hide_packages(monkeypatch, "openvino")
    with pytest.raises(ExportError, match=r"^--format openvino needs openvino, .*pip install"):
        export_model(cfg, ckpt, str(tmp_path), fmt="openvino")
    assert leftovers(tmp_path) == []  # refused before any work
    assert set(FORMATS) == {"openvino", "ort", "ncnn", "mnn", "litert"}


@pytest.mark.slow
def test_yolov3_fp32_parity_and_infer_matches(tmp_path):
    cfg, ckpt = shrunk_export_case(DET_CFG, str(tmp_path / "case"))
    out = str(tmp_path / "out")
    result = export_model(cfg, ckpt, out, fmt="openvino")
    parity = read_deploy_yaml(osp.join(out, "deploy.yaml"))["parity"]
    assert parity == result["format"]["parity"]
    assert set(parity["agreement"]) == {"detections_recall", "detections_precision"}  # the kind's own measure
    assert parity["min_agreement"] == {"detections_recall": 0.95, "detections_precision": 0.95}
    assert min(parity["agreement"].values()) >= 0.95
    images = write_images(str(tmp_path / "images"), count=2, seed=3)
    ov_records = infer_records(out, images, str(tmp_path / "p_ov"), "openvino")
    ort_records = infer_records(out, images, str(tmp_path / "p_ort"), "onnxruntime")
    for a, b in zip(ov_records, ort_records):
        assert len(a["detections"]) == len(b["detections"])
        for da, db in zip(a["detections"], b["detections"]):
            assert da["label"] == db["label"] and abs(da["score"] - db["score"]) < 1e-3
            np.testing.assert_allclose(da["bbox"], db["bbox"], atol=0.5)
