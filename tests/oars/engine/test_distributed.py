"""Two-process training on the CPU through torchrun + gloo, and SyncBN conversion."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from demo_utils import DEMO_CFG, ROOT, demo_overrides
from torch import nn


def test_torchrun_two_processes_gloo(demo_data, tmp_path):
    work = tmp_path / "dist"
    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
           os.path.join(ROOT, "tools/train.py"), "-c", DEMO_CFG, "--launcher", "pytorch",
           "--work-dir", str(work), "-o", *opts]
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (work / "epoch_1.pth").exists()
    log = proc.stdout + proc.stderr
    assert "world_size: 2" in log or "Distributed launcher: pytorch" in log


def test_sync_bn_conversion():
    from mmengine.model import convert_sync_batchnorm

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    converted = convert_sync_batchnorm(model, "torch")
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)


def test_prepare_config_maps_sync_bn(tmp_path, monkeypatch):
    from oars.engine.entry import load
    from oars.engine.runner import prepare_config

    cfg = load(DEMO_CFG, ["sync_bn=true"])
    single = prepare_config(cfg, work_dir=str(tmp_path))
    assert single.sync_bn is None
