"""The files the predictor writes: the same pictures and JSON as tools/infer.py, with the same drawing functions.

Segmentation: ``<stem>_vis.png`` (oars_deploy.draw.draw_sample) and ``<stem>.png`` (class ids as a palette PNG,
oars_deploy.draw.save_label_png). Detection: ``<stem>_vis.png`` (oars_deploy.draw.draw_detection_sample) and
``detections.json`` (oars_deploy.records; instance masks drawn and stored as RLE). tools/infer.py calls the same
functions.
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw import draw_detection_sample, draw_sample, save_label_png
from oars_deploy.errors import DeployError
from oars_deploy.image_files import unreadable_image_message
from oars_deploy.records import detection_record, write_records


def read_image(path: str) -> np.ndarray:
    """BGR uint8 HxWx3, as the pipeline's LoadImageFromFile reads it (the same messages when it cannot)."""
    if not osp.isfile(path):
        raise DeployError(f"image file not found: {path}")
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise DeployError(unreadable_image_message(path))
    return img


class ResultWriter:
    """Writes each image's pictures as it comes; ``close()`` writes detections.json (detection)."""

    def __init__(self, task: str, out_dir: str, classes: Sequence[str], palette: np.ndarray,
                 draw_threshold: float = 0.3) -> None:
        if task not in ("segmentation", "detection"):
            raise DeployError(f"deploy.yaml model.task must be 'segmentation' or 'detection', got {task!r}")
        self.task, self.out_dir, self.classes = task, out_dir, list(classes)
        self.palette, self.draw_threshold = palette, draw_threshold
        self.records: list[dict] = []
        self.written: list[str] = []
        os.makedirs(out_dir, exist_ok=True)

    def add(self, path: str, img: np.ndarray, result: dict) -> str:
        stem = osp.splitext(osp.basename(path))[0]
        out = osp.join(self.out_dir, f"{stem}_vis.png")
        if self.task == "segmentation":
            label = result["label"]
            cv2.imwrite(out, draw_sample(img, label, self.palette, class_names=self.classes))
            save_label_png(label, self.palette, osp.join(self.out_dir, f"{stem}.png"))
        else:
            pred = {"bboxes": result["bboxes"].astype(np.float64), "scores": result["scores"].astype(np.float64),
                    "labels": result["labels"].astype(np.int64)}
            if "masks" in result:  # instance segmentation: masks filled under the boxes, RLEs in the records
                pred["masks"] = result["masks"]
            cv2.imwrite(out, draw_detection_sample(img, pred, self.classes, self.palette, self.draw_threshold))
            self.records.append(detection_record(path, pred, self.classes))
        self.written.append(out)
        return out

    def close(self) -> list[str]:
        if self.task == "detection":
            write_records(self.records, osp.join(self.out_dir, "detections.json"))
        return self.written
