"""``tools/eval.py --out``: a detection test sample's predictions in the COCO results format (what
MMDetection's ``format_only`` and ultralytics' ``save_json`` write, and ``pycocotools.COCO.loadRes`` reads)."""

from __future__ import annotations

from typing import Any

import numpy as np

from detection.evaluation.coco_metric import xyxy_to_xywh
from detection.evaluation.gt_utils import image_record
from oars.errors import DataError


def result_records(sample: Any, dataset_meta: dict) -> list[dict]:
    """One COCO result per predicted box of ``sample``.

    Args:
        sample: a predicted ``DetDataSample`` (``pred_instances`` in original pixels; ``img_id`` in its metainfo).
        dataset_meta: the test dataset's ``metainfo``; ``cat_ids`` maps label ``i`` to the annotation file's
            category id (without it, category ``i + 1``, the converters' numbering).

    Returns:
        ``{'image_id', 'category_id', 'bbox': [x, y, w, h] float (original pixels), 'score'}`` per box, plus
        ``'segmentation'`` (compressed COCO RLE, ``counts`` as str) when the model predicts masks.

    Raises:
        DataError: the sample has no ``img_id`` or a label outside the dataset's categories.
    """
    rec = image_record(sample, with_gt=False, with_masks=True)
    if rec["img_id"] is None:
        raise DataError(f"tools/eval.py --out: image {rec['img_path']} has no img_id in its metainfo (the COCO "
                        "results format needs the annotation file's image ids: use a COCO-style dataset)")
    pred = rec["pred"]
    labels = pred["labels"]
    cat_ids = dataset_meta.get("cat_ids")
    cats = np.asarray(cat_ids if cat_ids is not None else
                      range(1, len(dataset_meta.get("classes") or ()) + 1), dtype=np.int64)
    if len(labels) and (labels.min() < 0 or labels.max() >= len(cats)):
        raise DataError(f"tools/eval.py --out: image {rec['img_path']} has predicted labels "
                        f"{np.unique(labels).tolist()} outside the dataset's {len(cats)} categories")
    boxes = xyxy_to_xywh(np.asarray(pred["bboxes"], np.float64)).tolist()
    scores = np.asarray(pred["scores"], np.float64).tolist()
    rles = pred.get("mask_rles")
    img_id = rec["img_id"]
    img_id = int(img_id) if isinstance(img_id, (int, np.integer)) else img_id
    out = []
    for i, (box, score, cat) in enumerate(zip(boxes, scores, cats[labels].tolist())):
        item = {"image_id": img_id, "category_id": int(cat), "bbox": [round(v, 3) for v in box],
                "score": round(float(score), 5)}
        if rles is not None:
            item["segmentation"] = rles[i]
        out.append(item)
    return out
