"""Pretrained backbone weights (``init.checkpoint``) are read when training starts, not when a model is built:
a trained model is evaluated, used and exported on a machine without the pretrained file."""

from __future__ import annotations

import glob
import os

import pytest
import torch
from demo_utils import DET_DEMO_CFG, det_demo_overrides

from oars.engine.checkpoint import CheckpointError, load_checkpoint_file
from oars.engine.entry import evaluate, load, train
from oars.models import DarkNet


def _opts(demo_data, init_path, **extra):
    return det_demo_overrides(demo_data, epochs=1, **{
        "model.backbone.frozen_stages": 0,  # the stem keeps the pretrained values: proof they were loaded
        "model.backbone.init": f"{{checkpoint: {init_path}}}",
        "model.data_preprocessor.batch_augments": "null",
        "custom_hooks": "[]",
        "train_dataloader.dataset.indices": 4,  # one iteration
        "val_dataloader.dataset.indices": 4,
        "test_dataloader.dataset.indices": 4,
        **extra})


@pytest.mark.slow
def test_trained_model_needs_no_pretrained_file_after_training(demo_data, tmp_path):
    torch.manual_seed(3)
    pretrained = DarkNet(base_channels=8)
    with torch.no_grad():
        for p in pretrained.parameters():
            p.uniform_(-0.5, 0.5)
    init_path = tmp_path / "darknet_pretrained.pth"
    torch.save(pretrained.state_dict(), init_path)
    opts, work = _opts(demo_data, init_path), tmp_path / "work"

    train(DET_DEMO_CFG, opts, work_dir=str(work))
    ckpt = (work / "last_checkpoint").read_text().strip()
    stem = load_checkpoint_file(ckpt)["state_dict"]["backbone.conv1.0.weight"]
    assert torch.equal(stem, pretrained.state_dict()["conv1.0.weight"])  # loaded at train start

    os.remove(init_path)  # another machine: the pretrained file is not there
    metrics = evaluate(DET_DEMO_CFG, ckpt, opts, work_dir=str(tmp_path / "eval"))
    assert "coco/bbox_mAP" in metrics["metrics"]

    from oars.inference import batched_predict, build_test_pipeline
    from oars.pipelines.model import init_model

    cfg = load(DET_DEMO_CFG, opts)
    model = init_model(cfg, ckpt)
    images = sorted(glob.glob(os.path.join(demo_data, "images/val/*.png")))[:2]
    results = list(batched_predict(model, build_test_pipeline(cfg, drop=("LoadAnnotations",)), images))
    assert len(results) == 2

    from oars.pipelines.export import export_model

    out = export_model(cfg, ckpt, str(tmp_path / "export"))
    assert os.path.isfile(out["onnx"]) and os.path.isfile(out["deploy"])
    assert not [f for f in os.listdir(tmp_path / "export") if f.startswith(".oars-tmp-")]


def test_missing_pretrained_file_names_the_key_and_path(demo_data, tmp_path):
    missing = tmp_path / "nowhere" / "darknet53.pth"
    with pytest.raises(CheckpointError) as err:
        train(DET_DEMO_CFG, _opts(demo_data, missing), work_dir=str(tmp_path / "work"))
    msg = str(err.value)
    assert "model.backbone.init.checkpoint" in msg and str(missing) in msg and "not found" in msg
