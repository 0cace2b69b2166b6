"""Predictions as ActivityNet submission JSON, the files the official ``eval_proposal.py`` / ``eval_detection.py``
(and the challenge server) read, so that a run's numbers can be checked with the official code."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from oars_deploy.atomic import atomic_write


def submission(names: Sequence[str], predictions: Sequence[np.ndarray | None],
               classes: Sequence[str] | None = None) -> dict:
    """``{"version": "VERSION 1.3", "results": {video: [{"segment": [s, e], "score": x[, "label": name]}]},
    "external_data": {...}}``.

    Args:
        names: the video ids.
        predictions: per video, float [K, 3] proposals (start s, end s, score) or, with ``classes``, float [K, 4]
            detections (start, end, score, class id); None entries are skipped.
        classes: class names (detections: ``label`` is ``classes[id]``).

    Returns:
        the JSON-ready dict.
    """
    results: dict[str, list[dict]] = {}
    for name, pred in zip(names, predictions):
        if pred is None:
            continue
        rows = []
        for row in np.asarray(pred, dtype=np.float64):
            item = {'segment': [float(row[0]), float(row[1])], 'score': float(row[2])}
            if classes is not None:
                item['label'] = str(classes[int(round(row[3]))])
            rows.append(item)
        results[str(name)] = rows
    return {'version': 'VERSION 1.3', 'results': results,
            'external_data': {'used': False, 'details': 'pre-extracted snippet features'}}


def write_submission(path: str, names: Sequence[str], predictions: Sequence[np.ndarray | None],
                     classes: Sequence[str] | None = None) -> str:
    """Write :func:`submission` to ``path`` atomically; returns the path."""
    return atomic_write(path, json.dumps(submission(names, predictions, classes)))
