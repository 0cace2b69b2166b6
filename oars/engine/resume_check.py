"""Refuse to resume a checkpoint into a different model.

mmengine resumes with ``strict=False``: a changed ``num_classes`` or width loads what fits, warns, and the run
fails later inside the optimizer (``size mismatch`` of a momentum buffer) or trains a half-initialised head.
The checkpoint stores its training config (``meta.config_yaml``); comparing its ``model`` subtree with the
config of this run names the keys that differ before anything is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from mmengine.config import Config

from .checkpoint import CheckpointError, checkpoint_meta

# Parts of the model config that do not shape the weights: inference thresholds, and pretrained-weight
# sources (``init``), which resuming replaces with the checkpoint's own weights.
_IGNORED = ("model.test_cfg",)
_IGNORED_LEAF_PARTS = ("init",)


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """Nested mappings and lists as ``{dotted.key: leaf}`` (list items by index: ``neck.in_channels.0``)."""
    if isinstance(value, Mapping):
        if not value:
            return {prefix: {}}
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}"))
        return out
    if isinstance(value, (list, tuple)):
        if not value:
            return {prefix: []}
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: value}


def _ignored(key: str) -> bool:
    return key.startswith(_IGNORED) or any(part in _IGNORED_LEAF_PARTS for part in key.split("."))


def model_differences(saved_model: Any, current_model: Any) -> list[tuple[str, Any, Any]]:
    """``(dotted key, value in the checkpoint's config, value now)`` for every model setting that differs;
    a key present on one side only has ``<absent>`` on the other."""
    old, new = flatten(saved_model or {}, "model"), flatten(current_model or {}, "model")
    absent = "<absent>"
    return [(k, old.get(k, absent), new.get(k, absent)) for k in sorted(set(old) | set(new))
            if not _ignored(k) and old.get(k, absent) != new.get(k, absent)]


def check_resume_config(cfg: Config, checkpoint: str) -> None:
    """Raise when ``checkpoint`` was trained with another model than ``cfg`` describes.

    A checkpoint without ``meta.config_yaml`` (not written by oars) cannot be compared and is let through.

    Raises:
        CheckpointError: naming the checkpoint and every differing key with ``old → new``.
    """
    from oars.config import config_to_yaml

    meta = checkpoint_meta(checkpoint) or {}
    saved_text = meta.get("config_yaml")
    if not isinstance(saved_text, str):
        return
    saved = yaml.safe_load(saved_text) or {}
    current = yaml.safe_load(config_to_yaml({"model": cfg.get("model", {})}))
    diffs = model_differences(saved.get("model"), current.get("model"))
    if not diffs:
        return
    shown = "; ".join(f"{k}: {old!r} → {new!r}" for k, old, new in diffs[:12])
    more = f"; and {len(diffs) - 12} more" if len(diffs) > 12 else ""
    raise CheckpointError(
        f"--resume: {checkpoint} was trained with a different model than {cfg.filename} now builds "
        f"(checkpoint → now): {shown}{more}. Resume with the settings it was trained with (its config is "
        "stored in the checkpoint's meta.config_yaml and in the work dir's config.yaml), or start a new run "
        f"in another --work-dir with -o load_from={checkpoint} to begin from its weights")
