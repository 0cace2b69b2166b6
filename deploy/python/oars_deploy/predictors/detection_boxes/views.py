"""The ``Result`` views of detectors, in ultralytics' spelling: ``r.boxes`` (:class:`Boxes`: ``xyxy``, ``xywh``,
``conf``, ``cls``, ``id`` when tracked) and, for mask models, ``r.masks`` (:class:`Masks`: ``data`` [N, H, W] bool).

Why views and not new arrays in the result dict: the dict stays the one form post-processing, records and drawing
read (``bboxes``/``scores``/``labels``[/``masks``]); the views only present it (float32 boxes, int64 classes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class Boxes:
    """The detections of one image, best first as post-processing keeps them.

    Attributes:
        xyxy: float32 [N, 4] corners in original pixels. conf: float32 [N] scores. cls: int64 [N] class ids.
        id: int64 [N] track ids when the result was tracked (``track_ids``), else None.
        names: ``{class id: name}``.
    """

    def __init__(self, xyxy: np.ndarray, conf: np.ndarray, cls: np.ndarray, ids: np.ndarray | None,
                 names: Mapping[int, str]) -> None:
        self.xyxy = np.asarray(xyxy, np.float32).reshape(-1, 4)
        self.conf = np.asarray(conf, np.float32).reshape(-1)
        self.cls = np.asarray(cls, np.int64).reshape(-1)
        self.id = None if ids is None else np.asarray(ids, np.int64).reshape(-1)
        self.names = dict(names)

    @property
    def xywh(self) -> np.ndarray:
        """float32 [N, 4]: centre x, centre y, width, height (ultralytics' ``xywh``)."""
        wh = self.xyxy[:, 2:] - self.xyxy[:, :2]
        return np.concatenate([self.xyxy[:, :2] + wh / 2, wh], axis=1)

    @property
    def data(self) -> np.ndarray:
        """float32 [N, 6]: x1, y1, x2, y2, conf, cls (ultralytics' ``boxes.data`` without track ids)."""
        return np.concatenate([self.xyxy, self.conf[:, None], self.cls[:, None].astype(np.float32)], axis=1)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: Any) -> Boxes:
        """The boxes at ``index`` (an int, a slice, a bool mask or an index array), as :class:`Boxes`."""
        index = [index] if isinstance(index, (int, np.integer)) else index
        ids = None if self.id is None else self.id[index]
        return Boxes(self.xyxy[index], self.conf[index], self.cls[index], ids, self.names)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Boxes(n={len(self)}, classes={sorted({self.names.get(int(c), str(c)) for c in self.cls})})"


class Masks:
    """The instance masks of one image: ``data`` bool [N, H, W] in original pixels, one per box of ``r.boxes``."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = np.asarray(data, bool)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: Any) -> Masks:
        index = [index] if isinstance(index, (int, np.integer)) else index
        return Masks(self.data[index])

    def __repr__(self) -> str:
        return f"Masks(n={len(self)}, shape={tuple(self.data.shape[1:])})"


def result_views(data: Mapping[str, Any], names: Mapping[int, str]) -> dict[str, object]:
    """``{'boxes': Boxes}`` plus ``'masks'`` when the result has masks (see the module docstring)."""
    views: dict[str, object] = {"boxes": Boxes(data["bboxes"], data["scores"], data["labels"], data.get("track_ids"),
                                               names)}
    if "masks" in data:
        views["masks"] = Masks(data["masks"])
    return views


def keep_classes(data: Mapping[str, Any], classes: Sequence[int]) -> dict:
    """The result with only the detections of ``classes`` (every per-detection array filtered alike), for
    ``predict(classes=[...])``."""
    keep = np.isin(np.asarray(data["labels"]).reshape(-1), np.asarray(list(classes), np.int64))
    n = len(keep)
    return {k: (v[keep] if isinstance(v, np.ndarray) and v.ndim >= 1 and len(v) == n else v)
            for k, v in data.items()}
