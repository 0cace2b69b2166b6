"""Exact resume of an iteration-based run (IterBasedTrainLoop + InfiniteSampler) with DataLoader workers, as the
40k/80k configs train: stopped after a checkpoint and resumed, it ends with the weights of an uninterrupted run."""

from __future__ import annotations

import os

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides
from test_training import CrashAt

from oars.engine.checkpoint import load_checkpoint_file
from oars.engine.entry import load, train
from oars.engine.runner import build_runner, prepare_config


def _iter_based(demo_data, workers: int) -> list[str]:
    opts = demo_overrides(demo_data, **{
        "train_cfg": "{_delete_: true, type: IterBasedTrainLoop, max_iters: 6, val_interval: 100}",
        "train_dataloader.sampler": "{type: InfiniteSampler, shuffle: true}",
        "train_dataloader.num_workers": workers,
        "train_dataloader.persistent_workers": workers > 0,
        "param_scheduler": "[{type: LinearLR, start_factor: 0.1, by_epoch: false, begin: 0, end: 6}]",
        "default_hooks.checkpoint.by_epoch": False,
        "default_hooks.checkpoint.interval": 3,
        "default_hooks.checkpoint.save_best": "null",
        "log_processor.by_epoch": False,
        "randomness.seed": 7,
        "randomness.deterministic": True,
    })
    return [o for o in opts if not o.startswith(("train_cfg.max_epochs=", "train_cfg.val_interval="))]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_iter_based_resume_matches_uninterrupted(demo_data, tmp_path, workers):
    opts = _iter_based(demo_data, workers)
    ref_dir, cut_dir = str(tmp_path / "ref"), str(tmp_path / "cut")
    train(DEMO_CFG, opts, work_dir=ref_dir)

    runner = build_runner(prepare_config(load(DEMO_CFG, opts), work_dir=cut_dir))
    runner.register_hook(CrashAt(at_iter=4), priority="VERY_HIGH")  # after iter_3.pth, before iter_6.pth
    with pytest.raises(KeyboardInterrupt):
        runner.train()
    assert os.path.exists(os.path.join(cut_dir, "iter_3.pth"))
    assert not os.path.exists(os.path.join(cut_dir, "iter_6.pth"))
    train(DEMO_CFG, opts, work_dir=cut_dir, resume=True)

    ref = load_checkpoint_file(os.path.join(ref_dir, "iter_6.pth"))
    cut = load_checkpoint_file(os.path.join(cut_dir, "iter_6.pth"))
    for part in ("state_dict", "ema_state_dict"):
        assert ref[part].keys() == cut[part].keys()
        for k in ref[part]:
            assert torch.equal(ref[part][k], cut[part][k]), (part, k)
