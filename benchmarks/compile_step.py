"""Training-step time with ``torch.compile`` versus eager, per model family, same process, same batch.

The compiled side is what ``compile: true`` / ``tools/train.py --compile`` runs
(``oars.engine.compile.compile_for_training``): the model's forward in loss mode under ``torch.compile`` (AOT
autograd compiles its backward) and, unless ``--eager-optimizer``, each optimizer's step with the gradient
clipping (``compile_optimizer_steps``); the data preprocessor and the rest of the optimizer wrapper eager; a
GAN's networks compiled in place. ``--whole-step`` compiles ``model.train_step`` instead, as mmengine's Runner
does. Each side has its own copy of the model and optimizer (the config's ``optim_wrapper``, learning rate set
to 1e-30 so that the weights stay equal and every step does the same work) and draws the same random numbers at
every step; the losses of the two sides are compared and their largest relative difference printed. Compilation
(the compiled side's warm-up steps, which trace and build the graphs) is timed and printed on its own; the timed
steps then alternate eager / compiled so that drift in machine speed hits both.

Families (demo configs, shrunk where the demo is full size; ``--size`` / ``--batch`` change the input):
- ``yolov3``: yolov3_darknet53_demo_shapes.yaml (narrow DarkNet-53), 2 x 128 px;
- ``faster_rcnn``: faster_rcnn_r50_fpn_1x_coco.yaml with a ResNet-18 backbone, 2 x 128 px;
- ``deeplabv3``: deeplabv3_r50_40k_voc12.yaml with a ResNet-18 backbone (output stride 8), 2 x 128 px;
- ``tsm``: tsm_r18_demo_videos.yaml (ResNet-18 TSM, 8 segments), 1 clip x 8 frames x 64 px;
- ``pix2pix``: pix2pix_demo_shapes.yaml, 1 x 64 px pair;
- ``tsn_r50`` (not in the default list): tsn_r50_1x1x8_kinetics400.yaml at its real size, 1 clip x 8 frames x
  224 px: a ResNet-50 training step at batch 8.

    python benchmarks/compile_step.py [--models yolov3 faster_rcnn deeplabv3 tsm pix2pix] [--repeats 5]
        [--warmup 2] [--backend inductor] [--mode default] [--device cpu|cuda] [--size N] [--batch N]
        [--inductor-option KEY=VALUE ...] [-o KEY=VALUE ...] [--whole-step] [--eager-optimizer] [--channels-last]
    python benchmarks/compile_step.py --quick    # the cheapest form: the tiny U-Net demo, 32 px, aot_eager

Prints per family: compile + warm-up time, eager and compiled ms per step (median; CPU time too on the CPU),
the ratio compiled / eager, and dynamo's graphs and graph breaks.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT, time_alternating  # noqa: E402

CFG = os.path.join(ROOT, "configs")
# name -> (config, overrides that shrink it, batch kind, default (size, batch))
CASES: dict[str, tuple[str, list[str], str, tuple[int, int]]] = {
    "yolov3": (f"{CFG}/detection/yolov3/yolov3_darknet53_demo_shapes.yaml", [], "boxes", (128, 2)),
    "faster_rcnn": (f"{CFG}/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml",
                    ["model.backbone.depth=18", "model.backbone.init=null"], "boxes", (128, 2)),
    "deeplabv3": (f"{CFG}/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml",
                  ["model.backbone.depth=18", "model.backbone.init=null", "model.decode_head.channels=64",
                   "model.auxiliary_head.channels=64"], "labels", (128, 2)),
    "tsm": (f"{CFG}/video/tsm/tsm_r18_demo_videos.yaml", [], "clips", (64, 1)),
    "pix2pix": (f"{CFG}/gan/pix2pix/pix2pix_demo_shapes.yaml", [], "pairs", (64, 1)),
    # the real-size reference: TSN's 8 frames through a full ResNet-50 (a ResNet-50 step at batch 8, 224 px)
    "tsn_r50": (f"{CFG}/video/tsn/tsn_r50_1x1x8_kinetics400.yaml", [], "clips", (224, 1)),
    # --quick: the make-demo U-Net at 4 base channels (what the engine tests train)
    "unet_tiny": (f"{CFG}/segmentation/unet/unet_demo_shapes.yaml",
                  ["model.backbone.base_channels=4", "model.decode_head.channels=4"], "labels", (32, 2)),
}
FAMILIES = ["yolov3", "faster_rcnn", "deeplabv3", "tsm", "pix2pix"]


def make_data(kind: str, size: int, batch: int, num_classes: int) -> dict:
    """One batch as the data loader delivers it (uint8 images / clips / pairs with their annotations)."""
    from benchmarks.gan_step import gan_batch
    from benchmarks.train_step import make_batch, make_clips, make_seg_batch

    if kind == "boxes":
        return make_batch(size, batch, num_classes)
    if kind == "labels":
        return make_seg_batch(size, size, batch, num_classes)
    if kind == "clips":
        return make_clips(size, batch, num_classes)
    return gan_batch(size, batch)


def build(name: str, device: str, extra: list[str] | None = None):
    """The config's model (train mode, random weights; ``extra``: ``key=value`` overrides) and a builder of its
    optimizer wrapper."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config
    from oars.tasks import activate

    path, overrides, _, _ = CASES[name]
    cfg = load_config(path, [*overrides, *(extra or [])])
    activate(cfg.default_scope)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model)).to(device).train()

    def wrapper(net: torch.nn.Module):
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            return build_optim_wrapper(net, copy.deepcopy(cfg.optim_wrapper))

    return model, wrapper, cfg


