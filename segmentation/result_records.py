"""``tools/eval.py --out``: a segmentation test sample's predicted label map as a JSON record.

The map is stored as one COCO RLE per class present (compressed, ``counts`` as str; ``pycocotools.mask.decode``
reads each), so the file stays one JSON document and the maps are exact; ``pixels`` gives the class areas
without decoding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pycocotools import mask as mask_utils


def result_records(sample: Any, dataset_meta: dict) -> list[dict]:
    """One record for ``sample``.

    Args:
        sample: a predicted ``SegDataSample``: ``pred_sem_seg.data`` int [1, H, W] class ids in original pixels.
        dataset_meta: ``classes`` (names by id).

    Returns:
        ``[{'input': img_path, 'image_size': [H, W], 'classes': [{'label', 'class', 'pixels', 'rle'}]}]``, the
        classes present by id.
    """
    pred = sample.pred_sem_seg.data
    label = np.asarray(pred.detach().cpu() if hasattr(pred, "detach") else pred).reshape(pred.shape[-2:])
    names = [str(c) for c in dataset_meta.get("classes") or ()]
    counts = np.bincount(label.reshape(-1).astype(np.int64), minlength=len(names))
    classes = []
    for cls in np.flatnonzero(counts):
        rle = mask_utils.encode(np.asfortranarray((label == cls).astype(np.uint8)))
        rle["counts"] = rle["counts"].decode("ascii")
        classes.append({"label": int(cls), "class": names[cls] if cls < len(names) else str(int(cls)),
                        "pixels": int(counts[cls]), "rle": rle})
    return [{"input": sample.metainfo.get("img_path"), "image_size": [int(label.shape[0]), int(label.shape[1])],
             "classes": classes}]
