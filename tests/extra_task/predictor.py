"""``oddtask_classes``: the extra task's torch-free runtime plug-in (:mod:`oars_deploy.plugins`) and its result record.

The export names it in deploy.yaml (``predictor: oddtask_classes``); ``oars-infer`` runs it once it is registered in
the process (importing this module registers it). Per image: ``<stem>_vis.png`` (the image with its class and
score written on it) and one :class:`ImageClassRecord`; ``tools/infer.py`` (``extra_task.inference``) writes the
same records and pictures, so both results.jsonl files compare line by line.

Only the runtime (``oars_deploy``), NumPy and OpenCV are imported here: no torch, no training code.
"""

from __future__ import annotations

import argparse
import os.path as osp
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np

from oars_deploy.plugins import register_predictor
from oars_deploy.predictors.images import ImagePlugin
from oars_deploy.records import ResultRecord

NAME = "oddtask_classes"
OUTPUT = "scores"  # the graph's one output: softmax scores [B, num_classes]


@dataclass(eq=False)
class ImageClassRecord(ResultRecord):
    """One image's class.

    JSON: ``{"predictor", "input", "label", "class", "score", "scores": {class: score}}`` (scores rounded to 1e-5).
    """

    predictor: ClassVar[str] = NAME
    input: str
    scores: np.ndarray
    classes: Sequence[str]

    def to_json(self) -> dict:
        scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        label = int(scores.argmax())
        names = list(self.classes)
        return {"predictor": self.predictor, "input": self.input, "label": label, "class": names[label],
                "score": round(float(scores[label]), 5),
                "scores": {name: round(float(s), 5) for name, s in zip(names, scores)}}


def draw_class(img: np.ndarray, record: ImageClassRecord) -> np.ndarray:
    """A copy of the BGR image with ``<class> <score>`` written in its top-left corner."""
    data = record.to_json()
    out = img.copy()
    text = f"{data['class']} {data['score']:.2f}"
    cv2.putText(out, text, (3, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 3, cv2.LINE_AA)
    cv2.putText(out, text, (3, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
    return out


def write_image_class(out_dir: str, path: str, img: np.ndarray, scores: np.ndarray,
                      classes: Sequence[str]) -> tuple[str, ImageClassRecord]:
    """``out_dir/<stem>_vis.png`` and the image's record (the same for oars-infer and tools/infer.py)."""
    record = ImageClassRecord(input=path, scores=np.asarray(scores), classes=list(classes))
    out = osp.join(out_dir, f"{osp.splitext(osp.basename(path))[0]}_vis.png")
    cv2.imwrite(out, draw_class(img, record))
    return out, record


@register_predictor(NAME)
class OddTaskClasses(ImagePlugin):
    """One class per image (see the module docstring); no flags of its own."""

    describes = "dominant-shape image classifiers (the test suite's extra task)"

    def claims(self, deploy: dict) -> bool:
        """Never by content: its exports always carry ``predictor: oddtask_classes``."""
        return False

    def postprocess(self, outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
        """The scores row of each image (nothing to undo: the class does not depend on the resize)."""
        scores = np.asarray(outputs[post.get("output", OUTPUT)])
        return [{"scores": row} for row in scores[:len(metas)]]

    def write(self, out_dir: str, path: str, img: np.ndarray, result: dict, predictor: Any,
              args: argparse.Namespace) -> tuple[str, ResultRecord]:
        return write_image_class(out_dir, path, img, result["scores"], predictor.labels)
