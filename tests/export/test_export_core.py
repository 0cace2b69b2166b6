"""The export core: deploy.yaml round trip and validation, preprocessing derived from the config, clear errors,
dynamic batch, and a self-check that really fails on a wrong graph."""

from __future__ import annotations

import copy
import os
import runpy
import sys

import cv2
import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml
from demo_utils import DEMO_CFG, ROOT

from oars.config import apply_overrides, load_config
from oars.engine.checkpoint import CheckpointError
from oars.export import ExportCheckError, ExportError, preprocess_steps, read_deploy_yaml
from oars.export.check import sample_inputs, synthetic_image
from oars.export.deploy_config import write_deploy_yaml
from oars.pipelines.export import export_model
from oars_deploy.errors import DeployError
from oars_deploy.preprocess import preprocess

DEMO_STEPS = [
    {"type": "Resize", "size": [64, 64], "keep_ratio": True, "interpolation": "linear"},
    {"type": "Normalize", "mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375], "to_rgb": True},
    {"type": "Pad", "size": [64, 64], "value": 0.0, "size_divisor": 8},
    {"type": "Permute"},
]


def _deploy() -> dict:
    return {
        "version": 1,
        "model": {"name": "EncoderDecoder", "task": "segmentation", "config": "x.yaml", "checkpoint": "x.pth",
                  "onnx": "model.onnx"},
        "labels": ["background", "circle"],
        "palette": [[0, 0, 0], [230, 25, 75]],
        "input": {"name": "image", "shape": [-1, 3, 64, 64], "dynamic_axes": {0: "batch"}, "dtype": "float32",
                  "layout": "NCHW", "color": "BGR"},
        "preprocess": copy.deepcopy(DEMO_STEPS),
        "outputs": [{"name": "label", "shape": [-1, 64, 64], "dtype": "int64", "meaning": "class ids"}],
        "postprocess": {"type": "segmentation", "output_op": "argmax", "resize_to_original": "nearest"},
    }


# ----------------------------------------------------------------------------- deploy.yaml
def test_deploy_yaml_round_trip(tmp_path):
    path = str(tmp_path / "deploy.yaml")
    write_deploy_yaml(path, _deploy())
    assert read_deploy_yaml(path) == {**_deploy(), "predictor": "semantic_labels"}  # the plug-in's name added
    assert [p.name for p in tmp_path.iterdir()] == ["deploy.yaml"]  # no temp file left behind


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("labels"), "missing key 'labels'"),
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d["model"].pop("onnx"), "model.onnx"),
    (lambda d: d["input"].update(shape=[3, 64, 64]), "input.shape"),
    (lambda d: d["preprocess"].append({"type": "Crop"}), "preprocess[4].type"),
    (lambda d: d["preprocess"][1].pop("std"), "preprocess[1] (Normalize).std"),
    (lambda d: d["outputs"][0].pop("dtype"), "outputs[0].dtype"),
    (lambda d: d.update(palette=[[0, 0, 0]]), "palette"),
])
def test_deploy_yaml_validation_names_file_and_key(tmp_path, edit, message):
    data = _deploy()
    edit(data)
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DeployError) as err:
        read_deploy_yaml(str(path))
    assert str(path) in str(err.value) and message in str(err.value)
    with pytest.raises(DeployError):
        write_deploy_yaml(str(tmp_path / "other.yaml"), data)
    assert not (tmp_path / "other.yaml").exists()


def test_missing_deploy_yaml(tmp_path):
    with pytest.raises(DeployError, match="deploy file not found"):
        read_deploy_yaml(str(tmp_path / "nope.yaml"))


# ----------------------------------------------------------------------------- preprocessing
def test_preprocess_steps_of_the_demo_config():
    assert preprocess_steps(load_config(DEMO_CFG)) == DEMO_STEPS


