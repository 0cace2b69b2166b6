"""--format ncnn (oars.export.formats.ncnn): ncnn's param/bin written by pnnx from the exported ONNX graph at FP32 and
FP16, parity-checked against ONNX Runtime FP32 on the self-check inputs (printed, kept in deploy.yaml, failing the
export below the threshold with nothing left behind) and run by ``oars-infer --backend ncnn`` with the records
ONNX Runtime gives; a graph with an operator ncnn has no layer for (NMS, TopK, ArgMax, comparisons) is refused
before converting, naming the operators and the formats that hold them."""

from __future__ import annotations

import os
import os.path as osp
import re

import numpy as np
import onnx
import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case
from format_cases import (
    export_cli,
    image_graph,
    infer_records,
    leftovers,
    nms_onnx,
    perturb_weights,
    unknown_operator_onnx,
    with_overrides,
    write_images,
)
from hidden_packages import hide_packages
from onnx import TensorProto, helper, numpy_helper

from oars.export.errors import ExportCheckError, ExportError
from oars.export.formats import FORMATS, FormatJob
from oars.export.formats.ncnn import NCNN, graph_signature, rename_blobs
from oars.export.formats.operators import formats_holding, lacking_operators
from oars.pipelines.export import export_model
from oars_deploy.deploy_config import read_deploy_yaml

pytest.importorskip("pnnx", reason="the edge extra (pip install -e '.[edge]': pnnx) is not installed")
pytest.importorskip("ncnn", reason="the edge extra (pip install -e '.[edge]': ncnn) is not installed")

DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
LINE = re.compile(r"^ncnn (FP32|FP16) vs ONNX Runtime: max abs diff (\S+) \(agreement (\d\.\d{3})\)$", re.M)
FILES = ["deploy.yaml", "model.ncnn.bin", "model.ncnn.param", "model.onnx"]


def test_cli_unet_fp32_parity_printed_stored_and_infer_matches(demo_case, tmp_path, monkeypatch, capsys):
    cfg, ckpt = demo_case
    out = export_cli(monkeypatch, with_overrides(cfg, "export.output_op=none"), ckpt, str(tmp_path), "--format", "ncnn")
    text = capsys.readouterr().out
    match = LINE.search(text)
    assert match and match.group(1) == "FP32" and match.group(3) == "1.000", text
    assert "wrote out/model.ncnn.param" in text and "wrote out/model.ncnn.bin" in text
    assert sorted(os.listdir(out)) == FILES  # pnnx's side files (IR, scripts, simplified graph) are not left
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert {k: deploy["model"][k] for k in ("format", "backend", "ncnn", "onnx")} == {
        "format": "ncnn", "backend": "ncnn", "ncnn": "model.ncnn.param", "onnx": "model.onnx"}
    parity = deploy["parity"]
    assert parity["line"] == match.group(0) and parity["precision"] == "fp32"
    assert parity["min_agreement"] == {"logits": 0.999} and parity["agreement"]["logits"] >= 0.999
    assert float(match.group(2)) < 1e-4
    param = (tmp_path / "out" / "model.ncnn.param").read_text()
    assert " image " in param and param.rstrip().split()[-1] != "out0"  # the graph's names, not pnnx's in0/out0
    assert re.search(r" logits( |$)", param, re.M)
    write_images(str(tmp_path / "images"), count=3, seed=7)
    ncnn_records = infer_records("out", "images", "pred_ncnn", "ncnn")
    ort_records = infer_records("out", "images", "pred_ort", "onnxruntime")
    assert len(ncnn_records) == 3 and ncnn_records == ort_records


def test_fp16_weights_and_int8_refused(demo_case, tmp_path):
    cfg, ckpt = demo_case
    cfg = with_overrides(cfg, "export.output_op=none")
    result = export_model(cfg, ckpt, str(tmp_path / "h"), fmt="ncnn", half=True)
    parity = result["format"]["parity"]
    assert parity["precision"] == "fp16" and parity["min_agreement"] == {"logits": 0.99}
    assert 0.99 <= parity["agreement"]["logits"] < 1.0  # FP16 weights: close, not equal
    assert not (tmp_path / "h" / "model_fp16.onnx").exists()  # pnnx stores FP16 weights from the FP32 graph
    assert (tmp_path / "h" / "model.ncnn.bin").stat().st_size < 0.6 * (tmp_path / "h" / "model.onnx").stat().st_size
    with pytest.raises(ExportError, match=r"^--format ncnn --int8 is not supported: ncnn's INT8 models come from its "
                                          r"ncnn2table and ncnn2int8 tools, which the ncnn and pnnx wheels do not "
                                          r"ship; use --format ncnn --half"):
        export_model(cfg, ckpt, str(tmp_path / "i"), fmt="ncnn", int8=True, calib_dir=str(tmp_path))
    assert leftovers(tmp_path / "i") == []  # refused before any work


