"""The model behind ``oars-serve`` and ``oars-infer --ray``: one :class:`ServedModel` class per predictor plug-in
kind, which the plug-in of deploy.yaml's ``predictor`` key (:func:`oars_deploy.plugins.predictor_for`) names
(:meth:`~oars_deploy.plugins.PredictorPlugin.served_model`; None: that kind is not served).

Each wraps the runtime predictor ``oars-infer`` runs (:class:`oars_deploy.predictor.Predictor` for image models:
:class:`ImageModel`; a clip or feature classifier's for :class:`ScoreModel`'s subclasses, and a generator's, in
their plug-ins' ``served`` modules), loaded once, and turns one input into the same result record
(:mod:`oars_deploy.records`) that ``oars-infer`` writes to results.jsonl for that file: ``load_path`` reads a file
as ``oars-infer`` reads it, ``decode`` reads request bytes into the same input, ``predict`` runs a batch,
``record`` makes the record's JSON.
"""

from __future__ import annotations

import os
import os.path as osp
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError
from oars_deploy.outputs import read_image
from oars_deploy.plugins import get_predictor, predictor_for, predictor_names
from oars_deploy.predictor import Predictor
from oars_deploy.serve.requests import RAW_IMAGE_TYPES, RequestError, decode_image, request_payload


class ServedModel(ABC):
    """One loaded export: inputs from files or request bytes, a batched predict, the results.jsonl record.

    Attributes:
        kind: the predictor plug-in name. batch_size: the graph's static batch, or None (dynamic).
        raw_types: Content-Type prefixes a raw request body may have. plugin: the runtime plug-in.
    """

    raw_types: ClassVar[tuple[str, ...]] = RAW_IMAGE_TYPES
    #: whether ``oars-infer --ray`` runs this kind (files in, records out)
    batch_inference: ClassVar[bool] = True

    def __init__(self, model_dir: str, deploy: dict, device: str, backend: str) -> None:
        self.model_dir = model_dir
        self.deploy = deploy
        self.plugin = predictor_for(deploy, osp.join(model_dir, DEPLOY_FILE))
        self.kind: str = self.plugin.name
        self.batch_size: int | None = None

    @abstractmethod
    def load_path(self, path: str) -> Any:
        """One input file read as ``oars-infer`` reads it. Raises DeployError when it cannot be read."""

    @abstractmethod
    def decode(self, data: bytes, name: str, max_pixels: int) -> Any:
        """One request body's input. Raises :class:`RequestError` (4xx) when it is not a usable input."""

    def decode_request(self, body: bytes, content_type: str | None, filename: str | None,
                       max_pixels: int) -> tuple[str | None, Any]:
        """(the record's ``input`` name, the model input) of a whole request body: the raw body of one of
        :attr:`raw_types` or the multipart field ``file`` (:func:`request_payload`), then :meth:`decode`. Models
        whose requests carry more than one input (GAN attributes, noise fields) override this."""
        data, name = request_payload(body, content_type, self.raw_types, filename)
        return name, self.decode(data, name, max_pixels)

    @abstractmethod
    def predict(self, inputs: Sequence[Any]) -> list[Any]:
        """One result per input (the runtime predictor's, in original pixels), in order."""

    @abstractmethod
    def record(self, name: str, item: Any, result: Any) -> dict:
        """The results.jsonl record's JSON of one input (``name``: its ``input`` field)."""

    def warmup(self) -> None:
        """One model call on a blank input of the graph's shape (first-call allocations happen before the server
        reports itself healthy)."""
        shape = [v if isinstance(v, int) and v > 0 else 1 for v in self.deploy["input"]["shape"]]
        self.predictor.infer(np.zeros([self.batch_size or 1, *shape[1:]], np.float32))

    def summary(self) -> dict:
        """What ``GET /model`` answers: the deploy.yaml facts a client needs (no server paths)."""
        spec = self.deploy.get("input", {})
        model = self.deploy.get("model", {})
        return {"predictor": self.kind, "describes": self.plugin.describes, "name": model.get("name"),
                "task": model.get("task"), "labels": list(self.deploy.get("labels", [])),
                "input": {"name": spec.get("name"), "shape": spec.get("shape"), "dtype": spec.get("dtype")},
                "batch": self.batch_size if self.batch_size is not None else "dynamic",
                "accepts": [t + ("*" if t.endswith("/") else "") for t in self.raw_types] + ["multipart/form-data"]}


