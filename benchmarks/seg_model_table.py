"""The segmentation model table: parameters and ONNX Runtime CPU latency of every segmentation family at full size.

For each model (its Cityscapes config, 19 classes, random weights): the parameter count of the deployed network
(backbone, neck, decode head) and with the auxiliary (training-only) heads, and the latency of the exported graph
(``oars.pipelines.export.export_model``: normalised image in, argmax labels out, at 1x3x512x1024 unless
``--size``) on ONNX Runtime's CPU provider: ``--warmup`` untimed runs (1), then ``--repeats`` timed runs (3),
median (and min/max). Each model is exported once to a temporary folder (with the export's own
onnxruntime-vs-PyTorch self-check unless ``--no-check``); nothing is kept. A family whose config or classes are not
in this checkout is skipped with a message; a model that fails is reported and the script exits with status 1 after
the table.

    python benchmarks/seg_model_table.py [--models icnet_r18,bisenetv2] [--repeats 3] [--warmup 1]
                                         [--size 512x1024] [--threads 0] [--no-check]

The cheapest run, to check that it works: ``--models unet --size 32x64 --repeats 1 --warmup 0 --no-check``.

Run it on an otherwise idle machine: the numbers are wall-clock latencies (``--threads 0``: ONNX Runtime's default
intra-op thread count, one per core).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

SEG = "configs/segmentation"
# key -> (table name, config); the Cityscapes configs so that every row has the same classes and input
FAMILIES: dict[str, tuple[str, str]] = {
    "unet": ("U-Net S5-D16", f"{SEG}/unet/unet_s5-d16_80k_cityscapes.yaml"),
    "deeplabv3_r50": ("DeepLabV3 R50-D8", f"{SEG}/deeplabv3/deeplabv3_r50_80k_cityscapes.yaml"),
    "deeplabv3_r101": ("DeepLabV3 R101-D8", f"{SEG}/deeplabv3/deeplabv3_r101_80k_cityscapes.yaml"),
    "deeplabv3plus_r50": ("DeepLabV3+ R50-D8", f"{SEG}/deeplabv3plus/deeplabv3plus_r50_80k_cityscapes.yaml"),
    "deeplabv3plus_r101": ("DeepLabV3+ R101-D8", f"{SEG}/deeplabv3plus/deeplabv3plus_r101_80k_cityscapes.yaml"),
    "deeplabv3plus_mobilenetv2": ("DeepLabV3+ MobileNetV2",
                                  f"{SEG}/deeplabv3plus/deeplabv3plus_mobilenetv2_80k_cityscapes.yaml"),
    "pspnet_r50": ("PSPNet R50-D8", f"{SEG}/pspnet/pspnet_r50-d8_80k_cityscapes.yaml"),
    "fcn_r50": ("FCN R50-D8", f"{SEG}/fcn/fcn_r50-d8_80k_cityscapes.yaml"),
    "icnet_r18": ("ICNet R18-D8", f"{SEG}/icnet/icnet_r18-d8_80k_cityscapes.yaml"),
    "icnet_r50": ("ICNet R50-D8", f"{SEG}/icnet/icnet_r50-d8_80k_cityscapes.yaml"),
    "bisenetv2": ("BiSeNetV2", f"{SEG}/bisenetv2/bisenetv2_fcn_160k_cityscapes.yaml"),
}


class Skipped(Exception):
    """The model cannot be measured in this checkout (its config or one of its classes is not there yet)."""


def parse_models(text: str) -> list[str]:
    """``"icnet_r18,bisenetv2"`` -> the keys, in that order; unknown names fail naming the valid ones."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in FAMILIES]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"--models: unknown {unknown or text!r}; expected a comma-separated list "
                                         f"of {', '.join(FAMILIES)}")
    return keys


def parse_size(text: str) -> tuple[int, int]:
    """``"512x1024"`` -> (H, W) = (512, 1024)."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        h = w = 0
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"--size must be HxW with positive ints, e.g. 512x1024, got {text!r}")
    return h, w


def load_sized_config(cfg_path: str, hw: tuple[int, int]) -> Any:
    """The config exported at 1x3xHxW: ``export.input_shape`` and the test/val pipelines' ``Resize`` scale set to
    (W, H), so that deploy.yaml resizes an image to the input, as the config's own test pipeline does at its size
    (the Cityscapes configs: 2048x1024 -> here 1024x512). :class:`Skipped` when the config is not in this checkout."""
    from oars.config import load_config

    if not os.path.isfile(cfg_path):
        raise Skipped(f"config {os.path.relpath(cfg_path, ROOT)} is not in this checkout")
    h, w = hw
    cfg = load_config(cfg_path, [f"export.input_shape=[1,3,{h},{w}]"])
    for loader in ("test_dataloader", "val_dataloader"):
        for step in (cfg.get(loader) or {}).get("dataset", {}).get("pipeline", []):
            if step.get("type") == "Resize":
                step["scale"] = [w, h]
    return cfg


def build_model(cfg: Any) -> torch.nn.Module:
    """``cfg.model`` in eval mode, random weights; :class:`Skipped` when a type it names is not registered in this
    checkout (a family another branch is still adding)."""
    from mmengine.registry import MODELS, DefaultScope

    try:
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            model = MODELS.build(copy.deepcopy(cfg.model))
    except KeyError as err:  # mmengine: "<Type> is not in the <scope>::model registry"
        if "registry" not in str(err):
            raise
        raise Skipped(f"{os.path.relpath(cfg.filename, ROOT)}: {str(err).strip(chr(34))}") from None
    return model.eval()


def parameter_counts(model: torch.nn.Module) -> tuple[int, int]:
    """(parameters of the deployed network, parameters including the auxiliary heads used in training only)."""
    total = sum(p.numel() for p in model.parameters())
    aux = getattr(model, "auxiliary_head", None)
    aux_count = sum(p.numel() for p in aux.parameters()) if isinstance(aux, torch.nn.Module) else 0
    return total - aux_count, total


def ort_latency(onnx_path: str, input_name: str, shape: tuple[int, ...], warmup: int, repeats: int,
                threads: int = 0) -> list[float]:
    """Seconds of ``repeats`` timed ``session.run`` calls on the CPU provider after ``warmup`` untimed ones, on one
    random normalised image of ``shape`` (float32, NCHW). ``threads`` > 0 sets ONNX Runtime's intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads > 0:
        opts.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_path, sess_options=opts, providers=["CPUExecutionProvider"])
    feed = {input_name: np.random.default_rng(0).standard_normal(shape, dtype=np.float32)}
    for _ in range(warmup):
        session.run(None, feed)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return times


