"""The Datasets room's grid: one sample drawn with its annotations by the config's task, as
``tools/browse_dataset.py`` draws it (:meth:`oars.task_roles.Data.draw_pipeline_sample`), kept as a PNG under the
data set's folder in the workspace so a page is drawn once. A sample that cannot be read or drawn gets a grey
picture with the reason, so the grid never breaks on the bad file it is there to show.
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


def sample_picture(entry: DatasetEntry, index: int, folder: Path, stamp: float) -> Path:
    """The PNG of sample ``index`` of ``entry`` (drawn on first use into ``folder/samples/``).

    Args:
        entry: the data set. index: the sample. folder: the data set's workspace folder. stamp: its scan's time
            (a new scan draws again).

    Raises:
        NotFound: no such sample.
    """
    out = folder / "samples" / f"{int(stamp)}_{index}.png"
    if out.is_file():
        return out
    with _DRAWING:
        cfg, dataset = cached_dataset(entry, stamp)
        if not 0 <= index < len(dataset):
            raise NotFound(f"sample {index}: the data set has {len(dataset)} samples (0 to {len(dataset) - 1})")
        picture = _draw(cfg, dataset, index)
    ok, png = cv2.imencode(".png", picture)
    out.parent.mkdir(parents=True, exist_ok=True)
    from oars_deploy.atomic import atomic_write

    atomic_write(str(out), png.tobytes() if ok else b"")
    return out


def _draw(cfg, dataset, index: int) -> np.ndarray:
    from oars.tasks import get_task

    try:
        packed = dataset.pipeline(copy.deepcopy(dataset.get_data_info(index)))
        if packed is None:
            return _note("dropped by the pipeline on purpose")
        return get_task(cfg.get("default_scope")).data(cfg).draw_pipeline_sample(packed, dict(dataset.metainfo))
    except Exception as err:  # noqa: BLE001 - the picture says why, the problem list has the whole message
        return _note(f"cannot draw: {type(err).__name__}")


def _note(text: str) -> np.ndarray:
    img = np.full((256, 256, 3), 200, np.uint8)
    cv2.putText(img, text[:30], (8, 128), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 160), 1, cv2.LINE_AA)
    return img
