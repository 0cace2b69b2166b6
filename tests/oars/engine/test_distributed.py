"""Two-process training on the CPU through torchrun + gloo, and SyncBN conversion."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch
from demo_utils import DEMO_CFG, ROOT, demo_overrides
from torch import nn

from oars.engine.checkpoint import load_checkpoint_file


def _free_port() -> int:
    with socket.socket() as sock:  # a free port: parallel CI jobs must not collide
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(launch: list[str], work, opts: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", *launch, os.path.join(ROOT, "tools/train.py"),
           "-c", DEMO_CFG, "--launcher", "pytorch", "--work-dir", str(work), "-o", *opts]
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> str:
    try:
        out, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    assert proc.returncode == 0, out[-5000:]
    return out


def _deterministic_opts(demo_data) -> list[str]:
    return demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5, "randomness.seed": 3,
                                                  "randomness.deterministic": True})


def test_torchrun_two_processes_gloo(demo_data, tmp_path):
    work = tmp_path / "dist"
    log = _finish(_torchrun(["--nproc_per_node=2", f"--master_port={_free_port()}"], work,
                            demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5})))
    assert (work / "epoch_1.pth").exists()
    assert "on 2 processes (pytorch launcher)" in log  # the run's summary line


@pytest.mark.slow
@pytest.mark.slow
def test_channels_last_under_torchrun_is_applied_before_ddp_lays_out_its_buckets(demo_data, tmp_path):
    """Applied after DDP wrapped the model, channels-last weights left DDP's gradient buckets in the old layout
    (torch warned "Grad strides do not match bucket view strides" and copied between layouts); applied before, the
    run trains with neither."""
    log = _finish(_torchrun(["--nproc_per_node=2", f"--master_port={_free_port()}"], tmp_path / "dist",
                            [*demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5}),
                             "channels_last=true"]))
    assert log.count("channels_last: 21 4-D weights and buffers stored channels-last") >= 1
    assert "Grad strides do not match" not in log
    assert (tmp_path / "dist" / "epoch_1.pth").exists()


def test_two_nodes_match_one_node_of_two_processes(demo_data, tmp_path):
    """Two torchrun agents (one process each) meeting by c10d rendezvous train to the same weights as one
    agent running two processes: what the README's multi-node section promises."""
    opts = _deterministic_opts(demo_data)
    _finish(_torchrun(["--nproc_per_node=2", f"--master_port={_free_port()}"], tmp_path / "one", opts))
    endpoint = f"127.0.0.1:{_free_port()}"
    launch = ["--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}",
              "--rdzv_id=oars-test"]
    agents = [_torchrun(launch, tmp_path / "two", opts) for _ in range(2)]  # a shared work dir, as on NFS
    logs = [_finish(agent) for agent in agents]
    assert any("on 2 processes (pytorch launcher)" in log for log in logs)
    one = load_checkpoint_file(tmp_path / "one" / "epoch_1.pth")
    two = load_checkpoint_file(tmp_path / "two" / "epoch_1.pth")
    assert one["meta"]["iter"] == two["meta"]["iter"] == 2  # 16 images, 2 ranks x batch 4
    assert one["state_dict"].keys() == two["state_dict"].keys()
    for key, value in one["state_dict"].items():
        assert torch.equal(value, two["state_dict"][key]), key


def test_sync_bn_conversion():
    from mmengine.model import convert_sync_batchnorm

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    converted = convert_sync_batchnorm(model, "torch")
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)


def test_prepare_config_maps_sync_bn(tmp_path, monkeypatch):
    import oars.engine.resolve as resolve_mod
    import oars.engine.runner as runner_mod
    from oars.engine.entry import load

    cfg = load(DEMO_CFG, ["sync_bn=true"])
    assert runner_mod.prepare_config(cfg, work_dir=str(tmp_path)).sync_bn is None  # one process: plain BN
    monkeypatch.setattr(resolve_mod, "init_distributed", lambda launcher: True)
    dist_cfg = runner_mod.prepare_config(cfg, work_dir=str(tmp_path), launcher="pytorch")
    if torch.cuda.is_available():
        assert dist_cfg.sync_bn == "torch"  # mmengine's Runner converts every BatchNorm to SyncBatchNorm
    else:
        assert dist_cfg.sync_bn is None  # SyncBatchNorm only runs on GPU tensors
        assert dist_cfg.model_wrapper_cfg == {"type": "MMDistributedDataParallel", "device_ids": None}
        assert dist_cfg.env_cfg.dist_cfg.backend == "gloo"
