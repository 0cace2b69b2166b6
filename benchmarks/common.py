"""Helpers shared by the benchmarks: the repository root and the demo data they run on."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_demo_data(root: str = os.path.join(ROOT, "data", "demo_shapes")) -> str:
    """The generated demo shapes set (written once; a matching meta.json skips regeneration)."""
    from oars.data.demo_shapes import generate

    generate(root)
    return root



def time_alternating(steps: dict[str, Callable[[], None]], repeats: int, device: str,
                     warmup: int = 2) -> dict[str, tuple[float, float]]:
    """Run each step ``warmup`` times, then ``repeats`` rounds in turn (a, b, a, b, ...: drift in machine speed hits
    every side alike). Returns ``{name: (median wall seconds, median CPU seconds of this process)}``."""
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    for _ in range(max(warmup, 1)):
        for fn in steps.values():
            fn()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, fn in steps.items():
            sync()
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            sync()
            times[name].append((time.perf_counter() - start, time.process_time() - cpu))
    return {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}


def print_step_times(medians: dict[str, tuple[float, float]], labels: dict[str, str], device: str,
                     goals: dict[str, float]) -> None:
    """One line per side (ms per step; CPU time too on the CPU, the steadier measure on shared cores) and the ratio
    ``oars / other`` for each ``other`` in ``goals`` (with its goal)."""
    on_cpu = not str(device).startswith("cuda")
    for name, (wall, cpu) in medians.items():
        extra = f", {cpu * 1000:9.1f} ms CPU time" if on_cpu else ""
        print(f"  {labels[name]:<18}: {wall * 1000:9.1f} ms/step (median){extra}")
    oars_wall, oars_cpu = medians["oars"]
    for other, goal in goals.items():
        if other in medians:
            wall, cpu = medians[other]
            extra = f", CPU time {oars_cpu / cpu:6.3f}" if on_cpu else ""
            print(f"  ratio oars / {other:<11}: {oars_wall / wall:6.3f}{extra}  (goal <= {goal})")
