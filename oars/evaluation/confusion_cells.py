"""Which images fall in each cell of a confusion matrix: ``confusion_cells.json``, written beside ``report.html``.

Why a file of its own: the report draws the matrix as a picture and a table of counts, which says how many pixels,
boxes or clips were confused, not where. A task's report hook already computes the matrix image by image; it hands
those per-image matrices to :func:`write_cells` (the same computation, no second pass over the data), and a reader
(the studio's Evaluate page: click a cell, see its images) gets them back with :func:`read_cells`.

The format (one JSON object)::

    {"classes": [...],                      # row/column names, in matrix order
     "axis": "rows ground truth, columns prediction",
     "unit": "pixels" | "boxes" | "clips",  # what a count counts
     "limit": 50,                           # at most this many images kept per cell
     "cells": {"i,j": [[image, count], ...]},   # non-zero cells only; count descending, ties in input order
     "totals": {"i,j": [count, images]}}       # every image counted, also those beyond the limit

Summing ``totals`` gives the report's matrix. ``image`` is the path the evaluation read (or a name when it had none).
"""

from __future__ import annotations

import json
import os
import os.path as osp
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oars.errors import OarsError

CELLS_FILE = "confusion_cells.json"
MAX_PER_CELL = 50
AXIS = "rows ground truth, columns prediction"
UNITS = ("pixels", "boxes", "clips")

Counts = Any  # a [C, C] array (numpy or torch) or an iterable of (row, column, count) triples


class CellsFileError(OarsError):
    """A confusion_cells.json that is missing, not JSON, or not in the format :func:`write_cells` writes."""


def cells_path(report_file: str | os.PathLike) -> str:
    """Where the cells of ``report_file`` go: ``confusion_cells.json`` in the report's folder."""
    return osp.join(osp.dirname(osp.abspath(report_file)), CELLS_FILE)


def sparse_counts(counts: Counts) -> list[tuple[int, int, int]]:
    """The non-zero cells of one image's counts as ``(row, column, count)`` (small to keep per image).

    Args:
        counts: a [C, C] matrix (numpy or torch) or already an iterable of triples.
    """
    if hasattr(counts, "detach"):  # a torch tensor, without importing torch here
        counts = counts.detach().cpu().numpy()
    if isinstance(counts, np.ndarray):
        matrix = np.asarray(counts)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"confusion counts must be a square [C, C] matrix, got shape {matrix.shape}")
        rows, cols = np.nonzero(matrix)
        return [(int(i), int(j), int(matrix[i, j])) for i, j in zip(rows, cols)]
    return [(int(i), int(j), int(c)) for i, j, c in counts if int(c) != 0]


def write_cells(path: str | os.PathLike, classes: Iterable[str], unit: str,
                per_image: Iterable[tuple[str, Counts]], limit: int = MAX_PER_CELL) -> str:
    """Write which images fall in each cell of a confusion matrix.

    Args:
        path: the JSON file to write (its folder is created).
        classes: the C row/column names, in matrix order.
        unit: what a count counts, one of :data:`UNITS`.
        per_image: ``(image, counts)`` per image: a [C, C] matrix (rows ground truth) or ``(row, column, count)``
            triples. An image given twice (several clips of one video) has its counts added up.
        limit: the most images kept per cell (those with the largest counts).

    Returns:
        ``path``.

    Raises:
        ValueError: an unknown unit, a cell outside the matrix, or a negative count (a bug in the caller).
    """
    names = [str(c) for c in classes]
    if unit not in UNITS:
        raise ValueError(f"confusion cells: unit must be one of {UNITS}, got {unit!r}")
    n = len(names)
    cells: dict[tuple[int, int], dict[str, int]] = {}
    for image, counts in per_image:
        for i, j, c in sparse_counts(counts):
            if not (0 <= i < n and 0 <= j < n) or c < 0:
                raise ValueError(f"confusion cells: image {image!r} has count {c} at ({i}, {j}); the matrix is "
                                 f"{n}x{n} with counts >= 0")
            cell = cells.setdefault((i, j), {})
            cell[str(image)] = cell.get(str(image), 0) + c
    body = {"classes": names, "axis": AXIS, "unit": unit, "limit": int(limit), "cells": {}, "totals": {}}
    for (i, j), images in sorted(cells.items()):
        ranked = sorted(images.items(), key=lambda kv: -kv[1])  # stable: ties keep the order images came in
        body["cells"][f"{i},{j}"] = [[name, count] for name, count in ranked[:limit]]
        body["totals"][f"{i},{j}"] = [sum(images.values()), len(images)]
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(body, f)
    return str(path)


@dataclass
class ConfusionCells:
    """What :func:`read_cells` reads: the matrix's names, unit and each cell's images."""

    classes: list[str]
    unit: str
    axis: str = AXIS
    limit: int = MAX_PER_CELL
    cells: dict[tuple[int, int], list[tuple[str, int]]] = field(default_factory=dict)
    totals: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def images(self, i: int, j: int) -> list[tuple[str, int]]:
        """The images of cell ``(i, j)`` (row ground truth ``i``, prediction ``j``), largest count first."""
        return self.cells.get((i, j), [])

    def total(self, i: int, j: int) -> tuple[int, int]:
        """``(count, images)`` of cell ``(i, j)`` over every image, also those beyond the limit."""
        return self.totals.get((i, j), (0, 0))

    def matrix(self) -> np.ndarray:
        """The [C, C] counts (the report's matrix)."""
        out = np.zeros((len(self.classes), len(self.classes)), dtype=np.int64)
        for (i, j), (count, _) in self.totals.items():
            out[i, j] = count
        return out


def _key(raw: str, n: int, path: str) -> tuple[int, int]:
    try:
        i, j = (int(v) for v in raw.split(","))
    except ValueError:
        raise CellsFileError(f"{path}: cell key {raw!r} is not 'row,column'") from None
    if not (0 <= i < n and 0 <= j < n):
        raise CellsFileError(f"{path}: cell {raw!r} is outside the {n}x{n} matrix")
    return i, j


def read_cells(path: str | os.PathLike) -> ConfusionCells:
    """Read a ``confusion_cells.json`` written by :func:`write_cells`.

    Raises:
        CellsFileError: naming the file and what is wrong with it.
    """
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
    except OSError as err:
        raise CellsFileError(f"{path}: cannot read it ({err.strerror or err})") from None
    except ValueError as err:
        raise CellsFileError(f"{path}: not JSON ({err})") from None
    if not isinstance(body, dict) or not isinstance(body.get("classes"), list) or body.get("unit") not in UNITS \
            or not isinstance(body.get("cells"), dict):
        raise CellsFileError(f"{path}: expected an object with 'classes' (a list), 'unit' (one of {UNITS}) and "
                             "'cells' (an object), as oars.evaluation.confusion_cells.write_cells writes")
    n = len(body["classes"])
    try:
        cells = {_key(k, n, str(path)): [(str(name), int(count)) for name, count in v]
                 for k, v in body["cells"].items()}
        totals = {_key(k, n, str(path)): (int(v[0]), int(v[1])) for k, v in (body.get("totals") or {}).items()}
    except (TypeError, ValueError) as err:
        raise CellsFileError(f"{path}: a cell is not a list of [image, count] ({err})") from None
    for key, images in cells.items():  # a file without totals (older or hand-made): what the lists hold
        totals.setdefault(key, (sum(c for _, c in images), len(images)))
    return ConfusionCells([str(c) for c in body["classes"]], body["unit"], str(body.get("axis", AXIS)),
                          int(body.get("limit", MAX_PER_CELL)), cells, totals)
