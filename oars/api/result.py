"""One input's prediction from the Python API: ``.plot()``, ``.save(path)``, ``.to_json()``.

Why through the runtime's predictor plug-in: ``oars-infer`` draws a picture and writes a results.jsonl record per
input with its plug-in (:mod:`oars_deploy.predictors`); the API holds the same result dict
(``oars_deploy.predictor.Predictor.predict``'s form) and calls the same plug-in, so ``Result.plot()`` is the
``<stem>_vis.png`` and ``Result.to_json()`` the results.jsonl line those tools write for the same numbers.
"""

from __future__ import annotations

import argparse
import os.path as osp
import tempfile
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np

from oars.errors import OarsError
from oars_deploy.atomic import atomic_write


class Result:
    """The prediction for one input.

    Attributes:
        input: the file it was read from, or ``array_<i>`` for an in-memory image.
        image: BGR uint8 [H, W, 3], the image as predicted (original pixels); None for a video.
        data: the runtime's result dict (segmentation ``{'label': int64 [H, W]}``; detection ``{'bboxes': [K, 4]
            xyxy, 'scores': [K], 'labels': [K]}`` plus ``'masks'`` bool [K, H, W] for mask models; a kind whose
            plug-in draws no single picture, e.g. video ``clip_classes``, adds ``'record'`` and ``'picture'``).
        predictor: the runtime predictor plug-in's name (``semantic_labels``, ``detection_boxes`` ...).
        labels: class names by id. palette: RGB rows, one per class.
    """

    def __init__(self, input: str, image: np.ndarray | None, data: dict, predictor: str, labels: Sequence[str],
                 palette: Sequence[Sequence[int]], draw_threshold: float | None = None) -> None:
        from oars_deploy.plugins import get_predictor

        self.input = input
        self.image = image
        self.data = data
        self.predictor = predictor
        self.labels = list(labels)
        self.palette = [list(c) for c in palette]
        self.draw_threshold = draw_threshold
        self._plugin = get_predictor(predictor)

    def __repr__(self) -> str:
        keys = ", ".join(f"{k}: {tuple(np.shape(v))}" for k, v in self.data.items())
        return f"Result(input={self.input!r}, predictor={self.predictor!r}, {keys})"

    def _context(self) -> tuple[SimpleNamespace, argparse.Namespace]:
        """What the plug-in's ``draw``/``record`` read from the runtime predictor (labels, palette) and from
        oars-infer's flags (``--draw-threshold``: None is the plug-in's default)."""
        return (SimpleNamespace(labels=self.labels, palette=self.palette),
                argparse.Namespace(draw_threshold=self.draw_threshold))

    def _plugin_method(self, method: str) -> Any:
        """The image plug-in's ``draw``/``record``, or None for a kind that does not draw or record per image
        (its task's hook then gives ``picture``/``record`` in :attr:`data`)."""
        fn = getattr(self._plugin, method, None)
        return fn if callable(fn) and self.image is not None else None

    def _missing(self, what: str) -> OarsError:
        return OarsError(f"Result.{what}: predictor {self.predictor!r} ({self._plugin.describes}) gives no "
                         f"{'picture' if what == 'plot' else 'record'} for {self.input}")

    def plot(self) -> np.ndarray:
        """The picture ``tools/infer.py`` / ``oars-infer`` draw for this input.

        Returns:
            np.ndarray uint8 [H', W', 3] BGR (segmentation: image | labels | overlay with a legend; detection:
            boxes with class names and scores at or above the draw threshold over the image; video: the frame
            strip with the top classes).
        """
        draw = self._plugin_method("draw")
        if draw is not None:
            ctx, args = self._context()
            return draw(self.image, self.data, ctx, args)
        if self.data.get("picture") is None:
            raise self._missing("plot")
        return self.data["picture"]

    def save(self, path: str) -> str:
        """Write :meth:`plot` to ``path`` (the format from its suffix, e.g. ``.png``/``.jpg``), atomically.

        Returns:
            ``path``.

        Raises:
            OarsError: ``path`` is the input image itself (outputs never replace inputs), or its suffix is not an
                image format OpenCV writes.
        """
        if osp.exists(path) and osp.exists(self.input) and osp.samefile(path, self.input):
            raise OarsError(f"Result.save: {path} is the input image; choose another file (outputs never replace "
                            "inputs)")
        suffix = osp.splitext(path)[1].lower() or ".png"
        try:
            ok, buf = cv2.imencode(suffix, self.plot())
        except cv2.error:
            ok = False
        if not ok:
            raise OarsError(f"Result.save: cannot write an image with suffix {suffix!r} ({path}); use .png or .jpg")
        return atomic_write(path, buf.tobytes())

    def to_json(self) -> dict:
        """The record ``oars-infer`` and ``tools/infer.py`` write to results.jsonl for this input
        (``oars_deploy.records``; ``predictor``, ``input``, and the plug-in's fields). A segmentation record names
        the label PNG (``<stem>.png``) those tools write beside results.jsonl; here nothing is written."""
        make = self._plugin_method("record")
        if make is None:
            if self.data.get("record") is None:
                raise self._missing("to_json")
            return self.data["record"].to_json()
        ctx, _ = self._context()
        stem = osp.splitext(osp.basename(self.input))[0]
        with tempfile.TemporaryDirectory() as scratch:  # a plug-in's record may write its side file (label PNG)
            record = make(scratch, self.input, stem, self.image, self.data, ctx)
        return record.to_json()
