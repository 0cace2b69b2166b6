"""A tiny trained U-Net run for the studio's Evaluate and Exports tests (one epoch of the shrunk demo config on the
session's demo data, about 10 s), made once per session whichever test module asks first."""

from __future__ import annotations

from pathlib import Path

from demo_utils import DEMO_CFG, demo_overrides, run_tool

_RUNS: dict[str, Path] = {}


def tiny_trained_run(base: Path, demo_data: str) -> Path:
    """The work dir of a one-epoch demo U-Net run under ``base`` (config.yaml, epoch_1.pth, best_*.pth)."""
    key = str(base)
    if key not in _RUNS:
        work_dir = base / "tiny_unet_run"
        if not (work_dir / "epoch_1.pth").is_file():
            run_tool("train.py", "-c", DEMO_CFG, "--work-dir", str(work_dir), "-o", *demo_overrides(demo_data))
        _RUNS[key] = work_dir
    return _RUNS[key]
