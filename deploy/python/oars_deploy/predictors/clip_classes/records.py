"""The record of the ``clip_classes`` plug-in: one video's top-k classes in results.jsonl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from oars_deploy.records import ResultRecord


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
