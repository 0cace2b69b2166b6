"""detections.json: one record per image, written by tools/infer.py and the deploy predictor."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from oars_deploy.atomic import atomic_write


def detection_record(path: str, pred: dict[str, np.ndarray], classes: Sequence[str]) -> dict:
    """One image's entry: xyxy boxes in original pixels rounded to 0.01, scores to 1e-5, label and class name."""
    return {"image": path, "detections": [
        {"bbox": [round(float(v), 2) for v in box], "score": round(float(score), 5),
         "label": int(label), "class": classes[int(label)]}
        for box, score, label in zip(pred["bboxes"], pred["scores"], pred["labels"])]}


def write_records(records: list[dict], path: str) -> None:
    """The records as JSON, written atomically (``oars_deploy.atomic.atomic_write``)."""
    atomic_write(path, json.dumps(records, indent=1))
