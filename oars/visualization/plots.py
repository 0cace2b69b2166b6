"""Report plots (confusion matrix, per-class bars) drawn with matplotlib's Agg canvas.

Figures are built with ``matplotlib.figure.Figure`` directly, never pyplot, so no global backend or
figure state is touched and the functions are safe in workers and headless runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _finish(fig: Figure, out_path: str | Path | None) -> np.ndarray:
    """Render to a BGR uint8 array and, if asked, save a PNG (parent folders created)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    if out_path is not None:
        path = Path(out_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format='png')
    return np.ascontiguousarray(rgba[..., 2::-1])


def plot_confusion_matrix(cm: np.ndarray, class_names: Sequence[str], normalize: bool = True,
                          out_path: str | Path | None = None, title: str = 'Confusion matrix') -> np.ndarray:
    """Plot a confusion matrix (rows = ground truth, columns = prediction).

    With ``normalize`` each row is divided by its sum (recall per class; empty rows stay 0). Cell
    values are written when there are at most 30 classes. Returns the plot as a BGR uint8 image and
    writes a PNG to ``out_path`` when given.
    """
    cm = np.asarray(cm, dtype=np.float64)
    names = [str(n) for n in class_names]
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f'plot_confusion_matrix: cm must be a square 2-D matrix, got shape {cm.shape}')
    if cm.shape[0] != len(names):
        raise ValueError(f'plot_confusion_matrix: cm is {cm.shape[0]}x{cm.shape[1]} but {len(names)} class '
                         'names were given')
    if not np.isfinite(cm).all() or (cm < 0).any():
        raise ValueError('plot_confusion_matrix: cm must hold finite, non-negative counts')
    if normalize:
        rows = cm.sum(axis=1, keepdims=True)
        cm = np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)

    n = len(names)
    side = min(max(4.0, 0.5 * n + 2.0), 20.0)
    fig = Figure(figsize=(side + 1.0, side), dpi=100, layout='constrained')
    ax = fig.add_subplot()
    im = ax.imshow(cm, cmap='Blues', vmin=0.0, vmax=1.0 if normalize else max(cm.max(), 1.0))
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set(xticks=range(n), yticks=range(n), xlabel='Predicted', ylabel='Ground truth', title=title)
    ax.set_xticklabels(names, rotation=45, ha='right')
    ax.set_yticklabels(names)
    if n <= 30:
        threshold = (1.0 if normalize else cm.max()) / 2.0
        for (r, c), v in np.ndenumerate(cm):
            text = f'{v:.2f}' if normalize else f'{v:.0f}'
            ax.text(c, r, text, ha='center', va='center', fontsize=8,
                    color='white' if v > threshold else 'black')
    return _finish(fig, out_path)


def plot_per_class_bars(values: Mapping[str, float], title: str,
                        out_path: str | Path | None = None, ylabel: str = '') -> np.ndarray:
    """Bar chart of one number per class (e.g. IoU, AP), value written on each bar.

    NaN values (a class absent from the evaluation) get no bar and the label ``n/a``. Returns the plot
    as a BGR uint8 image and writes a PNG to ``out_path`` when given.
    """
    if not values:
        raise ValueError('plot_per_class_bars: values is empty; expected {class name: number}')
    names = [str(k) for k in values]
    try:
        nums = np.array([float(v) for v in values.values()], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f'plot_per_class_bars: every value must be a number: {err}') from None
    bad = [n for n, v in zip(names, nums) if math.isinf(v)]
    if bad:
        raise ValueError(f'plot_per_class_bars: infinite values for {bad}')

    fig = Figure(figsize=(min(max(4.0, 0.45 * len(names) + 1.5), 24.0), 4.0), dpi=100, layout='constrained')
    ax = fig.add_subplot()
    heights = np.nan_to_num(nums, nan=0.0)
    bars = ax.bar(range(len(names)), heights, color='tab:blue')
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45 if len(names) > 6 else 0, ha='right' if len(names) > 6 else 'center')
    ax.set(title=title, ylabel=ylabel)
    finite = nums[np.isfinite(nums)]
    top = max(float(finite.max()) if finite.size else 1.0, 0.0)
    bottom = min(float(finite.min()) if finite.size else 0.0, 0.0)
    ax.set_ylim(bottom, (top if top > 0 else 1.0) * 1.12)
    for bar, v in zip(bars, nums):
        label = 'n/a' if math.isnan(v) else (f'{v:.3f}' if abs(v) < 10 else f'{v:.1f}')
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha='center', va='bottom',
                    fontsize=8, xytext=(0, 2), textcoords='offset points')
    return _finish(fig, out_path)
