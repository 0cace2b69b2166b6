"""--format ort (oars.export.formats.ort_mobile): ONNX Runtime's mobile format written from the graph deploy.yaml
runs, with required_operators.config and the mobile-usability verdict, parity-checked against ONNX Runtime FP32,
and run by ``oars-infer --backend ort`` with ONNX Runtime's records."""

from __future__ import annotations

import copy
import os
import os.path as osp
import re

import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case
from format_cases import export_cli, infer_records, unknown_operator_onnx, write_images
from tiny_exports import tiny_segmentor_dir

from oars.config import apply_overrides
from oars.export.errors import ExportError
from oars.export.formats import FormatJob
from oars.export.formats.ort_mobile import ORT_MOBILE
from oars.pipelines.export import export_model
from oars_deploy.deploy_config import read_deploy_yaml

DET_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")


@pytest.mark.slow  # ~20-30 s on a shared 2-core machine: the export, then two ONNX Runtime tools in subprocesses
def test_cli_unet_fp32_files_verdict_parity_and_infer(demo_case, tmp_path, monkeypatch, capsys):
    cfg, ckpt = demo_case
    out = export_cli(monkeypatch, cfg, ckpt, str(tmp_path), "--format", "ort")
    text = capsys.readouterr().out
    assert re.search(r"^ort FP32 vs ONNX Runtime: max abs diff 0 \(agreement 1\.000\)$", text, re.M), text
    assert re.search(r"^mobile usability: NNAPI: (YES|NO); CoreML NeuralNetwork: (YES|NO); CoreML MLProgram: "
                     r"(YES|NO)\. ", text, re.M), text
    assert sorted(os.listdir(out)) == ["deploy.yaml", "model.onnx", "model.ort", "required_operators.config"]
    ops = (tmp_path / "out" / "required_operators.config").read_text()
    assert "ai.onnx;" in ops and "Conv" in ops  # what a reduced ONNX Runtime build must include
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert {k: deploy["model"][k] for k in ("format", "backend", "ort")} == {
        "format": "ort", "backend": "onnxruntime", "ort": "model.ort"}
    assert deploy["parity"]["agreement"] == {"label": 1.0}
    write_images(str(tmp_path / "images"), count=2, seed=5)
    assert infer_records("out", "images", "p_ort", "ort") == infer_records("out", "images", "p_onnx", "onnxruntime")


@pytest.mark.slow  # ~20 s: a calibrated INT8 graph, then the converter
def test_int8_converts_the_quantized_graph(demo_case, tmp_path):
    cfg, ckpt = demo_case
    cfg = copy.deepcopy(cfg)
    apply_overrides(cfg, ["export.output_op=none"])
    calib = write_images(str(tmp_path / "calib"), count=4)
    out = tmp_path / "out"
    result = export_model(cfg, ckpt, str(out), fmt="ort", int8=True, calib_dir=calib)
    assert sorted(os.listdir(out)) == ["deploy.yaml", "model.onnx", "model.ort", "model_int8.onnx",
                                       "required_operators.config"]
    assert "QuantizeLinear" in (out / "required_operators.config").read_text()  # the Q/DQ graph was converted
    parity = result["format"]["parity"]
    assert parity["precision"] == "int8" and 0.9 <= parity["agreement"]["logits"] < 1.0


def test_writer_on_a_tiny_graph_files_and_verdict(tmp_path):
    """The writer alone (no torch export): model.ort, required_operators.config naming the staged file's
    operators without the staging path, and the usability verdict as a note."""
    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 1)
    src = osp.join(folder, "model.onnx")
    files = ORT_MOBILE.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder))
    assert files.names == ["model.ort", "required_operators.config"]
    config = open(osp.join(folder, "required_operators.config")).read()
    assert "# - model.ort\n" in config and "Conv" in config and str(tmp_path) not in config
    assert files.notes[0].startswith("mobile usability: NNAPI: ")
    assert files.notes[1] == "model.ort optimised for arm CPUs (export.ort.target_platform)"
    import onnxruntime as ort

    assert [o.name for o in ort.InferenceSession(osp.join(folder, "model.ort")).get_outputs()] == ["logits"]


def test_target_platform_reaches_the_converter(tmp_path, monkeypatch):
    """export.ort.target_platform: amd64 optimises the file for x86, where an ARM INT8 file runs slower (SSDLite INT8:
    106 ms against 60 ms)."""
    from oars.export.formats import ort_mobile

    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 1)
    src = osp.join(folder, "model.onnx")
    calls = []
    real = ort_mobile.start_tool
    monkeypatch.setattr(ort_mobile, "start_tool", lambda *a: calls.append(a) or real(*a))
    files = ORT_MOBILE.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder,
                                       settings={"target_platform": "amd64"}))
    converter = next(c for c in calls if c[0] == ort_mobile.CONVERTER)
    assert converter[converter.index("--target_platform") + 1] == "amd64"
    assert files.notes[1] == "model.ort optimised for amd64 CPUs (export.ort.target_platform)"


