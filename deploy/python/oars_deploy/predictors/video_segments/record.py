"""The result record of one video's segments (``predictor: video_segments``), one line of results.jsonl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from oars_deploy.records import ResultRecord


@dataclass(eq=False)  # array fields: compare to_json() instead
class VideoSegmentsRecord(ResultRecord):
    """A video's timed action segments.

    JSON: ``{"predictor", "input", "duration_second", "feature_second", "num_snippets", "classes": [{"label",
    "class", "score"}], "segments": [{"start", "end", "label", "class", "score"}], "timeline"}``: ``classes`` the
    video-level top-k (the recognizer's class probabilities averaged over the snippets; empty for a C-TCN, whose
    segments carry its own classes), ``segments`` every detection by decreasing score (start / end in seconds from
    the video's start, rounded to 1e-3 s; score = BMN's proposal score x class probability, or C-TCN's class score
    after Soft-NMS, rounded to 1e-6), ``timeline`` the picture's name relative to the results folder (null when none
    was drawn).
    """

    predictor: ClassVar[str] = "video_segments"
    input: str
    duration_second: float
    feature_second: float
    num_snippets: int
    class_ids: np.ndarray  # int [k] the video-level top-k
    class_scores: np.ndarray  # float [C]
    detections: np.ndarray  # float [M, 4] start_s, end_s, score, class id
    labels: list[str] = field(default_factory=list)
    timeline: str | None = None

    def _name(self, label: int) -> str:
        return self.labels[label] if 0 <= label < len(self.labels) else str(label)

    def to_json(self) -> dict:
        """See the class docstring."""
        scores = np.asarray(self.class_scores, dtype=np.float64)
        classes = [{"label": int(i), "class": self._name(int(i)), "score": round(float(scores[int(i)]), 6)}
                   for i in np.asarray(self.class_ids).reshape(-1)]
        segments = [{"start": round(float(s), 3), "end": round(float(e), 3), "label": int(c),
                     "class": self._name(int(c)), "score": round(float(p), 6)}
                    for s, e, p, c in np.asarray(self.detections, dtype=np.float64).reshape(-1, 4)]
        return {"predictor": self.predictor, "input": self.input,
                "duration_second": round(float(self.duration_second), 3),
                "feature_second": round(float(self.feature_second), 3), "num_snippets": int(self.num_snippets),
                "classes": classes, "segments": segments, "timeline": self.timeline}
