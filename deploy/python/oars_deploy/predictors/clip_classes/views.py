"""The ``Result`` view of video classifiers, in ultralytics' spelling: ``r.probs`` (:class:`Probs`: ``top1``,
``top5``, ``top1conf``, ``top5conf``, ``data``) from the result's top-k ``[(id, name, score)]``, best first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class Probs:
    """A clip's best classes.

    Attributes:
        data: float32 [K] the top-k scores, best first (the classes in :attr:`topk_ids`).
        topk_ids: int64 [K] their class ids. top1 / top5: the best class id / the best five (a list).
        top1conf / top5conf: their scores.
    """

    def __init__(self, topk: Sequence[tuple[int, str, float]]) -> None:
        self.topk_ids = np.asarray([int(i) for i, _, _ in topk], np.int64)
        self.data = np.asarray([float(s) for _, _, s in topk], np.float32)

    @property
    def top1(self) -> int:
        return int(self.topk_ids[0])

    @property
    def top5(self) -> list[int]:
        return [int(i) for i in self.topk_ids[:5]]

    @property
    def top1conf(self) -> float:
        return float(self.data[0])

    @property
    def top5conf(self) -> np.ndarray:
        return self.data[:5]

    def __repr__(self) -> str:
        return f"Probs(top1={self.top1}, top1conf={self.top1conf:.4f})"


def result_views(data: Mapping[str, Any], names: Mapping[int, str]) -> dict[str, object]:
    """``{'probs': Probs}`` when the result has its top-k (a clip prediction), else nothing."""
    return {"probs": Probs(data["topk"])} if data.get("topk") else {}
