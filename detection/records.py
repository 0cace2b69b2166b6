"""detections.json: one record per image, written by tools/infer.py and the deploy predictor (no torch)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np


def detection_record(path: str, pred: dict[str, np.ndarray], classes: Sequence[str]) -> dict:
    """One image's entry: xyxy boxes in original pixels rounded to 0.01, scores to 1e-5, label and class name."""
    return {"image": path, "detections": [
        {"bbox": [round(float(v), 2) for v in box], "score": round(float(score), 5),
         "label": int(label), "class": classes[int(label)]}
        for box, score, label in zip(pred["bboxes"], pred["scores"], pred["labels"])]}


def write_records(records: list[dict], path: str) -> None:
    """The records as JSON, written atomically (temporary file + rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(records, f, indent=1)
    os.replace(tmp, path)
