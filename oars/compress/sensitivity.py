"""Sensitivity analysis (PaddleSlim's ``sensitivity``): for each layer group, the validation metric when only that
group is pruned by each ratio (0.1 ... 0.9), the rest of the network whole; every point a pruned copy scored by the
caller (automatic pruning's proxy: BatchNorm re-calibration, then a few validation batches).

The curves say where channels are cheap: a flat curve is a group that can lose most of its channels; a steep one is
where pruning hurts. Written as ``sensitivity.json`` (the table) and ``sensitivity.png`` (one line per group).
"""

from __future__ import annotations

import io
import json
import os.path as osp
from collections.abc import Callable, Sequence
from typing import Any

from oars_deploy.atomic import atomic_write

JSON_FILE, PNG_FILE = "sensitivity.json", "sensitivity.png"


def sensitivity_curves(groups: Sequence[str], ratios: Sequence[float], score: Callable[[int, float], float],
                       log: Callable[[str], None] = print) -> dict[str, list[list[float]]]:
    """``{group: [[ratio, metric], ...]}``, ``score(group_index, ratio)`` called once per group and ratio (ratio 0,
    the unpruned model, is the caller's baseline and is not part of the curves)."""
    curves: dict[str, list[list[float]]] = {}
    for index, name in enumerate(groups):
        curves[name] = []
        for ratio in ratios:
            value = float(score(index, float(ratio)))
            curves[name].append([float(ratio), value])
            log(f"sensitivity: {name} pruned by {ratio:g}: {value:.4g}")
    return curves


def most_sensitive(curves: dict[str, list[list[float]]], baseline: float, at: float = 0.5) -> tuple[str, float]:
    """The group whose metric falls most when pruned by the ratio closest to ``at``, and the fall."""
    def drop(points: list[list[float]]) -> float:
        ratio, value = min(points, key=lambda p: abs(p[0] - at))
        return baseline - value

    name = max(curves, key=lambda g: drop(curves[g]))
    return name, drop(curves[name])


def write_sensitivity(folder: str, curves: dict[str, list[list[float]]], baseline: float, metric: str,
                      layers: dict[str, list[str]]) -> dict[str, Any]:
    """Write ``folder/sensitivity.json`` (metric, baseline, curves, the layers of each group) and
    ``folder/sensitivity.png`` (one line per group; skipped with a message when matplotlib is missing). Returns the
    JSON's content with ``png`` (its path, or None)."""
    data: dict[str, Any] = {"metric": metric, "baseline": baseline, "curves": curves, "groups": layers}
    atomic_write(osp.join(folder, JSON_FILE), json.dumps(data, indent=2) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sensitivity: matplotlib is not installed; no sensitivity.png (the table is in sensitivity.json)")
        return {**data, "png": None}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        ax.plot([0.0] + [p[0] for p in points], [baseline] + [p[1] for p in points], marker="o", label=name)
    ax.set_xlabel("prune ratio of the group's channels")
    ax.set_ylabel(f"{metric} (after BatchNorm re-calibration)")
    ax.set_title("Sensitivity per layer group")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    png = osp.join(folder, PNG_FILE)
    atomic_write(png, buf.getvalue())
    return {**data, "png": png}


__all__ = ["JSON_FILE", "PNG_FILE", "most_sensitive", "sensitivity_curves", "write_sensitivity"]
