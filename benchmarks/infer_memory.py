"""Peak memory of segmentation ``tools/infer.py`` on one large image.

A random-weight demo U-Net (the demo config, 4 classes, 64-px model input) predicts one ``--size`` x ``--size``
image; ``tools/infer.py`` runs in a child process whose peak RSS (``ru_maxrss``) is read when it exits. The same
run on a 64x64 image gives the fixed cost (Python, torch, the model), so the difference is what the image size
costs; printed in MB and in bytes per image pixel (a BGR uint8 image is 3 bytes per pixel).

    python benchmarks/infer_memory.py [--size 4000] [--extra-opts KEY=VALUE ...]

The cheapest run, to check that it works: ``--size 128``.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import subprocess
import sys
import tempfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

CONFIG = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
SHRINK = ["model.backbone.base_channels=4", "model.decode_head.channels=4"]


def make_checkpoint(folder: str, overrides: list[str]) -> str:
    """A random-weight checkpoint of the demo config with ``overrides`` (no training: memory, not accuracy)."""
    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(CONFIG, overrides)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model))
    path = os.path.join(folder, "model.pth")
    classes = ["background", "circle", "square", "triangle"]
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, path)
    return path


def peak_rss_mb(args: list[str]) -> float:
    """Run ``python args`` and return its peak RSS in MB: a wrapper process runs it as its only child and reads
    ``RUSAGE_CHILDREN`` (Linux ``ru_maxrss`` is in KiB), so neither this process nor the wrapper counts."""
    code = ("import resource, subprocess, sys; rc = subprocess.run([sys.executable, *sys.argv[1:]]).returncode; "
            "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK_KB")][-1]
    return int(line.split()[1]) / 1024


def infer_peak(size: int, folder: str, ckpt: str, overrides: list[str]) -> float:
    """Peak RSS (MB) of tools/infer.py on one random ``size`` x ``size`` image."""
    img_dir = os.path.join(folder, f"img{size}")
    os.makedirs(img_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    cv2.imwrite(os.path.join(img_dir, "big.png"), rng.integers(0, 256, (size, size, 3), dtype=np.uint8))
    out = os.path.join(folder, f"out{size}")
    return peak_rss_mb([os.path.join(ROOT, "tools/infer.py"), "-c", CONFIG, "-w", ckpt, "-i", img_dir,
                        "-o", out, *overrides])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4000)
    parser.add_argument("--extra-opts", nargs="*", default=[])
    args = parser.parse_args()
    if args.size < 1:
        parser.error(f"--size must be at least 1, got {args.size}")
    overrides = SHRINK + list(args.extra_opts)
    with tempfile.TemporaryDirectory(prefix="oars-mem-") as tmp:
        ckpt = make_checkpoint(tmp, overrides)
        base = infer_peak(64, tmp, ckpt, overrides)
        big = infer_peak(args.size, tmp, ckpt, overrides)
    pixels = args.size * args.size
    extra = big - base
    print(f"peak RSS: 64x64 image {base:.0f} MB; {args.size}x{args.size} image {big:.0f} MB; "
          f"extra {extra:.0f} MB = {extra * 2**20 / pixels:.1f} bytes per pixel "
          f"({extra * 2**20 / (3 * pixels):.1f} BGR images)")
    print(f"(ru_maxrss of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
