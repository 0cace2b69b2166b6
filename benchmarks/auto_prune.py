"""Automatic pruning (simulated annealing and TPE) against uniform pruning at the same FLOPs budget, after the same
fine-tune, and the latency-constrained search at real size.

Per model (``--models``): a trained checkpoint (``--checkpoint``, else the config trained into
``<work-dir>/<model>/train``, ``--train-epochs`` to shorten it), then in one compression work dir, through
``oars.pipelines.compress.compress`` (what ``tools/compress.py`` runs): ``--method prune`` (one ratio for every layer,
bisected to the budget) and ``--method auto-prune --search sa`` / ``optuna`` (``--steps`` candidates each), all at
``--target-flops`` with the same ``--criterion`` and ``--epochs`` of fine-tuning; and the unpruned model fine-tuned
the same ``--epochs`` from the same checkpoint (the control: what the extra training alone gives). The table gives
parameters, FLOPs, the metric (the compression table's: the checkpoint evaluated on the test split) and the ONNX
Runtime latency of each export as a ratio to the original's, measured again side by side in one process at the
end (``--latency-threads`` ORT threads, default 1, ``--rounds`` alternating rounds, median).

``--latency-target R`` adds the latency-constrained search at real size: the U-Net with the full-size backbone
(``unet_s5-d16`` widths: 64 base channels, 5 stages; random weights, the demo data for the proxy), exported at
``--latency-size`` px, searched with ``--target-latency`` = R x the original's latency on this machine; reported:
the budget, the latency the search measured for its best candidate, the latency of that candidate refined toward
the budget (``compress.refine_rounds``: what is written) and the refined model's latency measured again.
``--round-to N`` keeps every pruned width a multiple of N in every run (``compress.round_to``).

    python benchmarks/auto_prune.py [--models unet,yolov3,tsm] [--checkpoint CKPT] [--train-epochs N]
        [--target-flops 0.5] [--steps 300] [--epochs 16] [--criterion l2] [--searches sa,optuna] [--no-control]
        [--latency-target 0.6 --latency-size 256 --latency-steps 30] [--round-to 8]
        [--work-dir work_dirs/bench_auto_prune]

Writes ``<work-dir>/auto_prune.json`` and prints markdown tables. Re-running reuses what is done (a trained
checkpoint, a searched variant, a finished fine-tune).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402
from benchmarks.tune_search import data_overrides  # noqa: E402


@dataclass(frozen=True)
class Case:
    """A model compressed: its config, its data (generated shapes or the video demo's) and ``-o`` it needs."""

    label: str
    config: str
    data: str
    overrides: tuple[str, ...] = ()


MODELS = {
    "unet": Case("U-Net demo", "configs/segmentation/unet/unet_demo_shapes.yaml", "data/demo_shapes"),
    "yolov3": Case("YOLOv3 demo", "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml", "data/demo_shapes",
                   ("default_hooks.checkpoint.save_best=coco/bbox_mAP_50",)),
    "tsm": Case("TSM demo", "configs/video/tsm/tsm_r18_demo_videos.yaml", "data/demo_videos"),
}
# the U-Net at the full-size widths of configs/segmentation/unet/unet_s5-d16_*.yaml, on the demo's 4 classes
REAL_UNET = ["model.backbone.base_channels=64", "model.backbone.num_stages=5", "model.decode_head.channels=64",
             "model.data_preprocessor.size_divisor=16"]


def ensure_data(case: Case, args: argparse.Namespace) -> None:
    """Generate the demo shapes when absent (``--data`` with ``--num-train`` / ``--num-val``: a smaller set there);
    the video demo's clips must be there (``make demo-video-data``, or ``--video-data DIR`` generated with
    ``python -m video.demo_data --out DIR``)."""
    path = os.path.join(ROOT, case.data)
    if not case.data.endswith("demo_shapes") and args.video_data:
        path = args.video_data
    if case.data.endswith("demo_shapes"):
        from oars.data.demo_shapes import generate

        sizes = {k: v for k, v in (("num_train", args.num_train), ("num_val", args.num_val)) if v is not None}
        generate(args.data or path, **sizes)
    elif not os.path.isdir(path):
        raise SystemExit(f"{case.label}: {path} does not exist; generate it first with make demo-video-data (or "
                         f"python -m video.demo_data --out DIR, then --video-data DIR)")


def trained_checkpoint(case: Case, args: argparse.Namespace, folder: str) -> str:
    """``--checkpoint``, else the config trained in ``folder`` (a finished run there is reused)."""
    from oars.engine.work_dir import latest_checkpoint
    from oars.pipelines.train import train

    if args.checkpoint:
        return args.checkpoint
    epochs = args.train_epochs
    extra = [] if epochs is None else [f"train_cfg.max_epochs={epochs}", f"train_cfg.val_interval={epochs}",
                                       *schedule(case, epochs)]
    last = latest_checkpoint(folder) if os.path.isdir(folder) else None
    done = os.path.join(folder, "finished")
    if last is None or not os.path.isfile(done):
        train(os.path.join(ROOT, case.config), [*case.overrides, *extra], work_dir=folder, resume=last is not None)
        last = latest_checkpoint(folder)
        open(done, "w").close()
    return last


def schedule(case: Case, epochs: int) -> list[str]:
    """``-o`` fitting the config's schedule to ``epochs`` as ``tools/compress.py --epochs`` fits it."""
    from oars.config import load_config
    from oars.pipelines.compress.prune import rescaled_schedule

    cfg = load_config(os.path.join(ROOT, case.config), list(case.overrides))
    return rescaled_schedule(cfg.get("param_scheduler"), cfg.train_cfg.max_epochs, epochs, True)


def compress_variant(config: str, checkpoint: str, work_dir: str, cli: dict, overrides: list[str]) -> dict:
    """One ``tools/compress.py`` run in-process; returns the method's record."""
    from oars.compress.options import merged_options
    from oars.config.check import load_checked_config
    from oars.pipelines.compress import compress

    cfg = load_checked_config(config, overrides)
    return compress(cfg, checkpoint, work_dir, merged_options(cfg, cli), overrides)


def control(case: Case, checkpoint: str, epochs: int, folder: str) -> float | None:
    """The unpruned model fine-tuned ``epochs`` from ``checkpoint`` as the pruned ones are; its test metric."""
    from oars.config import load_config
    from oars.engine.work_dir import latest_checkpoint
    from oars.pipelines.compress.variants import main_metric
    from oars.pipelines.evaluate import evaluate
    from oars.pipelines.train import train

    config = os.path.join(ROOT, case.config)
    overrides = [*case.overrides, f"load_from={checkpoint}", f"train_cfg.max_epochs={epochs}",
                 f"train_cfg.val_interval={epochs}", *schedule(case, epochs)]
    last = latest_checkpoint(folder) if os.path.isdir(folder) else None
    if last is None or not os.path.basename(last).startswith(f"epoch_{epochs}."):
        train(config, overrides, work_dir=folder, resume=last is not None)
        last = latest_checkpoint(folder)
    result = evaluate(config, last, list(case.overrides), work_dir=os.path.join(folder, "eval"))
    return main_metric(load_config(config, list(case.overrides)), result["metrics"])[1]


def side_by_side_ms(paths: dict[str, str], rounds: int, runs: int = 10, threads: int | None = 1) -> dict[str, float]:
    """ONNX Runtime latency of each graph, ``rounds`` alternating rounds of ``runs`` (median of the rounds'
    medians), so drift in the shared machine's speed hits every graph alike."""
    from oars.compress.measure import ort_latency_ms

    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            times[name].append(float(ort_latency_ms(path, runs=runs, warmup=2, threads=threads)))
    return {name: statistics.median(t) for name, t in times.items()}


def export_onnx(folder: str) -> str | None:
    """The FP32 graph a variant's ``export/`` holds (None when it was not exported)."""
    path = os.path.join(folder, "export", "model.onnx")
    return path if os.path.isfile(path) else None


def flops_table(case: Case, args: argparse.Namespace, folder: str) -> list[dict]:
    """Uniform pruning, auto-prune (each search) and the control for one model; one row each."""
    from oars.compress.table import read_rows

    ensure_data(case, args)
    config = os.path.join(ROOT, case.config)
    start = time.perf_counter()
    ckpt = trained_checkpoint(case, args, os.path.join(folder, "train"))
    cmp = os.path.join(folder, "cmp")
    common = {"target_flops": args.target_flops, "criterion": args.criterion, "epochs": args.epochs,
              "round_to": args.round_to}
    runs = {f"prune-uniform-{args.criterion}": {"method": "prune", "variant": f"prune-uniform-{args.criterion}"}}
    for search in args.searches:
        runs[f"auto-{search}"] = {"method": "auto-prune", "search": search, "steps": args.steps,
                                  "variant": f"auto-{search}"}
    walls = {}
    for variant, cli in runs.items():
        t0 = time.perf_counter()
        compress_variant(config, ckpt, cmp, {**common, **cli}, list(case.overrides))
        walls[variant] = time.perf_counter() - t0
    table = {r["variant"]: r for r in read_rows(cmp)}
    graphs = {v: export_onnx(os.path.join(cmp, v)) for v in ["original", *runs]}
    ms = side_by_side_ms({v: p for v, p in graphs.items() if p}, args.rounds, threads=args.latency_threads)
    original = table["original"]
    rows = []
    for variant in ["original", *runs]:
        r = table[variant]
        search = {}
        auto = os.path.join(cmp, variant, "auto_prune.json")
        if os.path.isfile(auto):
            with open(auto) as f:
                report = json.load(f)
            search = {"scored": report["scored"], "proxy": report["best_score"], "best_ratios": report["best_ratios"]}
        rows.append({"model": case.label, "variant": variant, "params": r["params"], "flops": r["flops"],
                     "flops_ratio": r["flops"] / original["flops"] if r["flops"] else None,
                     "metric": r["metric"], "value": r["metric_value"],
                     "fine_tune_epochs": 0 if variant == "original" else args.epochs, "ort_ms": ms.get(variant),
                     "latency_ratio": ms[variant] / ms["original"] if variant in ms and "original" in ms else None,
                     "wall_s": walls.get(variant), **search})
    if args.control:
        value = control(case, ckpt, args.epochs, os.path.join(folder, "control"))
        rows.append({"model": case.label, "variant": f"original fine-tuned {args.epochs} epochs (control)",
                     "params": original["params"], "flops": original["flops"], "flops_ratio": 1.0,
                     "metric": original["metric"], "value": value, "fine_tune_epochs": args.epochs})
    print(f"{case.label}: {(time.perf_counter() - start) / 60:.1f} min", flush=True)
    return rows


def random_checkpoint(config: str, overrides: list[str], path: str) -> str:
    """Random weights of ``config`` (latency does not depend on them) saved where ``tools/compress.py`` reads one."""
    import torch
    from mmengine.registry import MODELS as REGISTRY
    from mmengine.registry import DefaultScope

    from oars.config import load_config

    cfg = load_config(config, overrides)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = REGISTRY.build(copy.deepcopy(cfg.model))
    classes = list(cfg.train_dataloader.dataset.get("classes") or range(cfg.model.num_classes))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, path)
    return path


