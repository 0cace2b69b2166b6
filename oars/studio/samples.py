"""The Datasets room's grid: one sample drawn with its annotations by the config's task, as
``tools/browse_dataset.py`` draws it (:meth:`oars.task_roles.Data.draw_pipeline_sample`), kept as a PNG under the
data set's folder in the workspace so a page is drawn once. A sample that cannot be read or drawn gets a grey
picture with the reason, so the grid never breaks on the bad file it is there to show.

A grid entry of a sampled scan names its dataset index (``index``), and one of a shards scan its shard and key
(shards have no random access: the shard is read up to that sample to draw it, so a page costs up to one shard read
per picture; pictures are kept once drawn).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import cv2
import numpy as np

from oars.studio.datasets import DatasetEntry, cached_dataset
from oars.studio.security import NotFound

PAGE_SIZE = 24
_DRAWING = threading.Lock()  # a page asks for its pictures at once: one dataset build, one drawing at a time


def sample_picture(entry: DatasetEntry, index: int, folder: Path, stamp: float, where: dict | None = None) -> Path:
    """The PNG of grid entry ``index`` of ``entry`` (drawn on first use into ``folder/samples/``).

    Args:
        entry: the data set. index: the grid entry (the scan's sample ``index``). folder: the data set's workspace
            folder. stamp: its scan's time (a new scan draws again). where: the scan's entry for it (its dataset
            ``index``; ``shard`` and ``key`` for shards); None: the dataset's sample ``index``.

    Raises:
        NotFound: no such sample.
    """
    out = folder / "samples" / f"{int(stamp)}_{index}.png"
    if out.is_file():
        return out
    where = where or {}
    with _DRAWING:
        cfg, dataset = cached_dataset(entry, stamp)
        if where.get("shard") is not None:
            picture = _draw_from_shard(cfg, dataset, where["shard"], where.get("key"))
        else:
            at = int(where.get("index", index))
            if not 0 <= at < len(dataset):
                raise NotFound(f"sample {index}: the data set has {len(dataset)} samples (0 to {len(dataset) - 1})")
            picture = _draw(cfg, dataset, at)
    ok, png = cv2.imencode(".png", picture)
    out.parent.mkdir(parents=True, exist_ok=True)
    from oars_deploy.atomic import atomic_write

    atomic_write(str(out), png.tobytes() if ok else b"")
    return out


def _draw(cfg, dataset, index: int) -> np.ndarray:
    return _picture(cfg, dataset, lambda: dataset.pipeline(copy.deepcopy(dataset.get_data_info(index))))


def _draw_from_shard(cfg, dataset, shard: str, key: str | None) -> np.ndarray:
    """Sample ``key`` of ``shard`` (a ``ShardDataset``'s), read from the shard's start up to it."""
    from oars.data.shards.reader import iter_shard

    def packed():
        for name, members in iter_shard(dataset.index.url(shard)):
            if name == key:
                return dataset.prepare(shard, name, members)
        raise LookupError(f"{dataset.index.url(shard)}: no sample {key!r}")

    return _picture(cfg, dataset, packed)


def _picture(cfg, dataset, packed_sample) -> np.ndarray:
    """The task's drawing of ``packed_sample()`` (a grey note saying why when it cannot be read or drawn)."""
    from oars.tasks import get_task

    try:
        packed = packed_sample()
        if packed is None:
            return _note("dropped by the pipeline on purpose")
        return get_task(cfg.get("default_scope")).data(cfg).draw_pipeline_sample(packed, dict(dataset.metainfo))
    except Exception as err:  # noqa: BLE001 - the picture says why, the problem list has the whole message
        return _note(f"cannot draw: {type(err).__name__}")


def _note(text: str) -> np.ndarray:
    img = np.full((256, 256, 3), 200, np.uint8)
    cv2.putText(img, text[:30], (8, 128), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 160), 1, cv2.LINE_AA)
    return img
