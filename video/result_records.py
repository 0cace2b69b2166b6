"""``tools/eval.py --out``: a video test sample's predicted classes as a JSON record, in the shape of the runtime's
``clip_classes`` record (``oars_deploy.records.ClipClassesRecord``) plus the true classes."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
from video.evaluation.fields import gt_class_ids, has_gt, pred_scores, sample_name

TOPK = 5


def result_records(sample: Any, dataset_meta: dict) -> list[dict]:
    """One record for ``sample``.

    Args:
        sample: a predicted ``ActionDataSample`` (``pred_score`` float [C]).
        dataset_meta: ``classes`` (names by id).

    Returns:
        ``[ClipClassesRecord JSON + {'scores': [C] float, 'gt_labels': [ids] or None}]``: ``topk`` holds the
        5 best classes, highest first; ``scores`` every class's score (rounded to 1e-6).
    """
    scores = pred_scores(sample, "tools/eval.py --out")
    names = [str(c) for c in dataset_meta.get("classes") or ()]
    order = np.argsort(-scores.astype(np.float64), kind="stable")[:TOPK]
    topk = [(int(i), names[i] if i < len(names) else str(int(i)), float(scores[i])) for i in order]
    meta = sample.metainfo
    record = ClipClassesRecord(input=sample_name(sample), topk=topk, total_frames=int(meta.get("total_frames", 0)),
                               frame_inds=[int(i) for i in np.asarray(meta.get("frame_inds", [])).reshape(-1)])
    out = record.to_json()
    out["scores"] = [round(float(s), 6) for s in scores]
    out["gt_labels"] = gt_class_ids(torch.as_tensor(sample.gt_label), len(scores)) if has_gt(sample) else None
    return [out]
