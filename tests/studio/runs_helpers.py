"""Helpers for the Runs/Train tests: a work dir with the records a training writes (no training), the tiny demo
overrides as the Train form's "more overrides" text, and waiting for a run's status."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from demo_utils import DEMO_CFG, demo_overrides

DEMO_NAME = "segmentation/unet/unet_demo_shapes"


def fake_run(folder: Path, *, iters_done: int = 20, per_epoch: int = 10, epochs: int = 2, lr: float = 0.01,
             val: tuple[float, ...] = (0.4, 0.6), checkpoint: bool = True, age_s: float = 0.0) -> Path:
    """A work dir as ``tools/train.py`` leaves it: config.yaml, ``<stamp>/vis_data/scalars.json`` (training lines
    every iteration, a validation line per epoch), ``<stamp>/<stamp>.log`` with mmengine's progress lines, and
    ``last_checkpoint``. ``age_s`` back-dates every file (a run that stopped that long ago)."""
    stamp = folder / "20260101_000000"
    (stamp / "vis_data").mkdir(parents=True)
    (folder / "config.yaml").write_text(
        "model: {type: EncoderDecoder}\n"
        f"optim_wrapper: {{optimizer: {{type: AdamW, lr: {lr}}}}}\n"
        f"train_cfg: {{type: EpochBasedTrainLoop, max_epochs: {epochs}, val_interval: 1}}\n"
        "default_hooks:\n  checkpoint: {type: CheckpointHook, interval: 1, save_best: mIoU, rule: greater}\n"
        "default_scope: segmentation\n", encoding="utf-8")
    lines, log = [], [f"2026/01/01 00:00:00 - mmengine - INFO - training {DEMO_CFG}: EncoderDecoder"]
    for it in range(1, iters_done + 1):
        epoch = (it - 1) // per_epoch + 1
        lines.append({"lr": lr, "loss": 2.0 / it, "decode.acc_seg": it / 100, "time": 0.1, "data_time": 0.01,
                      "epoch": epoch, "iter": it, "step": it})
        left = epochs * per_epoch - it
        log.append(f"2026/01/01 00:00:00 - mmengine - INFO - Epoch(train) [{epoch}][{(it - 1) % per_epoch + 1:>2}/"
                   f"{per_epoch}]  lr: {lr:.4e}  eta: 0:00:{left:02d}  loss: {2.0 / it:.4f}")
        if it % per_epoch == 0 and epoch <= len(val):
            lines.append({"mIoU": val[epoch - 1], "aAcc": 0.9, "time": 0.05, "data_time": 0.01, "step": epoch})
    (stamp / "vis_data" / "scalars.json").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    (stamp / "20260101_000000.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    if checkpoint:
        (folder / "epoch_1.pth").write_bytes(b"x")
        (folder / "last_checkpoint").write_text(str(folder / "epoch_1.pth"), encoding="utf-8")
    if age_s:
        stamp_time = time.time() - age_s
        for path in folder.rglob("*"):
            os.utime(path, (stamp_time, stamp_time))
    return folder


def tiny_overrides(data_root: str, **extra) -> str:
    """The demo overrides that make a training take seconds, one ``key=value`` a line (the form's text box)."""
    return "\n".join(o for o in demo_overrides(data_root, **extra) if not o.startswith("train_cfg.max_epochs"))


def wait_status(client, run_id: str, states: tuple[str, ...], timeout: float = 240.0) -> dict:
    """Poll ``/api/runs`` until run ``run_id`` is in one of ``states``; returns its row (fails on timeout)."""
    deadline = time.monotonic() + timeout
    row: dict = {}
    while time.monotonic() < deadline:
        row = next((r for r in client.get("/api/runs").json()["runs"] if r["id"] == run_id), {})
        if row.get("status") in states:
            return row
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} not in {states} after {timeout} s: {row}")
