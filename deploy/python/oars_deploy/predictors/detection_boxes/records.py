"""The records of the box plug-ins (``detection_boxes``, and ``instance_masks`` which adds masks): one image's
detections in detections.json and in results.jsonl.

Instance masks are stored as COCO run-length encodings, uncompressed (:mod:`.rle`). Both records live here
because one function (:func:`detection_result`) makes either from a prediction, for ``oars-infer`` and
``tools/infer.py`` alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from oars_deploy.predictors.detection_boxes.rle import mask_to_rle
from oars_deploy.records import ResultRecord


def detection_record(path: str, pred: dict[str, np.ndarray], classes: Sequence[str]) -> dict:
    """One image's entry: xyxy boxes in original pixels rounded to 0.01, scores to 1e-5, label and class name;
    with ``pred['masks']`` (bool [K, H, W]) each detection's ``segmentation`` as an uncompressed COCO RLE."""
    masks = pred.get("masks")
    detections = [
        {"bbox": [round(float(v), 2) for v in box], "score": round(float(score), 5),
         "label": int(label), "class": classes[int(label)]}
        for box, score, label in zip(pred["bboxes"], pred["scores"], pred["labels"])]
    if masks is not None:
        if len(masks) != len(detections):
            raise ValueError(f"detection_record: {len(masks)} masks for {len(detections)} detections ({path})")
        for det, mask in zip(detections, masks):
            det["segmentation"] = mask_to_rle(mask)
    return {"image": path, "detections": detections}


@dataclass(eq=False)  # array fields: compare to_json() instead
class DetectionBoxesRecord(ResultRecord):
    """An image's detections (``predictor: detection_boxes``).

    JSON: ``{"predictor", "input", "image_size": [H, W], "detections": [{"bbox": [x1, y1, x2, y2], "score",
    "label", "class"}]}``: the entries of detections.json (:func:`detection_record`: original pixels, boxes rounded
    to 0.01, scores to 1e-5), every kept detection whatever the draw threshold.
    """

    predictor: ClassVar[str] = "detection_boxes"
    input: str
    image_size: tuple[int, int]
    bboxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    classes: Sequence[str]

    def _pred(self) -> dict[str, np.ndarray]:
        return {"bboxes": self.bboxes, "scores": self.scores, "labels": self.labels}

    def to_json(self) -> dict:
        """See the class docstring."""
        return {"predictor": self.predictor, "input": self.input,
                "image_size": [int(v) for v in self.image_size],
                "detections": detection_record(self.input, self._pred(), self.classes)["detections"]}


@dataclass(eq=False)  # array fields: compare to_json() instead
class InstanceMasksRecord(DetectionBoxesRecord):
    """An image's detections with instance masks (``predictor: instance_masks``): the boxes record, and each
    detection's ``segmentation`` as an uncompressed COCO RLE of its bool mask in original pixels
    (:func:`mask_to_rle`; ``pycocotools.mask.frPyObjects`` reads it). The record keeps the RLEs, not the masks, so
    a folder's records stay small."""

    predictor: ClassVar[str] = "instance_masks"
    rles: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """See the class docstring."""
        data = super().to_json()
        if len(self.rles) != len(data["detections"]):
            raise ValueError(f"InstanceMasksRecord: {len(self.rles)} masks for {len(data['detections'])} detections "
                             f"({self.input})")
        for det, rle in zip(data["detections"], self.rles):
            det["segmentation"] = rle
        return data


def detection_result(path: str, pred: dict[str, np.ndarray], classes: Sequence[str],
                     image_size: Sequence[int]) -> DetectionBoxesRecord:
    """The record of one image's detections (the same for tools/infer.py and oars-infer).

    Args:
        path: the image file. classes: class names by label id. image_size: (H, W) of the original image.
        pred: ``bboxes`` [K, 4] xyxy original pixels, ``scores`` [K], ``labels`` [K]; ``masks`` bool [K, H, W]
            for a mask model (then the record is an :class:`InstanceMasksRecord`).

    Returns:
        A :class:`DetectionBoxesRecord` or, with ``pred['masks']``, an :class:`InstanceMasksRecord`.
    """
    common = dict(input=path, image_size=(int(image_size[0]), int(image_size[1])), bboxes=np.asarray(pred["bboxes"]),
                  scores=np.asarray(pred["scores"]), labels=np.asarray(pred["labels"]), classes=list(classes))
    if pred.get("masks") is not None:
        return InstanceMasksRecord(**common, rles=[mask_to_rle(m) for m in pred["masks"]])
    return DetectionBoxesRecord(**common)


def detections_json(records: Iterable[ResultRecord]) -> list[dict]:
    """detections.json's content from detection records: ``[{"image", "detections"}]`` (:func:`detection_record`'s
    form), so the file and results.jsonl are made from the same numbers."""
    return [{"image": r.input, "detections": r.to_json()["detections"]} for r in records
            if isinstance(r, DetectionBoxesRecord)]