def test_bad_target_platform_is_one_message_before_converting(tmp_path):
    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 1)
    src = osp.join(folder, "model.onnx")
    with pytest.raises(ExportError) as err:
        ORT_MOBILE.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder,
                                   settings={"target_platform": "x86"}))
    assert str(err.value) == ("export.ort.target_platform must be one of ['arm', 'amd64'] (the CPU the model.ort is "
                              "optimised for), got 'x86'")
    assert not osp.exists(osp.join(folder, "model.ort"))


def test_failed_export_leaves_no_folder_it_made_and_keeps_the_users(demo_case, tmp_path, monkeypatch):
    """The converter fails after the ONNX graph was built: the folder the export made is gone, a folder the user had
    stays (empty, as it was)."""
    cfg, ckpt = demo_case

    def converter_fails(job):
        raise ExportError("--format ort: the converter failed")

    monkeypatch.setattr(ORT_MOBILE, "write", converter_fails)
    for out, existed in ((tmp_path / "new" / "out", False), (tmp_path / "mine", True)):
        if existed:
            out.mkdir()
        with pytest.raises(ExportError, match=r"^--format ort: the converter failed$"):
            export_model(copy.deepcopy(cfg), ckpt, str(out), fmt="ort")
        assert out.exists() == existed and (not existed or not any(out.iterdir()))


def test_bad_ort_settings_fail_before_the_model_is_built(demo_case, tmp_path, monkeypatch):
    """A bad value and a misspelled key of export.ort are one message each, before the checkpoint is loaded."""
    from oars.config import ConfigError
    from oars.pipelines import export as export_pipeline

    def not_built(*args, **kwargs):
        raise AssertionError("the model was built before the settings were checked")

    monkeypatch.setattr(export_pipeline, "init_model", not_built)
    cfg, ckpt = demo_case
    bad = copy.deepcopy(cfg)
    apply_overrides(bad, ["export.ort.target_platform=x86"])
    with pytest.raises(ExportError, match=r"^export.ort.target_platform must be one of \['arm', 'amd64'\]"):
        export_model(bad, ckpt, str(tmp_path / "x86"), fmt="ort")
    typo = copy.deepcopy(cfg)
    apply_overrides(typo, ["export.ort.target=amd64"])
    with pytest.raises(ConfigError, match=r"^export.ort has no setting\(s\) \['target'\]"):
        export_model(typo, ckpt, str(tmp_path / "typo"), fmt="ort")
    assert not (tmp_path / "x86").exists() and not (tmp_path / "typo").exists()


def test_format_settings_must_be_a_known_mapping():
    from oars.config import ConfigError
    from oars.export.spec import ExportOptions
    from oars.pipelines.export import format_settings

    def settings(extra):
        return format_settings(ORT_MOBILE, ExportOptions((1, 3, 8, 8), extra=extra))

    assert settings({}) == {}
    assert settings({"ort": {"target_platform": "amd64"}}) == {"target_platform": "amd64"}
    with pytest.raises(ConfigError, match=r"^export.ort must be a mapping of --format ort settings, got 'amd64'$"):
        settings({"ort": "amd64"})
    with pytest.raises(ConfigError, match=r"^export.ort has no setting\(s\) \['target'\]; --format ort knows "
                                          r"\['target_platform'\]$"):
        settings({"ort": {"target": "amd64"}})


def test_unknown_operator_refused_naming_it(tmp_path):
    src = unknown_operator_onnx(str(tmp_path / "model.onnx"))
    with pytest.raises(ExportError) as err:
        ORT_MOBILE.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path / "stage")))
    assert str(err.value).startswith("--format ort cannot hold operator(s) com.example:FancyOp of this graph (ONNX "
                                     "Runtime cannot load it); export it with --format onnx")


@pytest.mark.slow
def test_yolov3_fp32_parity_and_infer_matches(tmp_path):
    cfg, ckpt = shrunk_export_case(DET_CFG, str(tmp_path / "case"))
    out = str(tmp_path / "out")
    parity = export_model(cfg, ckpt, out, fmt="ort")["format"]["parity"]
    assert min(parity["agreement"].values()) >= 0.95
    images = write_images(str(tmp_path / "images"), count=2, seed=3)
    got = infer_records(out, images, str(tmp_path / "p_ort"), "ort")
    ref = infer_records(out, images, str(tmp_path / "p_onnx"), "onnxruntime")
    assert [len(r["detections"]) for r in got] == [len(r["detections"]) for r in ref]
    assert [[d["label"] for d in r["detections"]] for r in got] == [[d["label"] for d in r["detections"]] for r in ref]
