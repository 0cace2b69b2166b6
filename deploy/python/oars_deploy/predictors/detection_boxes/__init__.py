"""``detection_boxes``: detectors that output boxes (YOLOv3, Faster R-CNN ...).

Post-processing: :func:`.postprocess.detection` (NMS in the graph, or the runtime's multi-class NMS on raw outputs).
Per image: ``<stem>_vis.png`` (boxes at or above ``--draw-threshold``, :func:`.draw.draw_detection_sample`) and a
:class:`.records.DetectionBoxesRecord`; at the end ``detections.json`` (:mod:`.records`, the file tools/infer.py
writes too). Flag: ``--draw-threshold``. Its results are boxes with scores and labels, so ``--track`` follows them
on a stream (:attr:`DetectionBoxes.tracks`).

The package holds everything of this kind and of ``instance_masks`` (boxes with a mask each, a subclass): the
post-processing (:mod:`.postprocess`), the records (:mod:`.records`, masks as COCO RLEs: :mod:`.rle`) and the
pictures (:mod:`.draw`, masks filled by :mod:`.draw_masks`), which evaluation and tools/infer.py draw too.
"""

from __future__ import annotations

import argparse
import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.plugins import add_flag, register_predictor
from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample
from oars_deploy.predictors.detection_boxes.postprocess import detection
from oars_deploy.predictors.detection_boxes.records import detection_result, detections_json
from oars_deploy.predictors.detection_boxes.views import keep_classes, result_views
from oars_deploy.predictors.images import ImagePlugin, image_task
from oars_deploy.records import ResultRecord, write_records

DEFAULT_DRAW_THRESHOLD = 0.3  # as tools/infer.py
DETECTIONS_FILE = "detections.json"


def has_masks(deploy: dict) -> bool:
    """Whether a detection export predicts instance masks: ``postprocess.masks`` or an output named ``masks``."""
    post = deploy.get("postprocess") if isinstance(deploy.get("postprocess"), dict) else {}
    outputs = deploy.get("outputs") if isinstance(deploy.get("outputs"), list) else []
    return bool(post.get("masks")) or any(isinstance(o, dict) and o.get("name") == "masks" for o in outputs)


def add_draw_threshold(parser: argparse.ArgumentParser) -> None:
    """``--draw-threshold`` (shared by the box and mask plug-ins)."""
    add_flag(parser, "--draw-threshold", type=float, default=None,
             help=f"detection: draw boxes with a score at or above this (default {DEFAULT_DRAW_THRESHOLD})")


@register_predictor("detection_boxes")
class DetectionBoxes(ImagePlugin):
    """Boxes, scores and labels per image (see the module docstring)."""

    describes = "detection models"
    tracks = True  # boxes, scores and labels per image: oars-infer --track follows them
    result_views = staticmethod(result_views)  # Result.boxes (and .masks): oars_deploy.result
    keep_classes = staticmethod(keep_classes)  # predict(classes=[...]) in oars.Model

    def claims(self, deploy: dict) -> bool:
        """An old export of task detection without a masks output."""
        return image_task(deploy) == "detection" and not has_masks(deploy)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--draw-threshold``."""
        add_draw_threshold(parser)

    def postprocess(self, outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
        """:func:`oars_deploy.predictors.detection_boxes.postprocess.detection`."""
        return detection(outputs, metas, post)

    @staticmethod
    def _pred(result: dict) -> dict[str, np.ndarray]:
        pred = {"bboxes": result["bboxes"].astype(np.float64), "scores": result["scores"].astype(np.float64),
                "labels": result["labels"].astype(np.int64)}
        if "masks" in result:  # instance segmentation: masks filled under the boxes, RLEs in the records
            pred["masks"] = result["masks"]
        return pred

    def draw(self, img: np.ndarray, result: dict, predictor: Any, args: argparse.Namespace) -> np.ndarray:
        """The boxes (and masks) at or above the draw threshold over ``img``."""
        threshold = DEFAULT_DRAW_THRESHOLD if args.draw_threshold is None else args.draw_threshold
        return draw_detection_sample(img, self._pred(result), predictor.labels, predictor.palette, threshold)

    def result_record(self, path: str, stem: str, img: np.ndarray, result: dict, predictor: Any) -> ResultRecord:
        """Every kept detection, whatever the draw threshold (nothing to write: :meth:`record` is this)."""
        return detection_result(path, self._pred(result), predictor.labels, img.shape[:2])

    def finish(self, out_dir: str, records: list[ResultRecord], predictor: Any) -> None:
        """``detections.json``: every image's detections (the results.jsonl entries in tools/infer.py's form)."""
        write_records(detections_json(records), osp.join(out_dir, DETECTIONS_FILE))

