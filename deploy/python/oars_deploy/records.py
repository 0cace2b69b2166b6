"""The result records every kind of model writes: results.jsonl, one :class:`ResultRecord` per input (per sample
for noise GANs), one JSON object per line, written by :func:`write_results` for every kind of model by
``oars-infer`` and ``tools/infer.py`` alike.

Why here and not in a plug-in: the file, its writer and its reader are the same for every kind; what a line holds
is the kind's record class, in its plug-in's package (``oars_deploy.predictors.<kind>.records``, or ``record``),
which documents its JSON. :func:`write_records` writes any list of JSON records atomically (detections.json).
"""

from __future__ import annotations

import json
import os.path as osp
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar

from oars_deploy.atomic import atomic_write


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
