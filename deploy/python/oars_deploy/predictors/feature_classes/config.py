"""The deploy.yaml of a frame-feature classifier (AttentionLSTM / AttentionCluster / NeXtVLAD): its ``features``
section and the packed input tensor.

A deploy.yaml with a ``features`` section describes a model whose input is one packed float32 tensor
``features`` [B, T, D_1 + ... + D_k + 1] (``input.layout`` ``NTD``): the modalities' per-frame features
concatenated along the last axis in the order of ``features.modalities``, then one channel that is the valid-frame
mask (1.0 on the frames of the file, 0.0 on the padding after them); T = ``features.max_frames``. The section:

- ``modalities``: ``[{name, dim}, ...]`` in packing order (the model's);
- ``max_frames``: T; files with more frames keep ``max_frames`` of them, one per equal segment, at its centre;
- ``min_quantized_value`` / ``max_quantized_value``: uint8 arrays are dequantised over that range (YouTube-8M's
  ``Dequantize``); float arrays are used as they are (:mod:`oars_deploy.predictors.feature_classes.files`).

``preprocess`` is empty: everything is in this section.
"""

from __future__ import annotations

from oars_deploy.errors import DeployError

FEATURES_KEY = "features"  # deploy.yaml's section of a frame-feature model

__all__ = ["FEATURES_KEY", "FEATURE_LAYOUT", "packed_width", "validate_features"]
FEATURE_LAYOUT = "NTD"


def packed_width(section: dict) -> int:
    """Channels of the packed input: the modalities' widths plus the mask channel."""
    return sum(int(m["dim"]) for m in section["modalities"]) + 1


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def validate_features(data: dict, path: str) -> None:
    """Check the ``features`` section and the ``input`` of a feature model's deploy.yaml; :class:`DeployError`
    naming ``path`` and the key."""
    section = data[FEATURES_KEY]
    if not isinstance(section, dict):
        raise DeployError(f"{path}: {FEATURES_KEY} must be a mapping, got {section!r}")
    mods = section.get("modalities")
    if (not isinstance(mods, list) or not mods
            or not all(isinstance(m, dict) and isinstance(m.get("name"), str) and _positive_int(m.get("dim"))
                       for m in mods)):
        raise DeployError(f"{path}: {FEATURES_KEY}.modalities must be a non-empty list of {{name, dim}} (dim a "
                          f"positive int), got {mods!r}")
    if len({m["name"] for m in mods}) != len(mods):
        raise DeployError(f"{path}: {FEATURES_KEY}.modalities names a modality twice: {[m['name'] for m in mods]}")
    if not _positive_int(section.get("max_frames")):
        raise DeployError(f"{path}: {FEATURES_KEY}.max_frames must be a positive int, got "
                          f"{section.get('max_frames')!r}")
    lo, hi = section.get("min_quantized_value"), section.get("max_quantized_value")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi)) or hi <= lo:
        raise DeployError(f"{path}: {FEATURES_KEY}.min_quantized_value / max_quantized_value must be numbers with "
                          f"min < max, got {lo!r} / {hi!r}")
    spec = data["input"]
    want = [section["max_frames"], packed_width(section)]
    shape = spec["shape"]
    if spec["layout"] != FEATURE_LAYOUT:
        raise DeployError(f"{path}: input.layout of a feature model must be {FEATURE_LAYOUT}, got {spec['layout']!r}")
    if (not isinstance(shape, list) or len(shape) != 3 or not isinstance(shape[0], int)
            or list(shape[1:]) != want):
        raise DeployError(f"{path}: input.shape must be [B, {want[0]}, {want[1]}] ([B, max_frames, sum of the "
                          f"modalities' dims + 1 mask channel], B = -1 when dynamic), got {shape!r}")
