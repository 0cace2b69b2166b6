"""--format mnn (oars.export.formats.mnn): model.mnn written by MNN's native converter from the exported ONNX graph at
FP32, FP16 weights and 8-bit weights, parity-checked against ONNX Runtime FP32 (printed, kept in deploy.yaml,
failing the export below the threshold with nothing left behind) and run by ``oars-infer --backend mnn`` with the
records ONNX Runtime gives; the converter runs without MNN's Python wrapper, which pip-installs a logging SDK and
uploads usage logs."""

from __future__ import annotations

import os
import os.path as osp
import re
import stat

import numpy as np
import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case
from format_cases import export_cli, infer_records, leftovers, unknown_operator_onnx, with_overrides, write_images
from hidden_packages import hide_packages
from tiny_exports import tiny_segmentor_dir

from oars.export.errors import ExportCheckError, ExportError
from oars.export.formats import FORMATS, FormatJob
from oars.export.formats.mnn import MNN_FORMAT
from oars.pipelines.export import export_model
from oars_deploy.deploy_config import read_deploy_yaml

pytest.importorskip("MNN", reason="the edge extra (pip install -e '.[edge]': MNN) is not installed")

DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
LINE = re.compile(r"^mnn (FP32|FP16|INT8) vs ONNX Runtime: max abs diff (\S+) \(agreement (\d\.\d{3})\)$", re.M)


def test_cli_unet_fp32_with_argmax_parity_printed_stored_and_infer_matches(demo_case, tmp_path, monkeypatch, capsys):
    """The U-Net's default graph (ArgMax at the end, which ncnn refuses) converts; labels agree exactly."""
    cfg, ckpt = demo_case
    out = export_cli(monkeypatch, cfg, ckpt, str(tmp_path), "--format", "mnn")
    text = capsys.readouterr().out
    match = LINE.search(text)
    assert match and match.group(1) == "FP32" and match.group(3) == "1.000", text
    assert "wrote out/model.mnn" in text and "The device supports" not in text
    assert sorted(os.listdir(out)) == ["deploy.yaml", "model.mnn", "model.onnx"]
    assert not [f for f in os.listdir(tmp_path) if "convert_external" in f]  # nothing left in the user's folder
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert {k: deploy["model"][k] for k in ("format", "backend", "mnn", "onnx")} == {
        "format": "mnn", "backend": "mnn", "mnn": "model.mnn", "onnx": "model.onnx"}
    assert deploy["parity"]["line"] == match.group(0)
    assert deploy["parity"]["agreement"] == {"label": 1.0} and deploy["parity"]["min_agreement"] == {"label": 0.99}
    write_images(str(tmp_path / "images"), count=3, seed=7)
    mnn_records = infer_records("out", "images", "pred_mnn", "mnn")
    ort_records = infer_records("out", "images", "pred_ort", "onnxruntime")
    assert len(mnn_records) == 3 and mnn_records == ort_records


@pytest.mark.slow  # two exports and a calibration read (~25 s on a shared 2-core machine)
def test_fp16_and_8bit_weights(demo_case, tmp_path):
    cfg, ckpt = demo_case
    cfg = with_overrides(cfg, "export.output_op=none")
    fp16 = export_model(cfg, ckpt, str(tmp_path / "h"), fmt="mnn", half=True)["format"]["parity"]
    assert fp16["precision"] == "fp16" and fp16["min_agreement"] == {"logits": 0.99}
    assert 0.99 <= fp16["agreement"]["logits"] < 1.0  # FP16 weights: close, not equal
    calib = write_images(str(tmp_path / "calib"), count=4)
    int8 = export_model(cfg, ckpt, str(tmp_path / "q"), fmt="mnn", int8=True, calib_dir=calib)["format"]["parity"]
    assert int8["precision"] == "int8" and int8["inputs"] == 4 and int8["min_agreement"] == {"logits": 0.9}
    assert 0.9 <= int8["agreement"]["logits"] < 1.0
    for folder in ("h", "q"):
        assert sorted(os.listdir(tmp_path / folder)) == ["deploy.yaml", "model.mnn", "model.onnx"]  # no reduced ONNX
    size = {f: (tmp_path / f / "model.mnn").stat().st_size for f in ("h", "q")}
    onnx_size = (tmp_path / "q" / "model.onnx").stat().st_size
    assert size["h"] < 0.6 * onnx_size and size["q"] < 0.4 * onnx_size  # FP16: half; int8 weights: about a quarter