class ImageModel(ServedModel):
    """Image models, run by :class:`oars_deploy.predictor.Predictor` (the one ``oars-infer`` runs): what every
    image plug-in's :meth:`~oars_deploy.plugins.PredictorPlugin.served_model` answers."""

    def __init__(self, model_dir: str, deploy: dict, device: str, backend: str) -> None:
        super().__init__(model_dir, deploy, device, backend)
        self.predictor = Predictor(model_dir, device=device, backend=backend)
        self.batch_size = self.predictor.batch_size

    def warmup(self) -> None:
        """One :meth:`predict` of a blank image of the graph's (H, W) (64x64 when dynamic)."""
        h, w = (v if v > 0 else 64 for v in self.predictor.input_shape[2:])
        self.predict([np.zeros((h, w, 3), np.uint8)])

    def load_path(self, path: str) -> np.ndarray:
        """BGR uint8 [H, W, 3] (:func:`oars_deploy.outputs.read_image`)."""
        return read_image(path)

    def decode(self, data: bytes, name: str, max_pixels: int) -> np.ndarray:
        """BGR uint8 [H, W, 3] (:func:`oars_deploy.serve.requests.decode_image`)."""
        return decode_image(data, name, max_pixels)

    def predict(self, inputs: Sequence[np.ndarray]) -> list[dict]:
        """:meth:`Predictor.predict`: one result dict per image."""
        return self.predictor.predict(list(inputs))

    def record(self, name: str, item: np.ndarray, result: dict) -> dict:
        """The record ``oars-infer`` writes for a file called ``name``: the plug-in's own
        :meth:`~oars_deploy.predictors.images.ImagePlugin.result_record` (nothing written: a label-map record names
        ``<stem>.png`` as oars-infer's does)."""
        if "label" in result and hasattr(result["label"], "get"):  # a CuPy label map (--array-module cupy)
            result = {**result, "label": result["label"].get()}
        stem = osp.splitext(osp.basename(name))[0]
        return self.plugin.result_record(name, stem, item, result, self.predictor).to_json()


class ScoreModel(ServedModel):
    """Top-k classifiers of files (clips, feature files): ``load(path) -> (input, meta)``, ``infer``, ``result``
    top-k (the runtime ``ScorePredictor`` interface). A request body is written to a private temporary file (the
    server's name, an allowed suffix), read by the same ``load``, and removed. A plug-in's subclass sets
    :attr:`predictor_class` (built on the export folder; its ``batch_size`` is the server's), :attr:`suffixes`,
    :attr:`default_suffix` and :attr:`record_class` (a record with ``from_result``)."""

    suffixes: ClassVar[tuple[str, ...]] = ()
    default_suffix: ClassVar[str] = ""
    record_class: Any = None
    predictor_class: Any = None
    topk: int = 5

    def __init__(self, model_dir: str, deploy: dict, device: str, backend: str) -> None:
        super().__init__(model_dir, deploy, device, backend)
        self.predictor = self.predictor_class(model_dir, device=device, backend=backend)
        self.batch_size = self.predictor.batch_size

    def load_path(self, path: str) -> tuple[np.ndarray, dict]:
        """(model input, meta) of one file (the predictor's ``load``)."""
        return self.predictor.load(path)

    def decode(self, data: bytes, name: str, max_pixels: int) -> tuple[np.ndarray, dict]:
        """The body through a temporary file; 400 when the predictor cannot read it."""
        suffix = osp.splitext(name)[1].lower()
        suffix = suffix if suffix in self.suffixes else self.default_suffix
        fd, tmp = tempfile.mkstemp(prefix="oars-serve-", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            clip, meta = self.predictor.load(tmp)
        except DeployError as err:
            raise RequestError(400, f"{name}: {str(err).replace(tmp, 'the body')}") from None
        finally:
            os.unlink(tmp)
        return clip, {**meta, "path": name}

    def predict(self, inputs: Sequence[tuple[np.ndarray, dict]]) -> list[dict]:
        """Top-k results ``{'path', 'topk', 'total_frames', 'frame_inds', ...}`` (the predictor's ``result``)."""
        scores = self.predictor.infer(np.stack([x for x, _ in inputs]))
        return [self.predictor.result(meta, row, self.topk) for (_, meta), row in zip(inputs, scores)]

    def record(self, name: str, item: tuple[np.ndarray, dict], result: dict) -> dict:
        """The clip / feature record of ``result`` with ``input`` = ``name``."""
        return self.record_class.from_result({**result, "path": name}).to_json()


def served_models() -> dict[str, type[ServedModel]]:
    """``{predictor name: ServedModel class}`` of every served kind: each plug-in's
    :meth:`~oars_deploy.plugins.PredictorPlugin.served_model` (None: not served)."""
    found = {name: get_predictor(name).served_model() for name in predictor_names()}
    return {name: cls for name, cls in found.items() if cls is not None}


def served_class(model_dir: str, flag: str = "--model-dir") -> tuple[dict, type[ServedModel]]:
    """(deploy.yaml, the :class:`ServedModel` class of its predictor kind) of an export folder, read before
    anything heavy is loaded (``oars-serve`` checks a folder with it before Ray starts).

    Raises:
        DeployError: no deploy.yaml, an invalid one, or a kind the server does not serve (localisers), naming
            ``flag`` or the file.
    """
    path = osp.join(model_dir, DEPLOY_FILE)
    if not osp.isfile(path):
        raise DeployError(f"{flag} {model_dir}: no {DEPLOY_FILE} there (expected an export folder written by "
                          f"tools/export.py: deploy.yaml + model.onnx)")
    deploy = read_deploy_yaml(path)
    plugin = predictor_for(deploy, path)
    cls = plugin.served_model()
    if cls is None:
        raise DeployError(f"{path}: predictor {plugin.name!r} is not served by oars-serve (it serves "
                          f"{', '.join(served_models())}); run it with oars-infer")
    return deploy, cls


def load_served(model_dir: str, device: str = "cpu", backend: str = "onnxruntime") -> ServedModel:
    """The export of ``model_dir`` (deploy.yaml + model) loaded for serving, by its predictor kind
    (:func:`served_class`, whose errors it raises)."""
    deploy, cls = served_class(model_dir)
    return cls(model_dir, deploy, device, backend)