def test_argmax_graph_refused_before_converting(demo_case, tmp_path, monkeypatch):
    """The U-Net's default graph ends in ArgMax, which ncnn's wheel cannot run: one message, nothing written,
    and pnnx never started."""
    cfg, ckpt = demo_case
    monkeypatch.setattr("subprocess.run", lambda *a, **k: pytest.fail("pnnx ran on a refused graph"))
    out = tmp_path / "out"
    with pytest.raises(ExportError) as err:
        export_model(cfg, ckpt, str(out), fmt="ncnn")
    assert str(err.value) == ("--format ncnn cannot hold operator(s) ArgMax of this graph (pnnx writes no ncnn layer "
                              "for them); export it with --format onnx (ONNX Runtime), ort, openvino or mnn, which "
                              "hold them")
    assert leftovers(out) == []


def test_nms_graph_refused_naming_it_and_the_formats_that_hold_it(tmp_path):
    src = nms_onnx(str(tmp_path / "model.onnx"))
    with pytest.raises(ExportError) as err:
        NCNN.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path)))
    assert str(err.value) == (
        "--format ncnn cannot hold operator(s) NonMaxSuppression of this graph (pnnx writes no ncnn layer for them); "
        "export it with --format onnx (ONNX Runtime), ort, openvino or mnn, which hold them; or export the graph "
        "without NonMaxSuppression, if the model's export can leave them to the runtime (e.g. "
        "export.postprocess=raw: the graph ends at the raw head outputs, the runtime decodes them and runs NMS)")
    assert sorted(os.listdir(tmp_path)) == ["model.onnx"]
    src = unknown_operator_onnx(str(tmp_path / "fancy.onnx"))
    with pytest.raises(ExportError, match=r"^--format ncnn cannot hold operator\(s\) com.example:FancyOp of this "
                                          r"graph \(pnnx writes no ncnn layer for them\); export it with --format "
                                          r"onnx \(ONNX Runtime\), which holds them$"):
        NCNN.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path)))
    assert lacking_operators("ncnn", ["Conv", "TopK", "Relu"]) == ["TopK"] and lacking_operators("mnn", ["TopK"]) == []
    assert "mnn" in formats_holding(["TopK"]) and "ncnn" not in formats_holding(["TopK"])


def test_layer_pnnx_leaves_unrunnable_is_refused_after_converting(tmp_path):
    """Pad with its pads as an input tensor: pnnx writes a ``Pad`` layer ncnn has no implementation of (its layer
    is ``Padding``); the check of the written param names it instead of leaving a file ncnn cannot load."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    src = image_graph(str(tmp_path / "model.onnx"), [helper.make_node("Pad", ["image", "pads"], ["out"])], [pads])
    with pytest.raises(ExportError, match=r"^--format ncnn cannot hold operator\(s\) Pad of this graph \(pnnx left "
                                          r"them as layer types ncnn cannot run\); export it with --format onnx"):
        NCNN.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path)))
    assert sorted(os.listdir(tmp_path)) == ["model.onnx"]  # the param/bin pnnx wrote are removed
    relu = image_graph(str(tmp_path / "relu.onnx"), [helper.make_node("Relu", ["image"], ["out"])], [])
    (tmp_path / "ok").mkdir()
    files = NCNN.write(FormatJob(onnx_path=relu, fp32_onnx_path=relu, out_dir=str(tmp_path / "ok")))
    assert files.names == ["model.ncnn.param", "model.ncnn.bin"]  # the good case converts
    assert sorted(os.listdir(tmp_path / "ok")) == ["model.ncnn.bin", "model.ncnn.param"]


def test_rename_blobs_touches_blob_names_only():
    lines = ["7767517", "3 3", "Input in0 0 1 in0", "Convolution out0 1 1 in0 2 0=4 1=1", "Sigmoid sig 1 1 2 out0"]
    assert rename_blobs(lines, ["image"], ["logits"]) == [
        "7767517", "3 3", "Input in0 0 1 image", "Convolution out0 1 1 image 2 0=4 1=1", "Sigmoid sig 1 1 2 logits"]
    with pytest.raises(ExportError, match="names with spaces cannot be ncnn blob names"):
        rename_blobs(lines, ["my image"], ["logits"])


@pytest.mark.slow  # two exports (~20 s on a shared 2-core machine)
def test_forced_disagreement_fails_and_leaves_nothing(demo_case, tmp_path, monkeypatch):
    """A writer whose files differ from the ONNX graph (one weight tensor tripled) fails the export; neither the
    format's files nor model.onnx / deploy.yaml are left, and no staging folder."""
    cfg, ckpt = demo_case
    cfg = with_overrides(cfg, "export.output_op=none")
    perturb_weights(monkeypatch, NCNN)
    out = tmp_path / "out"
    with pytest.raises(ExportCheckError, match=r"--format ncnn: the ncnn FP32 model agrees with ONNX Runtime FP32 on "
                                               r"'logits' only 0\.\d+ \(needed 0\.999; --min-agreement"):
        export_model(cfg, ckpt, str(out), fmt="ncnn")
    assert leftovers(out) == []
    monkeypatch.undo()
    export_model(cfg, ckpt, str(out), fmt="ncnn")  # the good case writes
    assert sorted(leftovers(out)) == FILES


