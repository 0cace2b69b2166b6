"""GAN generators behind ``oars-serve``: the record ``oars-infer`` writes for one sample or one image, plus the
pictures themselves (the server writes no files a client could read).

Requests, by the export's ``gan.kind``:

- ``noise`` (DCGAN/CGAN): an ``application/json`` body ``{"seed": S, "index": I, "label": K}`` (all optional:
  seed 0, index 0, label as ``oars-infer``'s class sweep ``I % num_classes``) -> sample ``I`` of
  ``oars-infer --seed S`` (the same noise row, so the same picture), one request per sample;
- ``image`` (pix2pix/CycleGAN): the image as the raw body or the multipart field ``file``;
- ``image_attrs`` (StarGAN/AttGAN/STGAN): multipart with ``file`` and the text field ``attrs`` (``Male=1,...``,
  ``oars-infer --attrs``' syntax), STGAN also ``src_attrs``.

Answer: the :class:`~.records.GANImagesRecord` JSON (``input`` the uploaded name for images; null for
noise samples) with ``png_base64``: ``{name: base64 PNG}`` for every name in its ``images``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.predictors.gan_images.cli import (
    attribute_vectors,
    noise_record,
    sample_name,
    translation_names,
    translation_record,
)
from oars_deploy.predictors.gan_images.config import make_noise, side_by_side
from oars_deploy.predictors.gan_images.predictor import GANPredictor
from oars_deploy.serve.models import ServedModel
from oars_deploy.serve.requests import (
    FILE_FIELD,
    MULTIPART,
    RAW_IMAGE_TYPES,
    RequestError,
    decode_image,
    media_type,
    multipart_fields,
    request_payload,
    safe_name,
)

JSON_TYPE = "application/json"
NOISE_FIELDS = ("seed", "index", "label")
#: the highest sample index a request may ask for (its noise row is drawn with all rows before it)
MAX_INDEX = 4095
ATTR_FIELDS = ("attrs", "src_attrs")


@dataclass
class GANItem:
    """One decoded request: a noise row (``noise`` float32 [z_dim], ``seed``, ``index``, ``label``) or an image
    (``image`` BGR uint8 [H, W, 3], ``attrs``/``src_attrs`` float32 [K] or None)."""

    noise: np.ndarray | None = None
    seed: int = 0
    index: int = 0
    label: int | None = None
    image: np.ndarray | None = None
    attrs: np.ndarray | None = None
    src_attrs: np.ndarray | None = None


def png_base64(image: np.ndarray) -> str:
    """A BGR uint8 image as base64 PNG text (what ``cv2.imwrite`` would write to a .png file)."""
    ok, data = cv2.imencode(".png", image)
    if not ok:
        raise DeployError("could not encode the generated picture as PNG")
    return base64.b64encode(data.tobytes()).decode("ascii")


def _int_field(doc: dict, key: str, default: int | None, low: int, high: int | None) -> int | None:
    value = doc.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(400, f"field {key!r}: expected an integer, got {json.dumps(value)}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise RequestError(400, f"field {key!r}: {value} is outside {bound}")
    return value


class GANModel(ServedModel):
    """A GAN generator (:class:`~oars_deploy.predictors.gan_images.predictor.GANPredictor`); see the module
    docstring for its requests and answers."""

    raw_types: ClassVar[tuple[str, ...]] = RAW_IMAGE_TYPES
    batch_inference: ClassVar[bool] = False

    def __init__(self, model_dir: str, deploy: dict, device: str, backend: str) -> None:
        super().__init__(model_dir, deploy, device, backend)
        self.predictor = GANPredictor(model_dir, device=device, backend=backend)
        self.gan: dict = self.predictor.gan
        self.batch_size = self.predictor.batch_size
        if self.gan["kind"] == "noise":
            self.raw_types = (JSON_TYPE,)

    # ---- requests ---------------------------------------------------------------------------------------------
    def decode_request(self, body: bytes, content_type: str | None, filename: str | None,
                       max_pixels: int) -> tuple[str | None, GANItem]:
        """(the record's ``input``: the file name for images, None for noise samples; the decoded item)."""
        if self.gan["kind"] == "noise":
            return None, self._noise_item(body, content_type)
        if self.gan["kind"] == "image_attrs" and media_type(content_type) != MULTIPART:
            raise RequestError(415, f"this model edits attributes: send multipart/form-data with the image as "
                                    f"{FILE_FIELD!r} and the text field 'attrs' (e.g. attrs="
                                    f"{self.gan['attr_names'][0]}=1)")
        data, name = request_payload(body, content_type, self.raw_types, filename)
        item = GANItem(image=self.decode(data, name, max_pixels))
        if self.gan["kind"] == "image_attrs":
            item.attrs, item.src_attrs = self._attributes(multipart_fields(body, content_type or ""))
        return name, item

    def _noise_item(self, body: bytes, content_type: str | None) -> GANItem:
        if media_type(content_type) != JSON_TYPE:
            fields = '"seed": S, "index": I' + (', "label": K' if self._classes() else '')
            raise RequestError(415, f"this model generates from noise: send {JSON_TYPE} {{{fields}}}, got "
                                    f"Content-Type {media_type(content_type) or '(none)'!r}")
        try:
            doc = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RequestError(400, f"the body is not valid JSON ({err})") from None
        if not isinstance(doc, dict):
            raise RequestError(400, f"the body must be a JSON object with {', '.join(NOISE_FIELDS)}")
        unknown = sorted(set(doc) - set(NOISE_FIELDS))
        if unknown:
            raise RequestError(400, f"unknown field(s) {', '.join(unknown)}; expected {', '.join(NOISE_FIELDS)}")
        seed = _int_field(doc, "seed", 0, 0, 2**63 - 1)
        index = _int_field(doc, "index", 0, 0, MAX_INDEX)
        classes = self._classes()
        if not classes and doc.get("label") is not None:
            raise RequestError(400, "field 'label': this generator is not class-conditional")
        label = _int_field(doc, "label", index % classes if classes else None, 0, classes - 1 if classes else None)
        noise = make_noise(seed, index + 1, self.gan["z_dim"])[index]
        return GANItem(noise=noise, seed=seed, index=index, label=label)

    def _classes(self) -> int:
        return int(self.gan.get("num_classes") or 0) if "label" in self.predictor.input_names else 0

    def _attributes(self, fields: dict) -> tuple[np.ndarray | None, np.ndarray | None]:
        texts = {}
        for key in ATTR_FIELDS:
            if key in fields:
                texts[key] = fields[key][0].decode("utf-8", "replace").strip()
        if "attrs" not in texts:
            raise RequestError(400, f"missing the text field 'attrs' (NAME=0|1,...; names: "
                                    f"{', '.join(self.gan['attr_names'])})")
        try:
            return attribute_vectors(self.gan, texts["attrs"], texts.get("src_attrs"))
        except DeployError as err:
            raise RequestError(400, str(err).replace("--src-attrs", "src_attrs").replace("--attrs", "attrs")) from None

    def decode(self, data: bytes, name: str, max_pixels: int) -> np.ndarray:
        """BGR uint8 [H, W, 3] (:func:`oars_deploy.serve.requests.decode_image`)."""
        return decode_image(data, name, max_pixels)

    def load_path(self, path: str) -> Any:
        """Not used: batch inference (``oars-infer --ray``) does not run generators."""
        raise DeployError("GAN generators are run with oars-infer (no --ray)")

    # ---- the model --------------------------------------------------------------------------------------------
    def warmup(self) -> None:
        """One sample (noise models) or one blank image of ``gan.input_size``."""
        if self.gan["kind"] == "noise":
            labels = np.zeros(1, np.int64) if self._classes() else None
            self.predictor.generate(make_noise(0, 1, self.gan["z_dim"]), labels)
            return
        h, w = self.gan["input_size"]
        k = len(self.gan.get("attr_names") or [])
        self.predictor.translate([np.zeros((h, w, 3), np.uint8)], np.zeros(k, np.float32) if k else None)

    def predict(self, inputs: Sequence[GANItem]) -> list[tuple[np.ndarray | None, np.ndarray]]:
        """(the input as the model saw it or None, the output) per item, BGR uint8; one graph call."""
        if self.gan["kind"] == "noise":
            labels = np.array([it.label for it in inputs], np.int64) if self._classes() else None
            outputs = self.predictor.generate(np.stack([it.noise for it in inputs]), labels)
            return [(None, out) for out in outputs]
        stacked = {key: (np.stack([getattr(it, key) for it in inputs]) if getattr(inputs[0], key) is not None
                         else None) for key in ATTR_FIELDS}
        shown, outputs = self.predictor.translate([it.image for it in inputs], stacked["attrs"],
                                                  stacked["src_attrs"])
        return list(zip(shown, outputs))

    def record(self, name: str | None, item: GANItem, result: tuple[np.ndarray | None, np.ndarray]) -> dict:
        """oars-infer's record of this sample / image plus ``png_base64`` (module docstring)."""
        shown, output = result
        if item.noise is not None:
            image = sample_name(item.index)
            doc = noise_record(image, item.seed, item.index, item.label, self.gan).to_json()
            return {**doc, "png_base64": {image: png_base64(output)}}
        label = name or safe_name(None)
        names = translation_names(label)
        doc = translation_record(label, names, item.attrs, item.src_attrs, self.gan).to_json()
        pictures = {names[0]: png_base64(output), names[1]: png_base64(side_by_side(shown, output))}
        return {**doc, "png_base64": pictures}

    def summary(self) -> dict:
        """The base summary plus what a request may carry (``fields``)."""
        out = super().summary()
        if self.gan["kind"] == "noise":
            out["accepts"] = [JSON_TYPE]
            out["fields"] = {"seed": "int >= 0 (default 0)", "index": f"int in [0, {MAX_INDEX}] (default 0)"}
            if self._classes():
                out["fields"]["label"] = f"class id in [0, {self._classes() - 1}] (default index % num_classes)"
                out["labels"] = list(self.gan.get("class_names") or [])
        elif self.gan["kind"] == "image_attrs":
            out["accepts"] = [MULTIPART]
            out["fields"] = {FILE_FIELD: "the image", "attrs": "NAME=0|1,... (unnamed: 0)"}
            if "src_attrs" in self.predictor.input_names:
                out["fields"]["src_attrs"] = "NAME=0|1,... the source image's attributes (unnamed: 0)"
            out["attr_names"] = list(self.gan["attr_names"])
        return out