def latency_search(args: argparse.Namespace, folder: str) -> dict:
    """The latency-constrained search on the U-Net exported at ``--latency-size``: the trained demo checkpoint
    (``--latency-weights trained``; the U-Net table's, else trained here) or the full-size widths with random
    weights (``random``). Returns the budget, the search's best cost and the best measured again beside the
    original; every latency (the budget's reference, the search's, the re-measurements) on ``--latency-threads``
    ONNX Runtime threads, the setting ``tools/compress.py --latency-threads`` gives the search."""
    from oars.config.check import load_checked_config
    from oars.pipelines.compress.auto_prune import export_latency_ms
    from oars.pipelines.compress.prune import PRUNED_CONFIG, model_and_batch

    case = MODELS["unet"]
    if args.data:
        case = dataclasses.replace(case, overrides=(*case.overrides, *data_overrides(args.data)))
    ensure_data(case, args)
    config = os.path.join(ROOT, case.config)
    size = args.latency_size
    export = [f"export.input_shape=[1,3,{size},{size}]"]
    if args.latency_weights == "random":
        overrides = [*case.overrides, *REAL_UNET, *export, "custom_hooks=[]"]
        ckpt = random_checkpoint(config, overrides, os.path.join(folder, "random.pth"))
        label = f"U-Net S5-D16 widths (random weights), {size}x{size}"
    else:
        overrides = [*case.overrides, *export]
        ckpt = trained_checkpoint(case, args, os.path.join(os.path.dirname(folder), "unet", "train"))
        label = f"U-Net demo (trained), {size}x{size}"
    cfg = load_checked_config(config, overrides)
    model, _ = model_and_batch(cfg, ckpt)
    threads = args.latency_threads
    original = statistics.median(export_latency_ms(cfg, model, threads=threads) for _ in range(args.rounds))
    target = round(args.latency_target * original, 2)
    start = time.perf_counter()
    record = compress_variant(config, ckpt, os.path.join(folder, "cmp"),
                              {"method": "auto-prune", "target_latency": target, "search": "sa",
                               "steps": args.latency_steps, "epochs": 0, "criterion": args.criterion,
                               "latency": False, "variant": "auto-latency", "latency_threads": threads,
                               "round_to": args.round_to}, overrides)
    wall = time.perf_counter() - start
    best_cfg = load_checked_config(os.path.join(folder, "cmp", "auto-latency", PRUNED_CONFIG), export)
    best, _ = model_and_batch(best_cfg, record["checkpoint"])
    again: dict[str, list[float]] = {"original": [], "best": []}
    for _ in range(args.rounds):  # alternating, on the threads the search measured on
        again["original"].append(export_latency_ms(cfg, model, threads=threads))
        again["best"].append(export_latency_ms(best_cfg, best, threads=threads))
    original_again, best_again = (statistics.median(v) for v in again.values())
    search = record["search"]
    return {"model": label, "original_ms": original, "target_ms": target, "search_best_ms": search["best_cost"],
            "refined_ms": search["refine"]["cost"], "refine_scale": search["refine"]["scale"],
            "search_best_ratios": search["search_best_ratios"], "round_to": args.round_to,
            "original_again_ms": original_again, "best_again_ms": best_again, "best_over_target": best_again / target,
            "latency_ratio": best_again / original_again, "scored": search["scored"],
            "proposed": len(search["history"]), "steps": args.latency_steps, "best_ratios": search["best_ratios"],
            "proxy": search["best_score"], "wall_s": wall, "threads": threads}