def test_writer_runs_no_pip_and_names_an_unknown_operator(tmp_path, monkeypatch):
    """A ``pip`` first on PATH records being run: MNN's Python wrapper would run it (``pip install -U
    aliyun-log-python-sdk``) when that SDK is missing; the writer runs the native converter only."""
    marker = tmp_path / "pip-ran"
    fake = tmp_path / "bin" / "pip"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 1)
    src = osp.join(folder, "model.onnx")
    files = MNN_FORMAT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder))
    assert files.names == ["model.mnn"] and osp.getsize(osp.join(folder, "model.mnn")) > 0
    assert not marker.exists()
    src = unknown_operator_onnx(str(tmp_path / "fancy.onnx"))
    (tmp_path / "stage").mkdir()
    with pytest.raises(ExportError) as err:
        MNN_FORMAT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path / "stage")))
    assert str(err.value) == ("--format mnn cannot hold operator(s) com.example:FancyOp of this graph (MNN's "
                              "converter has no rule for them); export it with --format onnx (ONNX Runtime), which "
                              "holds them")
    assert os.listdir(tmp_path / "stage") == []


def test_converter_refusal_is_read_from_its_output(tmp_path, monkeypatch):
    """An operator the converter itself reports (``These Op Not Support: ONNX::X``) is one message naming it."""
    import subprocess

    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 1)
    src = osp.join(folder, "model.onnx")
    said = "Start to Optimize the MNN Net...\n[13:17:15] :220: These Op Not Support: ONNX::Einsum \nConverted Failed!\n"
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: subprocess.CompletedProcess(args, 0, said, ""))
    with pytest.raises(ExportError, match=r"^--format mnn cannot hold operator\(s\) Einsum of this graph \(MNN's "
                                          r"converter has no rule for them\); export it with --format onnx \(ONNX "
                                          r"Runtime\), ort, openvino or ncnn, which hold them$"):
        MNN_FORMAT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder))
    said = "Start to Convert Other Model Format To MNN Model...\nError: the file is broken\n"
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: subprocess.CompletedProcess(args, 0, said, ""))
    with pytest.raises(ExportError, match=r"^--format mnn: MNN's converter failed on model.onnx \(exit 0\): Start "
                                          r"to Convert .* \| Error: the file is broken$"):
        MNN_FORMAT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder))


def test_too_high_min_agreement_fails_and_missing_package_is_one_line(demo_case, tmp_path, monkeypatch):
    cfg, ckpt = demo_case
    assert "mnn" in FORMATS
    with pytest.raises(ExportCheckError, match=r"^--format mnn: the mnn FP16 model agrees with ONNX Runtime FP32 on "
                                               r"'logits' only 0\.99\d+ \(needed 1; --min-agreement sets the "
                                               r"threshold\); the export was not written$"):
        export_model(with_overrides(cfg, "export.output_op=none"), ckpt, str(tmp_path / "out"), fmt="mnn", half=True,
                     min_agreement=1.0)
    assert leftovers(tmp_path / "out") == []
    hide_packages(monkeypatch, "MNN")
    with pytest.raises(ExportError, match=r"^--format mnn needs MNN, from the 'edge' extra: pip install -e "
                                          r"'\.\[edge\]'$"):
        export_model(cfg, ckpt, str(tmp_path / "x"), fmt="mnn")
    assert leftovers(tmp_path / "x") == []  # refused before any work


@pytest.mark.slow
def test_yolov3_with_nms_in_the_graph_parity_and_infer_matches(tmp_path):
    """MNN holds YOLOv3's in-graph NMS and TopK (ncnn refuses them): the records match ONNX Runtime's."""
    cfg, ckpt = shrunk_export_case(DET_CFG, str(tmp_path / "case"))
    out = str(tmp_path / "out")
    result = export_model(cfg, ckpt, out, fmt="mnn")
    parity = read_deploy_yaml(osp.join(out, "deploy.yaml"))["parity"]
    assert parity == result["format"]["parity"]
    assert parity["min_agreement"] == {"detections_recall": 0.95, "detections_precision": 0.95}
    assert min(parity["agreement"].values()) >= 0.95
    images = write_images(str(tmp_path / "images"), count=2, seed=3)
    got = infer_records(out, images, str(tmp_path / "p_mnn"), "mnn")
    ref = infer_records(out, images, str(tmp_path / "p_ort"), "onnxruntime")
    for a, b in zip(got, ref):
        assert len(a["detections"]) == len(b["detections"])
        for da, db in zip(a["detections"], b["detections"]):
            assert da["label"] == db["label"] and abs(da["score"] - db["score"]) < 1e-3
            np.testing.assert_allclose(da["bbox"], db["bbox"], atol=0.5)
