"""Per-class precision-recall curves, drawn with matplotlib's Agg canvas (no pyplot state, as plots.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .plots import _finish


def plot_pr_curves(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], title: str = 'Precision-recall',
                   ap: Mapping[str, float] | None = None, out_path: str | Path | None = None) -> np.ndarray:
    """One line per class: ``{name: (recall, precision)}`` (equal-length arrays, NaN points dropped).

    ``ap`` (``{name: value}``, fractions 0–1 as every metric of the suite) is shown in the legend with three
    decimals; the caller's ``title`` names it (e.g. ``(legend: AP, 0–1)``). Classes without points are listed in the
    legend as ``n/a``. Returns the plot as a BGR uint8 image and writes a PNG to ``out_path`` when given.
    """
    if not curves:
        raise ValueError('plot_pr_curves: curves is empty; expected {class name: (recall, precision)}')
    n = len(curves)
    legend_cols = max(1, math.ceil(n / 20))
    fig = Figure(figsize=(6.0 + 1.6 * legend_cols, 5.0), dpi=100, layout='constrained')
    ax = fig.add_subplot()
    colours = [f'C{i % 10}' for i in range(n)]
    styles = ['-', '--', ':', '-.']
    for i, (name, (recall, precision)) in enumerate(curves.items()):
        r = np.asarray(recall, dtype=np.float64).reshape(-1)
        p = np.asarray(precision, dtype=np.float64).reshape(-1)
        if r.shape != p.shape:
            raise ValueError(f'plot_pr_curves: class {name!r} has {r.size} recall but {p.size} precision values')
        ok = np.isfinite(r) & np.isfinite(p)
        label = str(name)
        if ap is not None and name in ap:
            v = float(ap[name])
            label += ' (n/a)' if math.isnan(v) else f' ({v:.3f})'
        elif not ok.any():
            label += ' (n/a)'
        ax.plot(r[ok], p[ok], color=colours[i], linestyle=styles[(i // 10) % len(styles)], linewidth=1.4, label=label)
    ax.set(xlim=(0.0, 1.0), ylim=(0.0, 1.02), xlabel='Recall', ylabel='Precision', title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), fontsize=7 if n > 10 else 8, ncol=legend_cols,
              frameon=False)
    return _finish(fig, out_path)
