"""Two-process training on the CPU through torchrun + gloo, and SyncBN conversion."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import torch
from demo_utils import DEMO_CFG, ROOT, demo_overrides
from torch import nn


def test_torchrun_two_processes_gloo(demo_data, tmp_path):
    work = tmp_path / "dist"
    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5})
    with socket.socket() as sock:  # a free port: parallel CI jobs must not collide
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
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
    import oars.engine.runner as runner_mod
    from oars.engine.entry import load

    cfg = load(DEMO_CFG, ["sync_bn=true"])
    assert runner_mod.prepare_config(cfg, work_dir=str(tmp_path)).sync_bn is None  # one process: plain BN
    monkeypatch.setattr(runner_mod, "init_distributed", lambda launcher: True)
    dist_cfg = runner_mod.prepare_config(cfg, work_dir=str(tmp_path), launcher="pytorch")
    if torch.cuda.is_available():
        assert dist_cfg.sync_bn == "torch"  # mmengine's Runner converts every BatchNorm to SyncBatchNorm
    else:
        assert dist_cfg.sync_bn is None  # SyncBatchNorm only runs on GPU tensors
        assert dist_cfg.model_wrapper_cfg == {"type": "MMDistributedDataParallel", "device_ids": None}
        assert dist_cfg.env_cfg.dist_cfg.backend == "gloo"