def print_tables(rows: list[dict], latency: dict | None) -> None:
    print("| model | variant | params | GFLOPs (of original) | metric | fine-tune epochs | ORT ms (of original) "
          "| candidates scored |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        flops = f"{r['flops'] / 1e9:.4f} ({r['flops_ratio']:.3f})" if r.get("flops") else "-"
        ms = f"{r['ort_ms']:.2f} ({r['latency_ratio']:.3f})" if r.get("ort_ms") else "-"
        value = "-" if r["value"] is None else f"{r['value']:.4f}"
        print(f"| {r['model']} | {r['variant']} | {r['params']:,} | {flops} | {r['metric']} {value} | "
              f"{r['fine_tune_epochs']} | {ms} | {r.get('scored', '-')} |")
    if latency:
        print("\n| model | original ms | budget ms | search's best ms | refined ms (scale) | measured again: "
              "original / best ms | best / budget | candidates scored / proposed |")
        print("|---|---|---|---|---|---|---|---|")
        r = latency
        print(f"| {r['model']} | {r['original_ms']:.1f} | {r['target_ms']:.1f} | {r['search_best_ms']:.1f} | "
              f"{r['refined_ms']:.1f} ({r['refine_scale']:.3f}) | {r['original_again_ms']:.1f} / "
              f"{r['best_again_ms']:.1f} | {r['best_over_target']:.3f} | {r['scored']} / {r['proposed']} |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="unet", help=f"comma-separated, of {sorted(MODELS)}; '' for none")
    p.add_argument("--checkpoint", default=None, help="a trained checkpoint (one model only; default: train it)")
    p.add_argument("--train-epochs", type=int, default=None, help="train the checkpoint this long (default: config)")
    p.add_argument("--target-flops", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=300, help="candidates each search scores (default %(default)s)")
    p.add_argument("--epochs", type=int, default=16, help="fine-tuning epochs of every variant and the control")
    p.add_argument("--criterion", default="l2", choices=["l1", "l2"])
    p.add_argument("--searches", default="sa,optuna", help="comma-separated, of sa, optuna")
    p.add_argument("--no-control", dest="control", action="store_false", help="skip the unpruned fine-tune")
    p.add_argument("--rounds", type=int, default=5, help="alternating latency rounds (median)")
    p.add_argument("--latency-threads", type=int, default=1,
                   help="ONNX Runtime intra-op threads of every latency: the tables' and the latency search's budget "
                        "and candidates (default %(default)s; 0: ONNX Runtime's default, all cores)")
    p.add_argument("--latency-target", type=float, default=None,
                   help="also run the latency-constrained search on the real-size U-Net: budget = this x original")
    p.add_argument("--latency-size", type=int, default=256, help="its export input side (default %(default)s)")
    p.add_argument("--latency-steps", type=int, default=30, help="its candidates scored (default %(default)s)")
    p.add_argument("--latency-weights", default="trained", choices=["trained", "random"],
                   help="the trained U-Net demo, or the full-size U-Net widths with random weights")
    p.add_argument("--round-to", type=int, default=None,
                   help="compress.round_to of every run: pruned widths multiples of N (default: none)")
    p.add_argument("--work-dir", default=os.path.join("work_dirs", "bench_auto_prune"))
    p.add_argument("--data", default=None, help="the demo shapes folder (default: the configs' data/demo_shapes)")
    p.add_argument("--video-data", default=None,
                   help="the demo videos folder (default: the config's data/demo_videos)")
    p.add_argument("--num-train", type=int, default=None, help="generate --data with this many training images")
    p.add_argument("--num-val", type=int, default=None, help="generate --data with this many validation images")
    args = p.parse_args(argv)
    if (args.num_train or args.num_val) and not args.data:
        p.error("--num-train / --num-val generate a smaller set: give its folder with --data (the shared "
                "data/demo_shapes is not rewritten)")
    args.names = [n for n in args.models.split(",") if n]
    args.searches = [s for s in args.searches.split(",") if s]
    if any(n not in MODELS for n in args.names):
        p.error(f"--models {args.models}: expected names from {sorted(MODELS)}")
    if not args.searches or any(s not in ("sa", "optuna") for s in args.searches):
        p.error(f"--searches {','.join(args.searches)}: expected sa, optuna or both")
    if args.checkpoint and len(args.names) != 1:
        p.error(f"--checkpoint {args.checkpoint}: give one model with it (--models), not {args.names}")
    if (args.checkpoint and args.latency_target is not None and args.latency_weights == "trained"
            and args.names != ["unet"]):
        p.error(f"--checkpoint {args.checkpoint} with --latency-target: the latency search prunes the U-Net, so the "
                "checkpoint must be the U-Net demo's (--models unet), or give --latency-weights random")
    if args.round_to is not None and args.round_to < 1:
        p.error(f"--round-to {args.round_to}: a channel multiple >= 1")
    if args.latency_threads < 0:
        p.error(f"--latency-threads {args.latency_threads}: a number of threads >= 0 (0: ONNX Runtime's default)")
    if not args.names and args.latency_target is None:
        p.error("nothing to measure: give --models or --latency-target")
    if not 0 < args.target_flops < 1 or (args.latency_target is not None and not 0 < args.latency_target < 1):
        p.error(f"--target-flops {args.target_flops} / --latency-target {args.latency_target}: fractions in (0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    for name in args.names:
        case = MODELS[name]
        folder = args.data if case.data.endswith("demo_shapes") else args.video_data
        if folder:
            case = dataclasses.replace(case, overrides=(*case.overrides, *data_overrides(os.path.abspath(folder))))
        rows += flops_table(case, args, os.path.abspath(os.path.join(args.work_dir, name)))
    latency = None
    if args.latency_target is not None:
        latency = latency_search(args, os.path.abspath(os.path.join(args.work_dir, "latency")))
    out = os.path.join(args.work_dir, "auto_prune.json")
    os.makedirs(args.work_dir, exist_ok=True)
    settings = {k: getattr(args, k) for k in ("target_flops", "steps", "epochs", "criterion", "searches",
                                              "latency_target", "latency_size", "latency_steps", "rounds",
                                              "latency_threads", "round_to")}
    with open(out, "w") as f:
        json.dump({"settings": settings, "rows": rows, "latency": latency}, f, indent=1)
    print_tables(rows, latency)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
