"""One input's prediction, the same object from ``oars.Model.predict`` (PyTorch) and the runtime
:class:`oars_deploy.predictor.Predictor` (an export folder): ``.names``, ``.orig_img``, ``.path``, ``.plot()``,
``.save(path)``, ``.to_dict()``, ``.to_json()`` and the views of its kind (``.boxes``, ``.masks``, ``.label_map``,
``.probs``...), in ultralytics' spelling.

Why the plug-in draws, records and gives the views: ``oars-infer`` draws a picture and writes a results.jsonl record
per input with its plug-in (:mod:`oars_deploy.plugins`); a Result holds the same result dict (the plug-in's
``postprocess`` form) and asks the same plug-in, so ``Result.plot()`` is the ``<stem>_vis.png`` and
``Result.to_dict()`` the results.jsonl line those tools write for the same numbers. This module names no kind: the
kind-specific attributes come from the plug-in's ``result_views(data, names) -> {attribute: object}``.
"""

from __future__ import annotations

import argparse
import json
import os.path as osp
import tempfile
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np

from oars_deploy.atomic import atomic_write
from oars_deploy.errors import DeployError

__all__ = ["Result"]


class Result:
    """The prediction for one input.

    Attributes:
        path: the file it was read from (a video's frames: the video file), or ``array_<i>`` for an in-memory image.
        orig_img: BGR uint8 [H, W, 3], the image as predicted (original pixels); None for a video clip.
        frame: the frame index within :attr:`path` for a video read frame by frame, else None.
        stem: the unique name its pictures get in an output folder (:class:`oars_deploy.sources.SourceItem`'s,
            e.g. ``a/x`` for ``twins/a/x.png`` beside ``twins/b/x.png``, ``clip_000012`` for a frame).
        data: the runtime's result dict (e.g. ``{'label': int64 [H, W]}`` of ``semantic_labels``, ``{'bboxes':
            [K, 4] xyxy, 'scores': [K], 'labels': [K]}`` of ``detection_boxes``); ``r["bboxes"]`` reads it too.
        predictor: the runtime predictor plug-in's name (``semantic_labels``, ``detection_boxes`` ...).
        names: ``{class id: class name}``. labels: the class names as a list. palette: RGB rows, one per class.
        draw_threshold: what :meth:`plot` draws of a plug-in that has a threshold (None: the plug-in's default).

    The plug-in's views (its ``result_views``) are attributes as well, e.g. ``r.boxes.xyxy``; asking for one the
    kind does not have raises AttributeError naming those it has.
    """

    def __init__(self, path: str, orig_img: np.ndarray | None, data: dict, predictor: str, labels: Sequence[str],
                 palette: Sequence[Sequence[int]], draw_threshold: float | None = None,
                 frame: int | None = None, stem: str | None = None) -> None:
        from oars_deploy.plugins import get_predictor

        self.path = path
        self.orig_img = orig_img
        self.frame = frame
        self.stem = stem or osp.splitext(osp.basename(path))[0]
        self.data = data
        self.predictor = predictor
        self.labels = list(labels)
        self.names: dict[int, str] = dict(enumerate(self.labels))
        self.palette = [list(c) for c in palette]
        self.draw_threshold = draw_threshold
        self._plugin = get_predictor(predictor)
        self._views: dict[str, Any] | None = None

    # the names of the first API (kept: scripts and tests read them)
    @property
    def input(self) -> str:
        """:attr:`path`."""
        return self.path

    @property
    def image(self) -> np.ndarray | None:
        """:attr:`orig_img`."""
        return self.orig_img

    def views(self) -> dict[str, Any]:
        """The plug-in's views of :attr:`data` (``{}`` for a kind without any), made once."""
        if self._views is None:
            make = getattr(self._plugin, "result_views", None)
            self._views = dict(make(self.data, self.names)) if callable(make) else {}
        return self._views

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        views = self.views()
        if name in views:
            return views[name]
        have = ", ".join(sorted(views)) or "none"
        raise AttributeError(f"Result of predictor {self.predictor!r} has no {name!r} (its views: {have}; "
                             "r.data holds the raw result)")

    def __getitem__(self, key: str) -> Any:
        """``r["bboxes"]``: :attr:`data`'s entry (the runtime's first result form)."""
        return self.data[key]

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def keys(self):
        """:attr:`data`'s keys (so ``dict(r)`` and ``r.keys()`` work as on the runtime's result dicts)."""
        return self.data.keys()

    def __len__(self) -> int:
        """The number of detections of a kind with ``.boxes``, else 1 (one prediction)."""
        boxes = self.views().get("boxes")
        return len(boxes) if boxes is not None else 1

    def __repr__(self) -> str:
        keys = ", ".join(f"{k}: {tuple(np.shape(v))}" for k, v in self.data.items() if not isinstance(v, str))
        frame = f", frame={self.frame}" if self.frame is not None else ""
        return f"Result(path={self.path!r}{frame}, predictor={self.predictor!r}, {keys})"

    def _context(self) -> tuple[SimpleNamespace, argparse.Namespace]:
        """What the plug-in's ``draw``/``record`` read from the runtime predictor (labels, palette) and from
        oars-infer's flags (``--draw-threshold``: None is the plug-in's default)."""
        return (SimpleNamespace(labels=self.labels, palette=self.palette),
                argparse.Namespace(draw_threshold=self.draw_threshold))

    def _plugin_method(self, method: str) -> Any:
        """The image plug-in's ``draw``/``record``, or None for a kind that does not draw or record per image
        (its task's hook then gives ``picture``/``record`` in :attr:`data`)."""
        fn = getattr(self._plugin, method, None)
        return fn if callable(fn) and self.orig_img is not None else None

    def _missing(self, what: str) -> DeployError:
        return DeployError(f"Result.{what}: predictor {self.predictor!r} ({self._plugin.describes}) gives no "
                           f"{'picture' if what == 'plot' else 'record'} for {self.path}")

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
            return draw(self.orig_img, self.data, ctx, args)
        if self.data.get("picture") is None:
            raise self._missing("plot")
        return self.data["picture"]

    def save(self, path: str) -> str:
        """Write :meth:`plot` to ``path`` (the format from its suffix, e.g. ``.png``/``.jpg``), atomically.

        Returns:
            ``path``.

        Raises:
            DeployError: ``path`` is the input image itself (outputs never replace inputs), or its suffix is not an
                image format OpenCV writes.
        """
        if osp.exists(path) and osp.exists(self.path) and osp.samefile(path, self.path):
            raise DeployError(f"Result.save: {path} is the input image; choose another file (outputs never replace "
                              "inputs)")
        suffix = osp.splitext(path)[1].lower() or ".png"
        try:
            ok, buf = cv2.imencode(suffix, self.plot())
        except cv2.error:
            ok = False
        if not ok:
            raise DeployError(f"Result.save: cannot write an image with suffix {suffix!r} ({path}); use .png or .jpg")
        return atomic_write(path, buf.tobytes())

    def to_dict(self) -> dict:
        """The record ``oars-infer`` and ``tools/infer.py`` write to results.jsonl for this input
        (``oars_deploy.records``; ``predictor``, ``input``, and the plug-in's fields), as a dict. A segmentation
        record names the label PNG (``<stem>.png``) those tools write beside results.jsonl; here nothing is
        written. A frame of a video adds ``frame`` (its index)."""
        make = self._plugin_method("record")
        if make is None:
            if self.data.get("record") is None:
                raise self._missing("to_dict")
            record = self.data["record"].to_json()
        else:
            ctx, _ = self._context()
            stem = osp.splitext(osp.basename(self.path))[0]
            with tempfile.TemporaryDirectory() as scratch:  # a plug-in's record may write its side file (label PNG)
                record = make(scratch, self.path, stem, self.orig_img, self.data, ctx).to_json()
        return record if self.frame is None else {**record, "frame": self.frame}

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text (one results.jsonl line when ``indent`` is None)."""
        return json.dumps(self.to_dict(), indent=indent)

