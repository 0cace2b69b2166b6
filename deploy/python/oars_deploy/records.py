"""The records a prediction run writes: detections.json (detection) and results.jsonl (every kind of model).

detections.json: one record per image, written by tools/infer.py and the deploy predictor.
results.jsonl: one :class:`ResultRecord` per input (per sample for noise GANs), one JSON object per line, written
by :func:`write_results` for every kind of model by ``oars-infer`` and ``tools/infer.py`` alike; the record
classes document their JSON.

Instance masks are stored as COCO run-length encodings, uncompressed (``{'size': [H, W], 'counts': [n0, n1,
...]}``: alternating runs of 0s and 1s in column-major order, starting with 0s), which
``pycocotools.mask.frPyObjects`` reads; NumPy only (the runtime has no pycocotools).
"""

from __future__ import annotations

import json
import os.path as osp
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from oars_deploy.atomic import atomic_write


def mask_to_rle(mask: np.ndarray) -> dict:
    """COCO uncompressed RLE of one mask.

    Args:
        mask: bool (or 0/1) [H, W].

    Returns:
        ``{'size': [H, W], 'counts': list[int]}``: run lengths over the column-major pixels, the first run
        counting 0s (0 when the first pixel is set); the counts sum to ``H * W``.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask_to_rle: expected an [H, W] mask, got shape {mask.shape}")
    flat = (mask.T.reshape(-1) > 0).astype(np.int8)  # column-major: COCO's order
    if flat.size == 0:
        return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": []}
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    counts = np.diff(bounds)
    if flat[0]:
        counts = np.concatenate([[0], counts])
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": [int(c) for c in counts]}


def rle_to_mask(rle: dict) -> np.ndarray:
    """bool [H, W] of an uncompressed RLE written by :func:`mask_to_rle` (its inverse)."""
    h, w = (int(v) for v in rle["size"])
    counts = np.asarray(rle["counts"], dtype=np.int64)
    if counts.sum() != h * w:
        raise ValueError(f"rle_to_mask: counts sum to {int(counts.sum())}, the size {h}x{w} needs {h * w}")
    values = np.arange(len(counts)) % 2 == 1  # runs alternate 0, 1, 0, ...
    return np.repeat(values, counts).reshape(w, h).T.copy()


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


def write_records(records: list[dict], path: str) -> None:
    """The records as JSON, written atomically (``oars_deploy.atomic.atomic_write``)."""
    atomic_write(path, json.dumps(records, indent=1))


# ----------------------------------------------------------------------------- results.jsonl: one record per input
RESULTS_FILE = "results.jsonl"


class ResultRecord(ABC):
    """One input's result, whatever the kind of model: what ``results.jsonl`` holds one line of.

    Why one form: ``oars-infer``, ``tools/infer.py`` (and later the server and batch inference) write the same
    records, so a run of one can be compared with a run of the other and a consumer reads every kind the same
    way. Every record's JSON has ``predictor`` (the plug-in that made it, deploy.yaml's ``predictor`` key) and
    ``input`` (the file as the run was given it; None for a noise GAN's samples). A line written by ``oars-infer
    --ray`` adds ``resolved_input``: the file's ``os.path.realpath``, by which a resumed run knows it done
    (:mod:`oars_deploy.serve.ray_data`).
    """

    predictor: ClassVar[str] = ""

    @abstractmethod
    def to_json(self) -> dict:
        """The record as plain JSON values (dicts, lists, str, int, float, bool, None): ``json.dumps`` takes it."""


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


@dataclass(eq=False)  # array fields: compare to_json() instead
class SemanticLabelsRecord(ResultRecord):
    """An image's label map (``predictor: semantic_labels``).

    The map itself is the label PNG written beside results.jsonl (``label_png``, a name relative to the results
    folder: class ids as palette indices, lossless, read with PIL as indices), not an RLE in the line. Why: the
    PNG is written anyway, it is smaller than per-class RLEs of a full-size map, and a line stays short for any
    image size. The line carries what a consumer needs without opening it: the size and the pixels per class.

    JSON: ``{"predictor", "input", "image_size": [H, W], "label_png": "<stem>.png", "classes": [{"label",
    "class", "pixels"}]}`` (the classes present, by label id); ``<stem>`` is unique per input and may hold a
    subfolder (``a/x.png`` for ``twins/a/x.png`` in a run over ``twins/**``,
    :func:`oars_deploy.output_paths.output_stems`).
    """

    predictor: ClassVar[str] = "semantic_labels"
    input: str
    image_size: tuple[int, int]
    label_png: str
    pixel_counts: np.ndarray
    classes: Sequence[str]

    def to_json(self) -> dict:
        """See the class docstring."""
        names = list(self.classes)
        present = [{"label": i, "class": names[i] if i < len(names) else str(i), "pixels": int(n)}
                   for i, n in enumerate(np.asarray(self.pixel_counts).tolist()) if n > 0]
        return {"predictor": self.predictor, "input": self.input, "image_size": [int(v) for v in self.image_size],
                "label_png": self.label_png, "classes": present}


def semantic_labels_result(path: str, label: np.ndarray, classes: Sequence[str],
                           label_png: str) -> SemanticLabelsRecord:
    """The record of one image's label map (the same for tools/infer.py and oars-infer).

    Args:
        path: the image file. label: int [H, W] class ids in original pixels. classes: class names by id.
        label_png: the label PNG's name relative to the results folder (``<stem>.png``).
    """
    label = np.asarray(label)
    counts = np.bincount(label.reshape(-1).astype(np.int64), minlength=len(classes)) if label.size else \
        np.zeros(len(classes), np.int64)
    return SemanticLabelsRecord(input=path, image_size=(int(label.shape[0]), int(label.shape[1])),
                                label_png=label_png, pixel_counts=counts, classes=list(classes))


@dataclass
class ClipClassesRecord(ResultRecord):
    """A video's top-k classes (``predictor: clip_classes``).

    JSON: ``{"predictor", "input", "label", "class", "score", "topk": [{"label", "class", "score"}],
    "total_frames", "frame_inds"}``, highest score first (``label``/``class``/``score``: the first of the top-k);
    ``frame_inds``: the frames the model saw.
    """

    predictor: ClassVar[str] = "clip_classes"
    input: str
    topk: list[tuple[int, str, float]]
    total_frames: int = 0
    frame_inds: list[int] = field(default_factory=list)

    @classmethod
    def from_result(cls, result: dict) -> ClipClassesRecord:
        """From a top-k result ``{'path', 'topk': [(id, name, score)], 'total_frames', 'frame_inds'}`` (the dict
        ``oars_deploy.predictors.clip_classes.cli.record`` takes)."""
        return cls(input=result["path"], topk=[(int(i), str(n), float(s)) for i, n, s in result["topk"]],
                   total_frames=int(result.get("total_frames", 0)),
                   frame_inds=[int(i) for i in np.asarray(result.get("frame_inds", [])).reshape(-1)])

    def to_json(self) -> dict:
        """See the class docstring."""
        top = [{"label": i, "class": name, "score": score} for i, name, score in self.topk]
        best = top[0] if top else {"label": None, "class": None, "score": None}
        return {"predictor": self.predictor, "input": self.input, "label": best["label"], "class": best["class"],
                "score": best["score"], "topk": top, "total_frames": self.total_frames,
                "frame_inds": list(self.frame_inds)}


@dataclass
class FeatureClassesRecord(ClipClassesRecord):
    """A frame-feature file's top-k classes (``predictor: feature_classes``): the clip record's JSON, with
    ``input`` the feature file, ``total_frames`` its frames and ``frame_inds`` the frames kept."""

    predictor: ClassVar[str] = "feature_classes"


@dataclass
class GANImagesRecord(ResultRecord):
    """The pictures a generator made from one input (``predictor: gan_images``).

    JSON: ``{"predictor", "input", "images": [names relative to the results folder], "seed", "index", "label",
    "class", "attrs", "src_attrs"}``. Noise models: one line per sample, ``input`` null, ``images``
    ``["sample_XXX.png"]``, ``seed`` and ``index`` (the row of the seeded noise), ``label``/``class`` for a
    class-conditional model (grid.png is the samples together, not a line). Image models: one line per image,
    ``images`` ``["<stem>.png", "<stem>_pair.png"]``, ``attrs``/``src_attrs`` ``{name: value}`` for attribute
    models. Keys that do not apply are null, so every line has the same keys.
    """

    predictor: ClassVar[str] = "gan_images"
    input: str | None
    images: list[str]
    seed: int | None = None
    index: int | None = None
    label: int | None = None
    class_name: str | None = None
    attrs: dict[str, float] | None = None
    src_attrs: dict[str, float] | None = None

    def to_json(self) -> dict:
        """See the class docstring."""
        return {"predictor": self.predictor, "input": self.input, "images": list(self.images), "seed": self.seed,
                "index": self.index, "label": self.label, "class": self.class_name,
                "attrs": None if self.attrs is None else dict(self.attrs),
                "src_attrs": None if self.src_attrs is None else dict(self.src_attrs)}


def named_values(vector: np.ndarray | None, names: Sequence[str]) -> dict[str, float] | None:
    """``{name: value}`` of an attribute vector in ``names`` order (None stays None), for :class:`GANImagesRecord`."""
    if vector is None:
        return None
    return {str(n): float(v) for n, v in zip(names, np.asarray(vector, dtype=np.float64).reshape(-1))}


def write_results(records: Iterable[ResultRecord], out_dir: str) -> str:
    """``out_dir/results.jsonl``: one ``record.to_json()`` per line, in order, written atomically
    (:func:`oars_deploy.atomic.atomic_write`), so a killed run never leaves half a file. The one writer of
    results.jsonl: ``oars-infer`` and every task's ``tools/infer.py`` call it.

    Returns:
        The path written (an empty file when there are no records: the run read nothing it could predict).
    """
    lines = "".join(json.dumps(r.to_json()) + "\n" for r in records)
    return atomic_write(osp.join(out_dir, RESULTS_FILE), lines)


def read_results(path: str) -> list[dict]:
    """The records of a results.jsonl (a file, or the folder holding it), one dict per line."""
    if osp.isdir(path):
        path = osp.join(path, RESULTS_FILE)
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
