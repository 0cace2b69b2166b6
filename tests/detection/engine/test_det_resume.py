"""Exact resume for detection with every stateful piece of YOLO-style training at once: Mosaic (through
MultiImageMixDataset, drawing its partner images in the DataLoader workers), BatchRandomResize (a size drawn per
batch in the main process, its counter a model buffer) and EMA. A run killed inside epoch 3 and resumed ends
with the weights (and EMA weights) of an uninterrupted run."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from demo_utils import DET_DEMO_CFG, det_demo_overrides
from training_hooks import CrashAt

from oars.engine.checkpoint import load_checkpoint_file
from oars.engine.entry import load
from oars.engine.runner import build_runner, check_dataset_agreement, prepare_config
from oars.errors import OarsError


def _config(demo_data: str):
    opts = det_demo_overrides(demo_data, epochs=3, **{
        "train_dataloader.num_workers": 2,
        "train_dataloader.persistent_workers": True,  # turned off by the engine under deterministic
        "randomness.seed": 5,
        "randomness.deterministic": True,
        "default_hooks.checkpoint.interval": 1,
        "default_hooks.checkpoint.save_best": "null",
        "train_cfg.val_interval": 10,
        "model.data_preprocessor.batch_augments": "[{type: BatchRandomResize, sizes: [32, 64, 96], interval: 1}]",
    })
    cfg = load(DET_DEMO_CFG, opts)
    inner = copy.deepcopy(cfg.train_dataloader.dataset)
    inner.pipeline = [{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations", "with_bbox": True}]
    cfg.train_dataloader.dataset = {
        "type": "MultiImageMixDataset",
        "dataset": inner,
        "pipeline": [
            {"type": "Mosaic", "img_scale": [32, 32], "pad_val": 114},
            {"type": "RandomFlip", "prob": 0.5},
            {"type": "Resize", "scale": [64, 64], "keep_ratio": False},
            {"type": "FilterAnnotations", "min_gt_bbox_wh": [1, 1]},
            {"type": "PackDetInputs"},
        ],
    }
    assert any(h["type"] == "EMAHook" for h in cfg.custom_hooks)
    return cfg


def _train(cfg, work_dir: str, resume: bool = False, crash_at: int | None = None):
    runner = build_runner(prepare_config(cfg, work_dir=work_dir, resume=resume))
    if crash_at is not None:
        runner.register_hook(CrashAt(crash_at), priority="VERY_HIGH")
    runner.train()
    return runner


@pytest.mark.slow
def test_mosaic_batch_resize_ema_resume_matches_uninterrupted(demo_data, tmp_path):
    cfg = _config(demo_data)
    ref_dir, cut_dir = str(tmp_path / "ref"), str(tmp_path / "cut")
    _train(cfg, ref_dir)
    with pytest.raises(KeyboardInterrupt):
        _train(cfg, cut_dir, crash_at=9)  # 16 images, batch 4: 4 iterations per epoch, killed inside epoch 3
    assert not os.path.exists(os.path.join(cut_dir, "epoch_3.pth"))
    _train(cfg, cut_dir, resume=True)

    ref = load_checkpoint_file(os.path.join(ref_dir, "epoch_3.pth"))
    cut = load_checkpoint_file(os.path.join(cut_dir, "epoch_3.pth"))
    # the training model's batch counter travelled with the checkpoint (EMAHook keeps the training weights in
    # ema_state_dict; state_dict holds the averaged model, whose integer buffers EMA copies only once)
    assert int(ref["ema_state_dict"]["module.data_preprocessor.batch_augments.0.state"][0]) == 12
    for part in ("state_dict", "ema_state_dict"):
        assert ref[part].keys() == cut[part].keys()
        for k in ref[part]:
            assert torch.equal(ref[part][k], cut[part][k]), (part, k)


def test_class_check_looks_inside_multi_image_mix_dataset(demo_data):
    """The build-time class check passes ``lazy_init`` to the wrapped dataset (the wrapper takes none: before,
    any MultiImageMixDataset config failed to build with a TypeError)."""
    cfg = _config(demo_data)
    check_dataset_agreement(cfg)
    cfg.model.num_classes = 5
    with pytest.raises(OarsError, match=r"train_dataloader.dataset \(MultiImageMixDataset\) has 3 classes"):
        check_dataset_agreement(cfg)