def test_preprocess_steps_of_yolov3():
    cfg = load_config(os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml"))
    steps = preprocess_steps(cfg)
    assert steps[0] == {"type": "Resize", "size": [128, 128], "keep_ratio": False, "interpolation": "linear"}
    assert steps[1] == {"type": "Normalize", "mean": [0.0, 0.0, 0.0], "std": [255.0, 255.0, 255.0], "to_rgb": True}
    assert steps[2]["size"] == [128, 128]


def test_preprocess_reproduces_pipeline_for_other_aspect_ratios(demo_case):
    """A keep_ratio Resize + Pad in deploy.yaml gives the pipeline's tensor wherever the pipeline output fits."""
    cfg, ckpt = demo_case
    from oars.inference import build_test_pipeline
    from oars.pipelines.model import init_model

    model = init_model(cfg, ckpt)
    steps = preprocess_steps(cfg, model.data_preprocessor)
    img = synthetic_image(64, 48, seed=3)  # W < H: resized to 48x64 then padded
    ours = preprocess([img], steps)[0]
    assert ours.shape == (1, 3, 64, 64)
    pipe = build_test_pipeline(cfg, drop=["LoadSegAnnotations"])
    path = os.path.join(os.path.dirname(ckpt), "tall.png")
    cv2.imwrite(path, img)
    with torch.no_grad():
        ref = model.data_preprocessor({"inputs": [pipe({"img_path": path})["inputs"]]})["inputs"].numpy()
    assert ref.shape == (1, 3, 64, 48)
    np.testing.assert_allclose(ours[..., :48], ref, atol=1e-6, rtol=0)
    assert (ours[..., 48:] == 0).all()
    # The batch path of the self-check agrees as well.
    _, _, diff = sample_inputs(cfg, model, steps, 2, (64, 64))
    assert diff <= 1e-6


def test_unsupported_pipeline_step_is_named():
    cfg = load_config(DEMO_CFG, ["test_dataloader.dataset.pipeline.1={type: RandomFlip, prob: 1.0}"])
    with pytest.raises(ExportError, match=r"test pipeline step 1 \(RandomFlip\) cannot be expressed"):
        preprocess_steps(cfg)


def test_pipeline_that_cannot_give_the_export_size_says_what_to_set():
    cfg = load_config(DEMO_CFG, ["export.input_shape=[1,3,128,64]"])
    with pytest.raises(ExportError, match=r"Resize.*Set export.input_shape to \[B, 3, 64, 32\]"):
        preprocess_steps(cfg)
    cfg = load_config(DEMO_CFG, ["export.input_shape=[1,3,60,60]", "test_dataloader.dataset.pipeline.1.scale=60"])
    with pytest.raises(ExportError, match=r"data_preprocessor pads.*to 64x64"):
        preprocess_steps(cfg)


# ----------------------------------------------------------------------------- clear errors
def test_missing_checkpoint_fails_first(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint file not found"):
        export_model(DEMO_CFG, str(tmp_path / "nope.pth"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_config_without_export_section(demo_case, tmp_path):
    cfg, ckpt = demo_case
    cfg = copy.deepcopy(cfg)
    apply_overrides(cfg, ["export=null"])
    with pytest.raises(ExportError, match=r"no `export` section.*input_shape: \[1, 3, 512, 512\]") as err:
        export_model(cfg, ckpt, str(tmp_path))
    assert os.path.basename(DEMO_CFG) in str(err.value)


def test_unsupported_format(demo_case, tmp_path):
    cfg, ckpt = demo_case
    with pytest.raises(ExportError, match=r"unsupported export format 'tflite'.*onnx\|tensorrt"):
        export_model(cfg, ckpt, str(tmp_path), fmt="tflite")


def test_task_without_export_module(demo_case, tmp_path):
    cfg, ckpt = demo_case
    cfg = copy.deepcopy(cfg)
    cfg.default_scope = "nosuchtask"
    with pytest.raises(ExportError, match=r"default_scope 'nosuchtask' has no export support \(expected nosuchtask/"):
        export_model(cfg, ckpt, str(tmp_path))


def test_tensorrt_without_the_package_is_a_clear_error(demo_case, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorrt" else real(name, *a))
    cfg, ckpt = demo_case
    with pytest.raises(ExportError, match="needs the `tensorrt` Python package"):
        export_model(cfg, ckpt, str(tmp_path), fmt="tensorrt")
    assert list(tmp_path.iterdir()) == []  # before any work


# ----------------------------------------------------------------------------- export + self-check
def test_dynamic_batch_export_runs_at_batch_3(demo_case, tmp_path):
    cfg, ckpt = demo_case
    result = export_model(cfg, ckpt, str(tmp_path), dynamic=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy.yaml", "model.onnx"]
    assert result["check"]["dynamic_batch"]["batch"] == 3
    deploy = read_deploy_yaml(result["deploy"])
    assert deploy["input"]["shape"] == [-1, 3, 64, 64] and deploy["input"]["dynamic_axes"] == {0: "batch"}
    assert deploy["labels"] == ["class0", "class1", "class2", "class3"]
    assert deploy["outputs"][0]["name"] == "label" and deploy["postprocess"]["resize_to_original"] == "nearest"
    session = ort.InferenceSession(result["onnx"], providers=["CPUExecutionProvider"])
    batch = np.concatenate([preprocess([synthetic_image(96, 96, s)], deploy["preprocess"])[0] for s in range(3)])
    (label,) = session.run(None, {"image": batch})
    assert label.shape == (3, 64, 64) and label.dtype == np.int64


def test_softmax_output_and_cli(demo_case, tmp_path, monkeypatch, capsys):
    """tools/export.py end to end (in-process): -o takes the folder; the segmentation task's own --output-op flag
    (Exporter.export_arguments) sets export.output_op; prints files and diffs."""
    cfg, ckpt = demo_case
    cfg_path = str(tmp_path / "cfg.yaml")
    from oars.config import dump_config

    dump_config(cfg, cfg_path)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["export.py", "-c", cfg_path, "-w", ckpt, "--format", "onnx",
                                      "-o", str(out), "--output-op", "softmax"])
    runpy.run_path(os.path.join(ROOT, "tools/export.py"), run_name="__main__")
    text = capsys.readouterr().out
    assert f"wrote {out / 'model.onnx'}" in text and "prob: max abs diff" in text
    deploy = read_deploy_yaml(str(out / "deploy.yaml"))
    assert deploy["outputs"][0]["name"] == "prob" and deploy["outputs"][0]["shape"] == [1, 4, 64, 64]
    monkeypatch.setattr(sys, "argv", ["export.py", "-c", cfg_path, "-w", ckpt, "--format", "tflite"])
    with pytest.raises(SystemExit) as err:
        runpy.run_path(os.path.join(ROOT, "tools/export.py"), run_name="__main__")
    assert err.value.code == 2 and "onnx|tensorrt" in capsys.readouterr().err


def test_self_check_catches_a_wrong_graph(demo_case, tmp_path, monkeypatch):
    """A graph that differs from eager PyTorch only when exported must fail the export, and leave no files."""
    import segmentation.export as seg_export

    real = seg_export.SegmentorExport.logits

    def noisy(self, image):
        out = real(self, image)
        return out + 0.01 if torch.compiler.is_exporting() else out

    monkeypatch.setattr(seg_export.SegmentorExport, "logits", noisy)
    cfg, ckpt = demo_case
    cfg = copy.deepcopy(cfg)
    apply_overrides(cfg, ["export.output_op=none"])
    with pytest.raises(ExportCheckError, match=r"output 'logits': ONNX Runtime differs from PyTorch by 0.01.*"
                                               r"tolerance"):
        export_model(cfg, ckpt, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_deploy_yaml_reader_needs_no_torch(tmp_path):
    """The Python predictor reads deploy.yaml (oars_deploy) without torch installed."""
    import subprocess

    path = str(tmp_path / "deploy.yaml")
    write_deploy_yaml(path, _deploy())
    code = ("import sys; sys.modules['torch'] = None\n"
            "from oars_deploy.deploy_config import read_deploy_yaml\n"
            "from oars_deploy.preprocess import preprocess\n"
            f"print(read_deploy_yaml({path!r})['labels'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "background" in out.stdout