def compiled_vs_eager(name: str, size: int, batch: int, device: str, repeats: int, warmup: int,
                      options: dict, whole_step: bool = False, extra: list[str] | None = None,
                      eager_optimizer: bool = False, channels_last: bool = False) -> dict:
    """Time one family. Returns ``{'compile_s', 'first_s', 'eager', 'compiled' ((wall, cpu) medians), 'stats'}``;
    with ``channels_last`` both sides store their 4-D weights channels-last (``channels_last: true``) and a third
    side, ``'contiguous'`` (eager, the default layout), is timed too; ``'blockers'`` names the layers that kept a
    model contiguous (``oars.engine.memory_format.channels_last_blockers``)."""
    from oars.engine.compile import (
        compile_for_training,
        compile_optimizer_steps,
        snapshot,
        stats_since,
        with_device_defaults,
    )
    from oars.engine.memory_format import apply_channels_last

    torch.manual_seed(0)
    model, make_wrapper, cfg = build(name, device, extra)
    data = make_data(CASES[name][2], size, batch, int(cfg.model.get("num_classes") or 1))
    eager_model, compiled_model = model, copy.deepcopy(model)
    contiguous_model = copy.deepcopy(model) if channels_last else None
    blockers = []
    if channels_last:  # as the runner: before compiling, the optimizers built after
        blockers = apply_channels_last(eager_model)[1]
        apply_channels_last(compiled_model)
    eager_opt, compiled_opt = make_wrapper(eager_model), make_wrapper(compiled_model)
    contiguous_opt = make_wrapper(contiguous_model) if channels_last else None
    for wrapper in (eager_opt, compiled_opt, contiguous_opt):
        if wrapper is not None:
            freeze_weights(wrapper)
    if whole_step:  # mmengine's Runner._maybe_compile
        used = options
        step = torch.compile(compiled_model.train_step, **used)
    else:  # oars' OarsRunner._maybe_compile
        used = with_device_defaults(options, compiled_model)
        step = compile_for_training(compiled_model, used).train_step
        if not eager_optimizer:  # compile.optimizer (default true)
            compile_optimizer_steps(compiled_opt, used)
    losses: dict[str, dict] = {}

    def eager() -> None:
        torch.manual_seed(0)  # the same proposals / samples / GAN noise at every step, on both sides
        losses["eager"] = eager_model.train_step(copy.deepcopy(data), eager_opt)

    def compiled() -> None:
        torch.manual_seed(0)
        losses["compiled"] = step(copy.deepcopy(data), compiled_opt)

    def contiguous() -> None:
        torch.manual_seed(0)
        losses["contiguous"] = contiguous_model.train_step(copy.deepcopy(data), contiguous_opt)

    before = snapshot()
    start = time.perf_counter()
    compiled()
    first = time.perf_counter() - start
    for _ in range(max(warmup, 1) - 1):
        compiled()
    compile_s = time.perf_counter() - start
    stats = stats_since(before)
    sides = {"eager": eager, "compiled": compiled, **({"contiguous": contiguous} if channels_last else {})}
    medians = time_alternating(sides, repeats, device, warmup=1)
    heavy = heavy_kernel_share(eager) if device == "cpu" else None
    random_ops = any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())
    return {"random_ops": random_ops, "blockers": blockers, "compile_s": compile_s, "first_s": first, "stats": stats,
            "options": used, "loss_diff": relative_loss_difference(losses["eager"], losses["compiled"]), "heavy": heavy,
            **medians}


