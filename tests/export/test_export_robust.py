"""Export robustness: label lists shorter than the model's classes, and a self-check on a letterboxed image."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch
import yaml

from oars.export import ExportError, preprocess_steps
from oars.export.check import sample_inputs
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars_deploy.deploy_config import check_label_count, read_deploy_yaml
from oars_deploy.errors import DeployError


def _seg_deploy(labels: list[str], num_classes: int) -> dict:
    steps = [{"type": "Resize", "size": [64, 64], "keep_ratio": True, "interpolation": "linear"},
             {"type": "Normalize", "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "to_rgb": True},
             {"type": "Pad", "size": [64, 64], "value": 0.0}, {"type": "Permute"}]
    return {
        "version": 1, "model": {"name": "EncoderDecoder", "task": "segmentation", "onnx": "model.onnx"},
        "labels": labels,
        "input": {"name": "image", "shape": [1, 3, 64, 64], "dtype": "float32", "layout": "NCHW", "color": "BGR"},
        "preprocess": steps,
        "outputs": [{"name": "label", "shape": [1, 64, 64], "dtype": "int64"}],
        "postprocess": {"type": "segmentation", "output_op": "argmax", "num_classes": num_classes},
    }


def test_reading_a_deploy_yaml_with_fewer_labels_than_classes_names_file_and_counts(tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump(_seg_deploy(["background", "circle"], 4)))
    with pytest.raises(DeployError) as err:
        read_deploy_yaml(str(path))
    assert str(err.value) == (f"{path}: labels has 2 names but the model has 4 classes (postprocess.num_classes); "
                              "add the missing names (one per class, in class-id order) or re-export")
    ok = _seg_deploy(["a", "b", "c", "d"], 4)
    check_label_count(ok, "deploy.yaml")
    with pytest.raises(DeployError, match=r"deploy.yaml: labels has 4 names but the model has 5 classes \(the model"):
        check_label_count(ok, "deploy.yaml", num_classes=5)  # e.g. from the ONNX output shape


def test_export_refuses_a_label_list_shorter_than_the_model(demo_case, tmp_path):
    cfg, ckpt = demo_case
    state = torch.load(ckpt, weights_only=False)
    state["meta"]["dataset_meta"]["classes"] = ["background", "circle"]  # the model has 4 classes
    short = str(tmp_path / "short.pth")
    torch.save(state, short)
    out = tmp_path / "out"
    with pytest.raises(ExportError) as err:
        export_model(copy.deepcopy(cfg), short, str(out))
    assert ("the checkpoint's dataset_meta names 2 classes (['background', 'circle']) but the model has "
            "num_classes=4") in str(err.value)
    assert os.path.basename(cfg.filename) in str(err.value)
    assert not (out / "deploy.yaml").exists() and not (out / "model.onnx").exists()


def test_self_check_input_is_letterboxed(demo_case):
    """The self-check image has another aspect ratio than the 64x64 export input: the keep-ratio Resize makes it
    64x43 and the bottom rows are padding, in the PyTorch input and the deploy input alike."""
    cfg, ckpt = demo_case
    model = init_model(cfg, ckpt)
    steps = preprocess_steps(cfg)
    torch_in, deploy_in, diff = sample_inputs(cfg, model, steps, 2, (64, 64))
    assert tuple(torch_in.shape) == deploy_in.shape == (2, 3, 64, 64) and diff <= 1e-5
    pad_rows = deploy_in[:, :, 43:, :]
    assert np.all(pad_rows == steps[2]["value"])  # padded ...
    assert np.abs(deploy_in[:, :, :43, :]).max() > 0.5  # ... below real image content
    np.testing.assert_array_equal(torch_in[:, :, 43:].numpy(), pad_rows)
