"""deploy.yaml, read and validated: everything a predictor needs besides the model file (labels, input spec,
preprocessing as data, outputs, what post-processing is inside the graph).

This is the schema every predictor implements (this package, deploy/cpp); ``oars.export.deploy_config`` writes
it from a training config. Step semantics, applied in order to the BGR uint8 HxWx3 image from ``cv2.imread``:

- ``Resize {size: [W, H], keep_ratio, interpolation: linear}``: keep_ratio false -> ``cv2.resize`` to (W, H);
  keep_ratio true -> fit inside: ``f = min(W / w, H / h)``, new size ``(int(w * f + 0.5), int(h * f + 0.5))``,
  at least 1 pixel per side (no resize when that is the image's own size). Interpolation ``linear`` =
  ``cv2.INTER_LINEAR``.
- ``Normalize {mean, std, to_rgb}``: float32 ``((x[..., ::-1] if to_rgb else x) - mean) / std``.
- ``Pad {size: [W, H], value, size_divisor}``: bottom/right to (W, H) with ``value`` (a number, or one per channel
  of the normalised image); ``size_divisor`` is informational (W and H are multiples of it).
- ``Permute``: HWC -> CHW and a batch axis.

``predictor`` (optional top-level key): the plug-in that runs the model (:mod:`oars_deploy.plugins`: it validates
its own section, e.g. ``gan``, ``sampling``, ``features``, and the input and steps its models take). Exports
written before the key existed are read with the plug-in their content implies
(:func:`oars_deploy.plugins.predictor_kind`); a name no plug-in has is an error listing the known ones.
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence
from typing import Any

import yaml

from oars_deploy.errors import DeployError
from oars_deploy.plugins import PREDICTOR_KEY, predictor_for

DEPLOY_FILE = "deploy.yaml"
DEPLOY_VERSION = 1
STEP_KEYS = {
    "Resize": ("size", "keep_ratio", "interpolation"),
    "Normalize": ("mean", "std", "to_rgb"),
    "Pad": ("size", "value"),
    "Permute": (),
}
TOP_KEYS = ("version", "model", "labels", "input", "preprocess", "outputs", "postprocess")
MODEL_KEYS = ("name", "task", "onnx")
INPUT_KEYS = ("name", "shape", "dtype", "layout", "color")


def read_deploy_yaml(path: str) -> dict:
    """Read and validate a deploy.yaml; errors name the file and the key."""
    if not osp.isfile(path):
        raise DeployError(f"deploy file not found: {path} (written by tools/export.py next to model.onnx)")
    with open(path) as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as err:
            raise DeployError(f"{path}: not valid YAML: {err}") from None
    validate_deploy(data, path)
    return data


def validate_deploy(data: Any, path: str = DEPLOY_FILE) -> None:
    """Check version, required keys and step contents; raise :class:`DeployError` naming ``path`` and the key."""
    if not isinstance(data, dict):
        raise DeployError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    for key in TOP_KEYS:
        if key not in data:
            raise DeployError(f"{path}: missing key {key!r} (required: {', '.join(TOP_KEYS)})")
    if data["version"] != DEPLOY_VERSION:
        raise DeployError(f"{path}: version {data['version']!r} is not supported (this code reads version "
                          f"{DEPLOY_VERSION}); re-export the model with tools/export.py")
    _require(data["model"], MODEL_KEYS, path, "model")
    precision = data["model"].get("precision", "fp32")
    if precision not in ("fp32", "fp16", "int8"):
        raise DeployError(f"{path}: model.precision must be fp32, fp16 or int8, got {precision!r}")
    labels = data["labels"]
    if not isinstance(labels, list) or not labels or not all(isinstance(v, str) for v in labels):
        raise DeployError(f"{path}: labels must be a non-empty list of class names, got {labels!r}")
    if "palette" in data:
        pal = data["palette"]
        if not isinstance(pal, list) or len(pal) != len(labels) or not all(
                isinstance(c, list) and len(c) == 3 for c in pal):
            raise DeployError(f"{path}: palette must have one [R, G, B] per label ({len(labels)}), got {pal!r}")
    _require(data["input"], INPUT_KEYS, path, "input")
    _plugin_for(data, path).validate(data, path)
    outputs = data["outputs"]
    if not isinstance(outputs, list) or not outputs:
        raise DeployError(f"{path}: outputs must be a non-empty list, got {outputs!r}")
    for i, out in enumerate(outputs):
        _require(out, ("name", "shape", "dtype"), path, f"outputs[{i}]")
    _require(data["postprocess"], ("type",), path, "postprocess")
    check_label_count(data, path)


def _plugin_for(data: dict, path: str) -> Any:
    """The predictor plug-in that validates the kind-specific part of ``data`` (its section, input, steps).

    ``predictor`` present: it must name a registered plug-in (a :class:`DeployError` lists the known ones). Absent
    (an export written before the key existed): the plug-in :func:`oars_deploy.plugins.predictor_kind` infers;
    when none recognises the content, the image-model checks run, as they did before plug-ins existed (the CLI
    then says that no predictor runs the model). The registry imports no plug-in module until asked, and nothing
    of this one, so this module imports it at the top.
    """
    if PREDICTOR_KEY in data:
        return predictor_for(data, path)
    try:
        return predictor_for(data, path)
    except DeployError:
        return _ImageChecks()


class _ImageChecks:
    """The kind-specific checks of a deploy.yaml no plug-in recognises: those of an image model."""

    def validate(self, data: dict, path: str) -> None:
        validate_image_input(data, path)


def validate_image_input(data: dict, path: str) -> None:
    """Check an image model's ``input.shape`` ([B, 3, H, W]) and ``preprocess`` steps (:data:`STEP_KEYS`); a
    :class:`DeployError` naming ``path`` and the key. The image plug-ins (and image GANs) call it."""
    _validate_image_input(data, path)


def _validate_image_input(data: dict, path: str) -> None:
    shape = data["input"]["shape"]
    if not isinstance(shape, list) or len(shape) != 4 or not all(isinstance(v, int) for v in shape):
        raise DeployError(f"{path}: input.shape must be [B, 3, H, W] (B = -1 when dynamic), got {shape!r}")
    steps = data["preprocess"]
    if not isinstance(steps, list):
        raise DeployError(f"{path}: preprocess must be a list of steps, got {type(steps).__name__}")
    for i, step in enumerate(steps):
        kind = step.get("type") if isinstance(step, dict) else None
        if kind not in STEP_KEYS:
            raise DeployError(f"{path}: preprocess[{i}].type must be one of {list(STEP_KEYS)}, got {kind!r}")
        _require(step, STEP_KEYS[kind], path, f"preprocess[{i}] ({kind})")


def check_label_count(data: dict, path: str = DEPLOY_FILE, num_classes: int | None = None) -> None:
    """Raise :class:`DeployError` naming ``path`` and both counts when ``labels`` names fewer classes than the model
    outputs: ``num_classes`` when the caller knows it (e.g. from the ONNX output shape), else
    ``postprocess.num_classes`` (written by tools/export.py). Without either, nothing to check."""
    if num_classes is None:
        num_classes = data.get("postprocess", {}).get("num_classes")
        where = "postprocess.num_classes"
    else:
        where = "the model's outputs"
    if num_classes is None:
        return
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise DeployError(f"{path}: postprocess.num_classes must be a positive int, got {num_classes!r}")
    labels = data.get("labels") or []
    if len(labels) < num_classes:
        raise DeployError(f"{path}: labels has {len(labels)} names but the model has {num_classes} classes "
                          f"({where}); add the missing names (one per class, in class-id order) or re-export")


def _require(section: Any, keys: Sequence[str], path: str, where: str) -> None:
    if not isinstance(section, dict):
        raise DeployError(f"{path}: {where} must be a mapping, got {section!r}")
    for key in keys:
        if key not in section:
            raise DeployError(f"{path}: missing key {where}.{key}")
