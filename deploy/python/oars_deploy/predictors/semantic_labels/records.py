"""The record of the ``semantic_labels`` plug-in: one image's label map in results.jsonl."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from oars_deploy.records import ResultRecord


@dataclass(eq=False)  # array fields: compare to_json() instead
class SemanticLabelsRecord(ResultRecord):
    """An image's label map (``predictor: semantic_labels``).

    The map itself is the label PNG written beside results.jsonl (``label_png``, a name relative to the results
    folder: class ids as palette indices, lossless, read with PIL as indices), not an RLE in the line. Why: the
    PNG is written anyway, it is smaller than per-class RLEs of a full-size map, and a line stays short for any
    image size. The line carries what a consumer needs without opening it: the size and the pixels per class.

    JSON: ``{"predictor", "input", "image_size": [H, W], "label_png": "<stem>.png", "classes": [{"label",
    "class", "pixels"}]}`` (the classes present, by label id); ``<stem>`` is unique per input and may hold a
    subfolder (``a/x.png`` for ``twins/a/x.png`` in a run over ``twins/**``,
    :func:`oars_deploy.output_paths.output_stems`).
    """

    predictor: ClassVar[str] = "semantic_labels"
    input: str
    image_size: tuple[int, int]
    label_png: str
    pixel_counts: np.ndarray
    classes: Sequence[str]

    def to_json(self) -> dict:
        """See the class docstring."""
        names = list(self.classes)
        present = [{"label": i, "class": names[i] if i < len(names) else str(i), "pixels": int(n)}
                   for i, n in enumerate(np.asarray(self.pixel_counts).tolist()) if n > 0]
        return {"predictor": self.predictor, "input": self.input, "image_size": [int(v) for v in self.image_size],
                "label_png": self.label_png, "classes": present}


def semantic_labels_result(path: str, label: np.ndarray, classes: Sequence[str],
                           label_png: str) -> SemanticLabelsRecord:
    """The record of one image's label map (the same for tools/infer.py and oars-infer).

    Args:
        path: the image file. label: int [H, W] class ids in original pixels. classes: class names by id.
        label_png: the label PNG's name relative to the results folder (``<stem>.png``).
    """
    label = np.asarray(label)
    counts = np.bincount(label.reshape(-1).astype(np.int64), minlength=len(classes)) if label.size else \
        np.zeros(len(classes), np.int64)
    return SemanticLabelsRecord(input=path, image_size=(int(label.shape[0]), int(label.shape[1])),
                                label_png=label_png, pixel_counts=counts, classes=list(classes))
