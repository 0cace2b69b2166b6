"""ONNX Runtime latency of a model pruned to a FLOPs target, as a ratio to the unpruned model, in one process.

The compression goal "pruned to -50 % FLOPs, ONNX Runtime latency lower in proportion" depends on model size: on
the 1/4- to 1/8-width demo models the per-operator overhead (element-wise ops, resizes, concatenations, Q/DQ) holds
much of the time and pruning does not shrink it, so latency falls by 15-20 % only (docs/compression.md). This
measures the real-size configs (random weights: latency does not depend on them), pruned by
``oars.compress.prune.prune_to_target`` as ``tools/compress.py --method prune`` prunes, with and without
``round_to`` (channel counts kept multiples of N, which convolution kernels run at full speed). Each graph is the
model's tensor mode (backbone, neck, head; no post-processing) exported to ONNX and timed with one ONNX Runtime
thread, alternating nothing: both graphs run in the same process, one after the other.

    python benchmarks/prune_latency.py [--models yolov3,unet] [--size N] [--target 0.5] [--round-to 0,8]
                                       [--criterion l1|l2] [--runs 20]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile

import torch
from torch.utils._pytree import tree_leaves

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

# name -> (config, default_scope, default input size)
MODELS = {
    "yolov3": ("configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml", "detection", 320),
    "unet": ("configs/segmentation/unet/unet_s5-d16_80k_cityscapes.yaml", "segmentation", 256),
    "unet_demo": ("configs/segmentation/unet/unet_demo_shapes.yaml", "segmentation", 128),
}


class TensorGraph(torch.nn.Module):
    """``model(x, mode='tensor')`` with its outputs (tensors, or nested lists / tuples / dicts of them) flattened
    into a tuple, so any task model exports to one ONNX graph."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(tree_leaves(self.model(x, mode="tensor")))


def build(name: str) -> tuple[torch.nn.Module, int]:
    """The config's model (eval mode, random weights) and its default input size."""
    from mmengine.registry import MODELS as REGISTRY
    from mmengine.registry import DefaultScope

    from oars.config import load_config

    config, scope, size = MODELS[name]
    cfg = load_config(os.path.join(ROOT, config))
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(scope):
        return REGISTRY.build(copy.deepcopy(cfg.model)).eval(), size


def latency_ms(model: torch.nn.Module, x: torch.Tensor, folder: str, tag: str, runs: int) -> float:
    """Median ONNX Runtime latency (one thread) of the model's tensor-mode graph on ``x``."""
    from oars.compress.measure import ort_latency_ms

    path = os.path.join(folder, f"{tag}.onnx")
    torch.onnx.export(TensorGraph(model).eval(), (x,), path, dynamo=False, opset_version=17)
    return float(ort_latency_ms(path, runs=runs, warmup=min(3, runs), threads=1))


def measure(name: str, size: int | None, target: float, round_tos: list[int], criterion: str,
            runs: int) -> list[dict]:
    """One row per ``round_to``: the FLOPs and latency ratios of the pruned model to the unpruned one."""
    from oars.compress.measure import count_flops
    from oars.compress.prune import PruneSettings, prune_to_target

    model, default_size = build(name)
    size = size or default_size
    x = torch.randn(1, 3, size, size)
    rows = []
    with tempfile.TemporaryDirectory(prefix="oars_prune_latency_") as folder:
        base_ms, base_flops = latency_ms(model, x, folder, "original", runs), count_flops(model, x)
        for round_to in round_tos:
            settings = PruneSettings(target_flops=target, criterion=criterion, round_to=round_to or None)
            pruned, _ = prune_to_target(model, x, settings)
            ms = latency_ms(pruned, x, folder, f"pruned_{round_to}", runs)
            rows.append({"model": name, "size": size, "round_to": round_to or "-", "original_ms": base_ms,
                         "pruned_ms": ms, "flops": count_flops(pruned, x) / base_flops, "latency": ms / base_ms})
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="yolov3,unet", help=f"comma-separated, of {sorted(MODELS)}")
    p.add_argument("--size", type=int, default=None, help="square input side (default: per model)")
    p.add_argument("--target", type=float, default=0.5, help="FLOPs kept (default %(default)s)")
    p.add_argument("--round-to", default="0,8", help="comma-separated round_to values; 0 = none")
    p.add_argument("--criterion", default="l2", choices=("l1", "l2"))
    p.add_argument("--runs", type=int, default=20, help="timed ONNX Runtime runs per graph (median)")
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        p.error(f"--models {args.models}: expected names from {sorted(MODELS)}")
    args.names, args.round_tos = names, [int(v) for v in args.round_to.split(",") if v != ""]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    print("| model | input | round_to | ORT ms original | ORT ms pruned | FLOPs pruned / original | "
          "latency pruned / original |")
    print("|---|---|---|---|---|---|---|")
    for name in args.names:
        for r in measure(name, args.size, args.target, args.round_tos, args.criterion, args.runs):
            print(f"| {r['model']} | {r['size']}x{r['size']} | {r['round_to']} | {r['original_ms']:.1f} | "
                  f"{r['pruned_ms']:.1f} | {r['flops']:.3f} | {r['latency']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
