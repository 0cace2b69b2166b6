"""What the Datasets room counts in one packed sample (``Pack*Inputs``' ``data_samples``), whatever the model
learns: the class ids it holds, and the size of each labelled thing — a box's side (sqrt of its area, pixels) or a
label map's per-class area (fraction of the image) — for the histogram.

Why duck-typed fields: the packed sample's ground-truth fields (``gt_instances`` with ``labels``/``bboxes``,
``gt_sem_seg``, ``gt_label``) are the data-element conventions every task's pipeline packs into, so reading them
needs no task; a sample with none of them counts nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

BOX_SIZES = "box size (sqrt of area, px)"
MASK_AREAS = "mask area (fraction of the image)"
IGNORE_LABELS = (255,)  # label-map value that marks unlabelled pixels


def _array(value: Any) -> np.ndarray:
    value = getattr(value, "tensor", value)  # box structures keep their tensor in ``tensor``
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def sample_labels(packed: Any) -> tuple[list[int], str | None, list[float]]:
    """``(class ids, size kind, sizes)`` of one packed sample (``{"inputs", "data_samples"}``).

    Returns:
        The class id of every labelled thing (an instance, a class present in a label map, the sample's label),
        :data:`BOX_SIZES` or :data:`MASK_AREAS` (None: no sizes) and the sizes.
    """
    data = packed.get("data_samples") if isinstance(packed, dict) else None
    if data is None:
        return [], None, []
    instances = getattr(data, "gt_instances", None)
    if instances is not None and getattr(instances, "labels", None) is not None:
        labels = _array(instances.labels).reshape(-1).astype(int).tolist()
        boxes = getattr(instances, "bboxes", None)
        sizes: list[float] = []
        if boxes is not None:
            arr = _array(boxes).reshape(-1, 4).astype(float)
            sizes = np.sqrt(np.clip(arr[:, 2] - arr[:, 0], 0, None) * np.clip(arr[:, 3] - arr[:, 1], 0, None)).tolist()
        return labels, (BOX_SIZES if sizes else None), sizes
    seg = getattr(data, "gt_sem_seg", None)
    if seg is not None and getattr(seg, "data", None) is not None:
        label_map = _array(seg.data).reshape(-1)
        ids, counts = np.unique(label_map, return_counts=True)
        keep = [(int(i), int(n)) for i, n in zip(ids, counts) if int(i) not in IGNORE_LABELS]
        total = max(1, label_map.size)
        return [i for i, _ in keep], MASK_AREAS, [n / total for _, n in keep]
    label = getattr(data, "gt_label", None)
    if label is not None:
        return _array(label).reshape(-1).astype(int).tolist(), None, []
    return [], None, []


def histogram_png(sizes: list[float], kind: str | None, out: Path, bins: int = 30) -> Path:
    """A small histogram of ``sizes`` (matplotlib, Agg canvas, no pyplot state) written to ``out``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 2.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.hist(np.asarray(sizes, dtype=float), bins=bins, color="#0b62c4")
    ax.set(xlabel=kind or "size", ylabel="count", title=f"{len(sizes)} labelled things")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