# Kernels inductor does not generate on the CPU: it calls the same oneDNN / BLAS convolutions and matrix products
# as eager, so their time is a floor under the compiled step (self time, so a parent op is not counted twice)
MATMUL_KERNELS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm")


def heavy_kernel_share(step) -> float:
    """The share of one eager step's CPU time spent in convolutions and matrix products (forward and backward),
    from ``torch.profiler``: compiling can at best remove the rest, so ``compiled / eager >= share``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in events)
    heavy = sum(e.self_cpu_time_total for e in events if "conv" in e.key or e.key in MATMUL_KERNELS)
    return heavy / total if total else 0.0


# A learning rate too small to move a nonzero float32 weight (each update is below half an ulp of it; a zero-init
# bias moves to about 1e-30, which changes no loss). Not 0: a compiled Adam step divides by its step size, and oars
# runs the optimizer eagerly at lr 0 (``compile_optimizer_steps``)
FROZEN_LR = 1e-30


def freeze_weights(optim_wrapper) -> None:
    """Learning rate :data:`FROZEN_LR`: the optimizer still does all of its arithmetic, but the weights never move,
    so every timed step does the same work on both sides. (Training a random-init detector at the config's rate
    diverges within a few steps, and its proposal and RoI counts then differ between the sides and from step to
    step: that once made compiled Faster R-CNN look 4.5x faster.)"""
    wrappers = getattr(optim_wrapper, "optim_wrappers", {"": optim_wrapper})  # a GAN's OptimWrapperDict
    for wrapper in wrappers.values():
        for group in wrapper.optimizer.param_groups:
            group["lr"] = FROZEN_LR


def relative_loss_difference(eager: dict, compiled: dict) -> float:
    """The largest ``|compiled - eager| / max(|eager|, 1e-6)`` over the logged losses of the last step of each side
    (same weights, same seed, same batch): inductor's fused kernels differ from eager's by rounding only."""
    worst = 0.0
    for key, value in eager.items():
        if key.startswith("loss") and key in compiled:
            want, got = float(torch.as_tensor(value).detach()), float(torch.as_tensor(compiled[key]).detach())
            worst = max(worst, abs(got - want) / max(abs(want), 1e-6))
    return worst


def report(name: str, size: int, batch: int, result: dict, device: str) -> str:
    """The family's lines: compilation, both step times, the ratio, dynamo's graphs and breaks."""
    (ew, ec), (cw, cc) = result["eager"], result["compiled"]
    on_cpu = not device.startswith("cuda")
    stats = result["stats"]
    breaks = sum(stats.graph_breaks.values())
    reasons = "; ".join(f"{r} (x{n})" for r, n in stats.graph_breaks.most_common(3))
    lines = [f"{name}: {batch} x {size} px, {device}, torch.compile({result['options']})",
             f"  compile + warm-up: {result['compile_s']:.1f} s (first step {result['first_s']:.1f} s); "
             f"{stats.graphs} graphs, {breaks} graph breaks{': ' + reasons if reasons else ''}"
             + (f", {sum(stats.eager_frames.values())} functions left to eager" if stats.eager_frames else ""),
             f"  eager   : {ew * 1000:9.1f} ms/step" + (f", {ec * 1000:9.1f} ms CPU" if on_cpu else ""),
             f"  compiled: {cw * 1000:9.1f} ms/step" + (f", {cc * 1000:9.1f} ms CPU" if on_cpu else ""),
             f"  ratio compiled / eager: {cw / ew:6.3f}" + (f" (CPU time {cc / ec:6.3f})" if on_cpu else ""),
             *(contiguous_lines(result) if "contiguous" in result else []),
             *([f"  convolutions and matrix products: {result['heavy']:.0%} of the eager step's operator time "
                f"(compiled runs the same kernels: ratio >= {result['heavy']:.2f})"] if result["heavy"] is not None
               else []),
             f"  losses compiled vs eager (same weights, seed and batch): largest relative difference "
             f"{result['loss_diff']:.1e}"
             + (" (the model has dropout: inductor draws its own random numbers, so the masks differ; "
                "--inductor-option fallback_random=true or -o ...dropout_ratio=0 compare exactly)"
                if result["random_ops"] and result["options"].get("backend", "inductor") == "inductor" else "")]
    return "\n".join(lines)


def contiguous_lines(result: dict) -> list[str]:
    """``--channels-last``: the eager step in the default (contiguous) layout and both sides' ratios to it."""
    if result["blockers"]:
        return [f"  channels-last not applied (as the runner): {result['blockers'][0]} (oneDNN issue #6035)"]
    (ew, _), (cw, _), (nw, _) = result["eager"], result["compiled"], result["contiguous"]
    return [f"  eager, contiguous: {nw * 1000:9.1f} ms/step; channels-last / contiguous: eager {ew / nw:6.3f}, "
            f"compiled {cw / nw:6.3f}"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    import yaml

    from oars.engine.compile import compile_options
    from oars.errors import OarsError

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=list(CASES), default=FAMILIES)
    parser.add_argument("--repeats", type=int, default=5, help="timed steps of each side (at least 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed compiled steps first (compilation)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    parser.add_argument("--mode", default=None, help="torch.compile mode (default: torch's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=None, help="input side in px (default: per family)")
    parser.add_argument("--batch", type=int, default=None, help="images / clips / pairs (default: per family)")
    parser.add_argument("--inductor-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an inductor option (torch.compile options=), e.g. layout_optimization=True; repeatable")
    parser.add_argument("-o", "--cfg-options", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for every model timed, e.g. model.cls_head.dropout_ratio=0")
    parser.add_argument("--whole-step", action="store_true",
                        help="compile model.train_step as mmengine's Runner does (default: the forward, as oars)")
    parser.add_argument("--eager-optimizer", action="store_true",
                        help="keep the optimizer step eager (compile.optimizer: false; default: compiled, as oars)")
    parser.add_argument("--channels-last", action="store_true",
                        help="both sides channels-last (config key channels_last: true), a contiguous eager side "
                             "timed too")
    parser.add_argument("--quick", action="store_true",
                        help="the cheapest run: unet_tiny at 32 px, aot_eager, 1 repeat, 1 warm-up step")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.backend, args.repeats, args.warmup = ["unet_tiny"], "aot_eager", 1, 1
    args.options = {"backend": args.backend, **({"mode": args.mode} if args.mode else {})}
    if args.inductor_option:
        pairs = [text.partition("=") for text in args.inductor_option]
        bad = [key for key, sep, _ in pairs if not (key and sep)]
        if bad:
            parser.error(f"--inductor-option: expected KEY=VALUE, got {bad}")
        args.options["options"] = {key: yaml.safe_load(value) for key, _, value in pairs}  # true, 4, a name
    try:  # the checks a config's compile: section gets (mode with options, unknown inductor options)
        compile_options(args.options, "--mode/--inductor-option")
    except OarsError as err:
        parser.error(str(err))
    if args.repeats < 1 or args.warmup < 1:
        parser.error(f"--repeats and --warmup must be at least 1, got {args.repeats} and {args.warmup}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    options = args.options
    what = ("model.train_step (mmengine)" if args.whole_step else "the forward in loss mode"
            + ("" if args.eager_optimizer else " and the optimizer step") + " (oars)")
    print(f"torch.compile({options}) of {what} vs eager, torch threads {torch.get_num_threads()}, "
          f"{args.repeats} timed steps each")
    ratios: dict[str, float] = {}
    for name in args.models:
        size = args.size or CASES[name][3][0]
        batch = args.batch or CASES[name][3][1]
        torch._dynamo.reset()  # each family compiles from scratch
        result = compiled_vs_eager(name, size, batch, args.device, args.repeats, args.warmup, options,
                                   args.whole_step, args.cfg_options, args.eager_optimizer, args.channels_last)
        print(report(name, size, batch, result, args.device), flush=True)
        ratios[name] = result["compiled"][0] / result["eager"][0]
    print("ratios compiled / eager (wall): " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
