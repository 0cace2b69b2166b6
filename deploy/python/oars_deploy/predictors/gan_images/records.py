"""The record of the ``gan_images`` plug-in: the pictures a generator made from one input, in results.jsonl."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from oars_deploy.records import ResultRecord


@dataclass
class GANImagesRecord(ResultRecord):
    """The pictures a generator made from one input (``predictor: gan_images``).

    JSON: ``{"predictor", "input", "images": [names relative to the results folder], "seed", "index", "label",
    "class", "attrs", "src_attrs"}``. Noise models: one line per sample, ``input`` null, ``images``
    ``["sample_XXX.png"]``, ``seed`` and ``index`` (the row of the seeded noise), ``label``/``class`` for a
    class-conditional model (grid.png is the samples together, not a line). Image models: one line per image,
    ``images`` ``["<stem>.png", "<stem>_pair.png"]``, ``attrs``/``src_attrs`` ``{name: value}`` for attribute
    models. Keys that do not apply are null, so every line has the same keys.
    """

    predictor: ClassVar[str] = "gan_images"
    input: str | None
    images: list[str]
    seed: int | None = None
    index: int | None = None
    label: int | None = None
    class_name: str | None = None
    attrs: dict[str, float] | None = None
    src_attrs: dict[str, float] | None = None

    def to_json(self) -> dict:
        """See the class docstring."""
        return {"predictor": self.predictor, "input": self.input, "images": list(self.images), "seed": self.seed,
                "index": self.index, "label": self.label, "class": self.class_name,
                "attrs": None if self.attrs is None else dict(self.attrs),
                "src_attrs": None if self.src_attrs is None else dict(self.src_attrs)}


def named_values(vector: np.ndarray | None, names: Sequence[str]) -> dict[str, float] | None:
    """``{name: value}`` of an attribute vector in ``names`` order (None stays None), for :class:`GANImagesRecord`."""
    if vector is None:
        return None
    return {str(n): float(v) for n, v in zip(names, np.asarray(vector, dtype=np.float64).reshape(-1))}
