"""Training speed of the YOLOv3 demo config when other processes load the CPU, before and after oars' thread setup.

OpenMP (libgomp, which torch's CPU kernels use) lets idle threads spin-wait for the next parallel region. Beside
other busy processes a spinning thread holds a core that the thread the others wait for needs, and iterations
stretch to many times their idle time. ``import oars`` sets ``GOMP_SPINCOUNT=100000`` (unless the user set it or
``OMP_WAIT_POLICY``) before torch loads libgomp, which reads it once, when it is loaded.

Each measurement is a fresh training process (the YOLOv3 demo config, generated demo data, its own 2 DataLoader
workers) with 0 or ``--busy`` busy-loop processes beside it:
- ``today``: torch imported before oars, so libgomp keeps its default spin count (300,000): what every run did before;
- ``oars``: oars imported first, as ``tools/*.py`` do.
Prints seconds per iteration (median over ``--iters`` after ``--warmup``, then over ``--repeats`` runs), the
slowdown ratio busy / idle for each (goal for ``oars`` <= 2.5), and oars' idle time against today's (goal within 5%).

    python benchmarks/contention.py [--iters 10] [--warmup 3] [--busy 2] [--repeats 3] [--threads 0]

``--busy 0`` runs the idle measurements only; ``--threads N`` sets each run's OMP_NUM_THREADS (default: unset,
one thread per core). The cheapest check that the runs work: ``--iters 1 --warmup 1 --busy 0 --repeats 1
--threads 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
BATCH = 8  # images per iteration (set here: the demo config's own batch size, 4, may change)
MODES = ("today", "oars")  # torch imported before oars (libgomp's default spin count), oars first


def run_overrides(data: str) -> list[str]:
    """The demo config's overrides for one measured run on the demo set ``data``: batches of ``BATCH`` and one
    epoch of training alone (no validation: mmengine validates after the last epoch unless val_begin is later; no
    checkpoint, no schedule)."""
    overrides = [f"{split}.dataset.data_root={data}" for split in ("train_dataloader", "val_dataloader",
                                                                   "test_dataloader")]
    return overrides + [f"train_dataloader.batch_size={BATCH}", "train_cfg.max_epochs=1",
                        "train_cfg.val_interval=1000", "train_cfg.val_begin=1000",
                        "default_hooks.checkpoint.interval=1000", "default_hooks.checkpoint.save_last=false",
                        "default_hooks.logger.interval=1000", "param_scheduler=[]"]


def _child(mode: str, data: str, iters: int, warmup: int) -> None:
    """One timed training run; prints ``{"s_per_iter": ...}`` as its last line."""
    sys.path.insert(0, ROOT)
    if mode == "today":
        import torch  # noqa: F401  (loads libgomp before oars can choose its wait policy)
    else:
        import oars  # noqa: F401  (first, as in tools/*.py)
    policy = os.environ.get("GOMP_SPINCOUNT", "(libgomp default)") if mode == "oars" else "(libgomp default)"
    from mmengine.hooks import Hook

    from oars.engine.entry import load
    from oars.engine.runner import build_runner, prepare_config

    stamps: list[float] = []

    class Stamp(Hook):
        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as work:
        runner = build_runner(prepare_config(load(CONFIG, run_overrides(data)), work_dir=work))
        runner.register_hook(Stamp(), priority="LOWEST")
        runner.train()
    steps = [b - a for a, b in zip(stamps, stamps[1:])][warmup - 1:warmup - 1 + iters]
    print(json.dumps({"s_per_iter": statistics.median(steps), "n": len(steps),
                      "policy": policy}))


def _measure(mode: str, data: str, busy: int, iters: int, warmup: int, threads: int = 0) -> float:
    """Seconds per iteration of one training run in a fresh process beside ``busy`` busy-loop processes.

    Args:
        mode: ``today`` or ``oars`` (see the module docstring).
        data: the generated demo set the run trains on.
        busy, iters, warmup: as the command-line options.
        threads: the run's OMP_NUM_THREADS (0: unset, so torch uses one thread per core, where spinning matters).
    """
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--data", data,
                               "--iters", str(iters), "--warmup", str(warmup)],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["s_per_iter"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; counts below 1 (``--warmup``: the first iteration has no start stamp) are usage errors."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=10, help="timed iterations per run")
    parser.add_argument("--warmup", type=int, default=3,
                        help="iterations left out at the start of each run (at least 1: the first is never timed)")
    parser.add_argument("--busy", type=int, default=2,
                        help="busy-loop processes beside the loaded runs (0: idle runs only, no slowdown)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode and load (the median is reported)")
    parser.add_argument("--threads", type=int, default=0,
                        help="OMP_NUM_THREADS of each training run; default 0: unset (one thread per core, the case "
                             "measured: with one thread there is no spinning to measure)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("iters", "warmup", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.busy < 0 or args.threads < 0:
        parser.error(f"--busy and --threads must be 0 or more, got {args.busy} and {args.threads}")
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        _child(args.child, args.data, args.iters, args.warmup)
        return
    sys.path.insert(0, ROOT)
    from oars.data.demo_shapes import generate

    loads = sorted({0, args.busy})  # --busy 0: the idle runs alone
    with tempfile.TemporaryDirectory() as data:
        generate(data, num_train=BATCH * (args.iters + args.warmup + 1), num_val=8, seed=0)
        print(f"YOLOv3 demo config, batch {BATCH}, {os.cpu_count()} CPUs; {args.iters} timed iterations per run")
        runs: dict[tuple[str, int], list[float]] = {}
        for busy in loads:
            for _ in range(args.repeats):  # interleaved, so a disturbance hits both modes alike
                for mode in MODES:
                    runs.setdefault((mode, busy), []).append(_measure(mode, data, busy, args.iters, args.warmup,
                                                                              args.threads))
            for mode in MODES:
                listed = ", ".join(f"{v:.3f}" for v in runs[mode, busy])
                print(f"  {mode:5s} with {busy} busy processes: {statistics.median(runs[mode, busy]):.3f} s/iteration "
                      f"(median of {listed})", flush=True)
        results = {key: statistics.median(values) for key, values in runs.items()}
    if args.busy:
        for mode in MODES:
            print(f"{mode:5s}: slowdown with {args.busy} busy processes "
                  f"{results[mode, args.busy] / results[mode, 0]:.2f}x")
    print(f"oars idle / today idle: {results['oars', 0] / results['today', 0]:.3f} (goal <= 1.05)"
          + ("; oars slowdown goal <= 2.5x" if args.busy else ""))


if __name__ == "__main__":
    main()