def test_missing_packages_are_one_line(demo_case, tmp_path, monkeypatch):
    cfg, ckpt = demo_case
    assert "ncnn" in FORMATS
    for module in ("pnnx", "ncnn"):
        with monkeypatch.context() as patch:
            hide_packages(patch, module)
            with pytest.raises(ExportError, match=rf"^--format ncnn needs {module}, from the 'edge' extra: pip "
                                                  r"install -e '\.\[edge\]'$"):
                export_model(cfg, ckpt, str(tmp_path), fmt="ncnn")
    assert leftovers(tmp_path) == []  # refused before any work


@pytest.mark.slow  # three YOLOv3 exports and pnnx (~60 s on a shared 2-core machine)
def test_yolov3_refused_in_graph_and_runs_raw(tmp_path, monkeypatch, capsys):
    """YOLOv3's default graph holds NMS and TopK, and its postprocess: false graph zeroes low objectness with
    Greater + Where: ncnn holds neither, and both are refused naming the operators (the first with the flag that
    helps). ``export.postprocess=raw`` ends the graph at the head's maps: ncnn agrees with ONNX Runtime on them,
    and ``oars-infer --backend ncnn`` (the runtime decoding them, then its NMS) writes ONNX Runtime's records."""
    cfg, ckpt = shrunk_export_case(DET_CFG, str(tmp_path / "case"))
    with pytest.raises(ExportError) as err:
        export_model(cfg, ckpt, str(tmp_path / "a"), fmt="ncnn")
    text = str(err.value)
    assert re.match(r"--format ncnn cannot hold operator\(s\) .*NonMaxSuppression, .*TopK", text), text
    assert "or mnn, which hold them; or export the graph without NonMaxSuppression, TopK" in text
    assert "(e.g. export.postprocess=raw: the graph ends at the raw head outputs" in text
    with pytest.raises(ExportError, match=r"^--format ncnn cannot hold operator\(s\) Greater, Where of this graph"):
        export_model(with_overrides(cfg, "export.postprocess=false"), ckpt, str(tmp_path / "b"), fmt="ncnn")
    assert leftovers(tmp_path / "a") == [] and leftovers(tmp_path / "b") == []
    out = export_cli(monkeypatch, with_overrides(cfg, "export.postprocess=raw"), ckpt, str(tmp_path), "--format",
                     "ncnn")
    match = LINE.search(capsys.readouterr().out)
    assert match and match.group(1) == "FP32" and float(match.group(3)) >= 0.999, match
    assert sorted(os.listdir(out)) == FILES
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    post = deploy["postprocess"]
    assert post["inside_graph"] == [] and post["decode"]["box_coder"]["type"] == "yolo"
    assert [o["name"] for o in deploy["outputs"]] == ["pred_0", "pred_1", "pred_2"]
    write_images(str(tmp_path / "images"), count=3, seed=7)
    ncnn_records = infer_records("out", "images", "pred_ncnn", "ncnn")
    ort_records = infer_records("out", "images", "pred_ort", "onnxruntime")
    assert len(ncnn_records) == 3 and sum(len(r["detections"]) for r in ort_records) > 0
    assert ncnn_records == ort_records


def test_clip_inputs_are_refused_before_converting(tmp_path):
    """A 5-D clip input ([N, T, C, H, W]): ncnn died with a floating-point exception running TSM's graph, so it is
    refused by name before pnnx runs; 4-D image inputs pass."""
    def graph(shape: list[int]) -> str:
        x = helper.make_tensor_value_info("clips", TensorProto.FLOAT, shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
        model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["clips"], ["y"])], "g", [x], [y]))
        path = str(tmp_path / f"g{len(shape)}.onnx")
        onnx.save(model, path)
        return path

    with pytest.raises(ExportError, match=r"^--format ncnn runs graphs of images .*input 'clips' has 5 "
                                          r"\[1, 4, 3, 32, 32\]: export this model with --format onnx"):
        graph_signature(graph([1, 4, 3, 32, 32]))
    assert graph_signature(graph([1, 3, 32, 32])) == (["clips"], ["y"], ["[1,3,32,32]f32"])
