"""What ``torch.compile`` gives torchvision's own ResNet on this machine: the compiler's ratio on a bare network, the
reference for the oars ratios of ``benchmarks/compile_step.py``.

Why: ``compile_step.py`` measures compiled / eager through oars (the config's model, its data preprocessor, the
optimizer wrapper). Whether a ratio above the 0.75 goal is oars' doing or the compiler's ceiling on the hardware
is answered by the same measurement without oars: torchvision's ``resnet50`` (random weights, nothing
downloaded), a classification step on a random batch (cross-entropy, SGD with momentum 0.9 and weight decay 1e-4
as TSN's config), three copies in one process, timed alternately:

- ``eager``: the step as PyTorch runs it;
- ``torch.compile``: ``torch.compile(model)`` with torch's defaults, the optimizer eager (what a user writes);
- ``oars settings``: the model compiled with oars' CPU defaults (``oars.engine.compile.with_device_defaults``:
  inductor's ``layout_optimization`` off) and the optimizer step compiled (``compile_optimizer_steps``), as
  ``compile: true`` runs it.

The learning rate is 1e-30 (``compile_step.FROZEN_LR``): every step does the same arithmetic on the same weights.

    python benchmarks/compile_reference.py [--arch resnet50] [--batch 8] [--size 224] [--repeats 10]
        [--backend inductor] [--channels-last]
    python benchmarks/compile_reference.py --quick   # resnet18, 2 x 32 px, aot_eager, 1 repeat

Prints the compile time of each compiled side, ms per step (median), and each side's ratio to eager.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import time_alternating  # noqa: E402
from benchmarks.compile_step import FROZEN_LR  # noqa: E402

ARCHS = ("resnet18", "resnet50")
NUM_CLASSES = 400  # Kinetics-400, TSN's head


def build_side(arch: str, channels_last: bool):
    """A torchvision ``arch`` (train mode, random weights, :data:`NUM_CLASSES` outputs) and its mmengine
    ``OptimWrapper`` (SGD at :data:`FROZEN_LR`), channels-last first when asked (as the runner: before the
    optimizer)."""
    import torchvision
    from mmengine.optim import OptimWrapper

    from oars.engine.memory_format import apply_channels_last

    torch.manual_seed(0)  # the three sides start from the same weights
    model = getattr(torchvision.models, arch)(weights=None, num_classes=NUM_CLASSES).train()
    if channels_last:
        apply_channels_last(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=FROZEN_LR, momentum=0.9, weight_decay=1e-4)
    return model, OptimWrapper(optimizer)


def measure(arch: str, batch: int, size: int, repeats: int, backend: str, channels_last: bool) -> dict:
    """Time the three sides. Returns ``{'compile_s': {side: s}, 'ms': {side: (wall, cpu)}, 'loss_diff': {side: x}}``
    (``loss_diff``: the largest relative difference of a compiled side's loss from eager's on the last step)."""
    from oars.engine.compile import compile_optimizer_steps, with_device_defaults

    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, NUM_CLASSES, (batch,))
    plain_options = {"backend": backend}
    models, wrappers, forwards = {}, {}, {}
    for side in ("eager", "torch.compile", "oars settings"):
        models[side], wrappers[side] = build_side(arch, channels_last)
    forwards["eager"] = models["eager"]
    forwards["torch.compile"] = torch.compile(models["torch.compile"], **plain_options)
    oars_options = with_device_defaults(plain_options, models["oars settings"])
    forwards["oars settings"] = torch.compile(models["oars settings"], **oars_options)
    compile_optimizer_steps(wrappers["oars settings"], oars_options)
    losses: dict[str, float] = {}

    def step(side: str):
        def run() -> None:
            loss = torch.nn.functional.cross_entropy(forwards[side](images), labels)
            wrappers[side].update_params(loss)  # backward, step, zero_grad
            losses[side] = float(loss.detach())
        return run

    steps = {side: step(side) for side in forwards}
    compile_s = {}
    for side in ("torch.compile", "oars settings"):
        start = time.perf_counter()
        for _ in range(2):  # the first step traces the forward; the second the optimizer with its state
            steps[side]()
        compile_s[side] = time.perf_counter() - start
    ms = time_alternating(steps, repeats, "cpu", warmup=1)
    diff = {side: abs(losses[side] - losses["eager"]) / max(abs(losses["eager"]), 1e-6)
            for side in ("torch.compile", "oars settings")}
    return {"compile_s": compile_s, "ms": ms, "loss_diff": diff}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=ARCHS, default="resnet50")
    parser.add_argument("--batch", type=int, default=8, help="images per step (default 8: TSN's 8 frames)")
    parser.add_argument("--size", type=int, default=224, help="image side in px (default 224)")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps of each side (at least 1)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    parser.add_argument("--channels-last", action="store_true",
                        help="4-D weights channels-last on every side (oars' channels_last: true)")
    parser.add_argument("--quick", action="store_true", help="the cheapest run: resnet18, 2 x 32 px, aot_eager")
    args = parser.parse_args(argv)
    if args.quick:
        args.arch, args.batch, args.size, args.repeats, args.backend = "resnet18", 2, 32, 1, "aot_eager"
    if min(args.batch, args.size, args.repeats) < 1:
        parser.error(f"--batch, --size and --repeats must be at least 1, got {args.batch}, {args.size}, "
                     f"{args.repeats}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    layout = "channels-last" if args.channels_last else "contiguous"
    print(f"torchvision {args.arch}, {args.batch} x {args.size} px, {layout}, cpu, backend {args.backend}, "
          f"torch threads {torch.get_num_threads()}, {args.repeats} timed steps each")
    result = measure(args.arch, args.batch, args.size, args.repeats, args.backend, args.channels_last)
    eager_wall, eager_cpu = result["ms"]["eager"]
    print(f"  {'eager':<14}: {eager_wall * 1000:9.1f} ms/step, {eager_cpu * 1000:9.1f} ms CPU")
    for side in ("torch.compile", "oars settings"):
        wall, cpu = result["ms"][side]
        print(f"  {side:<14}: {wall * 1000:9.1f} ms/step, {cpu * 1000:9.1f} ms CPU; compile + warm-up "
              f"{result['compile_s'][side]:.1f} s; ratio to eager {wall / eager_wall:6.3f} (CPU time "
              f"{cpu / eager_cpu:6.3f}); loss vs eager {result['loss_diff'][side]:.1e}")


if __name__ == "__main__":
    main()