def measure(cfg_path: str, hw: tuple[int, int], workdir: str, *, warmup: int = 1, repeats: int = 3,
            threads: int = 0, check: bool = True) -> dict[str, Any]:
    """One table row: ``{params, params_train, onnx_mb, times (s, list), median_ms, input}`` for ``cfg_path``
    exported at 1x3xHxW into ``workdir`` (random weights, saved there as the checkpoint export_model reads)."""
    from oars.export import read_deploy_yaml
    from oars.pipelines.export import export_model

    h, w = hw
    cfg = load_sized_config(cfg_path, hw)
    model = build_model(cfg)
    params, params_train = parameter_counts(model)
    ckpt = os.path.join(workdir, "random_weights.pth")
    torch.save({"state_dict": model.state_dict()}, ckpt)
    del model
    out_dir = os.path.join(workdir, "export")
    result = export_model(cfg, ckpt, out_dir, check=check)
    deploy = read_deploy_yaml(result["deploy"])
    input_name = deploy["input"]["name"]
    times = ort_latency(result["onnx"], input_name, (1, 3, h, w), warmup, repeats, threads)
    return {"params": params, "params_train": params_train, "onnx_mb": os.path.getsize(result["onnx"]) / 2**20,
            "times": times, "median_ms": statistics.median(times) * 1e3, "input": f"1x3x{h}x{w}"}


def markdown(rows: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The table: one line per measured model (name, config file, its :func:`measure` dict)."""
    lines = ["| model | config | params (M) | params with aux heads (M) | ONNX (MB) | input | "
             "ORT CPU median ms | min / max ms |", "|---|---|---|---|---|---|---|---|"]
    for name, cfg, r in rows:
        lo, hi = min(r["times"]) * 1e3, max(r["times"]) * 1e3
        lines.append(f"| {name} | {os.path.basename(cfg)} | {r['params'] / 1e6:.2f} | {r['params_train'] / 1e6:.2f} "
                     f"| {r['onnx_mb']:.1f} | {r['input']} | {r['median_ms']:.1f} | {lo:.1f} / {hi:.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=parse_models, default=list(FAMILIES),
                        help=f"comma-separated, default all: {','.join(FAMILIES)}")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per model (median), default 3")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first, default 1")
    parser.add_argument("--size", type=parse_size, default=(512, 1024), help="input HxW, default 512x1024")
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: its default)")
    parser.add_argument("--no-check", action="store_true", help="skip the export's onnxruntime-vs-PyTorch check")
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0:
        parser.error(f"--repeats must be >= 1 and --warmup >= 0, got {args.repeats} and {args.warmup}")

    rows, skipped, failed = [], [], []
    for key in args.models:
        name, cfg_rel = FAMILIES[key]
        cfg_path = os.path.join(ROOT, cfg_rel)
        print(f"{name}: exporting {cfg_rel} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"oars-segtable-{key}-") as tmp:
            try:
                r = measure(cfg_path, args.size, tmp, warmup=args.warmup, repeats=args.repeats,
                            threads=args.threads, check=not args.no_check)
            except Skipped as err:
                skipped.append(f"{name}: skipped ({err})")
                print(f"  {skipped[-1]}", file=sys.stderr)
                continue
            except Exception as err:  # one broken model must not hide the other rows
                failed.append(f"{name}: FAILED ({type(err).__name__}: {str(err)[:500]})")
                print(f"  {failed[-1]}", file=sys.stderr)
                continue
        rows.append((name, cfg_rel, r))
        print(f"  {r['median_ms']:.1f} ms median ({time.perf_counter() - start:.0f} s with the export)",
              file=sys.stderr)
    threads = args.threads or "default"
    print(f"\nONNX Runtime CPU latency, {args.warmup} warm-up + {args.repeats} timed runs (median), batch 1, random "
          f"weights, intra-op threads {threads}, {os.cpu_count()} CPUs\n")
    print(markdown(rows))
    for line in skipped + failed:
        print(f"\n{line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
