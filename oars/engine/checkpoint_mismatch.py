"""The one message for a checkpoint that does not fit the model a config builds.

Loading an FCOS checkpoint with the YOLOv3 config used to print every missing and unexpected key (21–22 KB) with a
hint about ``-o`` overrides that missed the cause. Every checkpoint oars writes stores its training config
(``meta.config_yaml``) and the run's name (``meta.experiment_name``: the config file's name and a suffix), so the
message says what the checkpoint is: "trained as SingleStageDetector (ResNet backbone, FCOSHead) (config
fcos_r50_fpn_1x_coco.yaml); … builds YOLOv3 (DarkNet backbone, YOLOv3Head)". A partial mismatch (the same kind of
model, other settings) keeps the key lists, each cut to a count and its first few keys. The model's name is the
config's ``model.type`` with its backbone's and heads' ``type``: nothing here knows a task.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from oars.checkpoint_file import CheckpointError, checkpoint_meta
from oars.checkpoint_file import checkpoint_mismatch as _file_mismatch

SHOWN_KEYS = 5  # keys listed per kind of difference; the rest is a count
# oars.engine.resolve names a run f"{stem}_{uuid[:8]}"; mmengine's Runner appends "_%Y%m%d_%H%M%S"
_RUN_SUFFIX = re.compile(r"_[0-9a-f]{8}(_\d{8}_\d{6})?$")
RUN_CONFIG = "config.yaml"  # the resolved config every run writes into its work dir, beside its checkpoints
# torch's load_state_dict ("Missing key(s) in state_dict: "a", "b".") and mmengine's ("missing keys in source
# state_dict: a, b"), then the size mismatches both write one per line.
_KEY_LISTS = (
    ("missing", re.compile(r"Missing key\(s\) in state_dict: (.*?)\.\s*$", re.M)),
    ("unexpected", re.compile(r"Unexpected key\(s\) in state_dict: (.*?)\.\s*$", re.M)),
    ("missing", re.compile(r"missing keys in source state_dict: (.*?)\s*$", re.M)),
    ("unexpected", re.compile(r"unexpected key in source state_dict: (.*?)\s*$", re.M)),
)
_SIZE = re.compile(r"size mismatch for ([^:\s]+): copying a param with shape (?:torch\.Size\()?(\[[^\]]*\])\)? from "
                   r"checkpoint, the shape in current model is (?:torch\.Size\()?(\[[^\]]*\])\)?")


def model_name(model: Any) -> str | None:
    """``SingleStageDetector (ResNet backbone, FCOSHead)`` from a config's ``model`` section: its ``type``, its
    backbone's and those of its ``*head`` parts (the type alone does not tell a generic detector's kind); None
    without a ``type``."""
    if not isinstance(model, dict) or not isinstance(model.get("type"), str):
        return None
    parts = []
    for key, part in model.items():
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(kind, str) and (key == "backbone" or key.endswith("head")):
            parts.append(f"{kind} backbone" if key == "backbone" else kind)
    return f"{model['type']} ({', '.join(parts)})" if parts else model["type"]


def _saved_model(checkpoint: str) -> tuple[str | None, str | None]:
    """(the checkpoint's model name, its config file's name) from its meta; None where it does not say."""
    meta = checkpoint_meta(checkpoint) or {}
    text = meta.get("config_yaml")
    try:
        saved = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        saved = None
    name = model_name(saved.get("model")) if isinstance(saved, dict) else None
    run = meta.get("experiment_name")
    config = f"{_RUN_SUFFIX.sub('', run)}.yaml" if isinstance(run, str) and run else None
    return name, config


def _current_model(config: Any) -> str | None:
    """The model name of ``config`` (a ``Config`` or a YAML file loaded without overrides); None if unknown."""
    if hasattr(config, "get") and not isinstance(config, str):
        return model_name(config.get("model") if not hasattr(config, "to_dict") else config.to_dict().get("model"))
    if isinstance(config, str) and config.endswith((".yaml", ".yml")):
        from oars.config import ConfigError, load_config

        try:
            return model_name(load_config(config).to_dict().get("model"))
        except (ConfigError, OSError):
            return None
    return None


def _cut(keys: list[str], shown: int = SHOWN_KEYS) -> str:
    head = ", ".join(keys[:shown])
    return head + (f", … and {len(keys) - shown} more" if len(keys) > shown else "")


def short_detail(detail: object) -> str:
    """The key lists of a ``load_state_dict`` error, each cut to a count and its first :data:`SHOWN_KEYS` keys."""
    text = str(detail)
    found: dict[str, list[str]] = {"missing": [], "unexpected": []}
    for kind, pattern in _KEY_LISTS:
        for match in pattern.finditer(text):
            found[kind] += [k.strip().strip('"') for k in match.group(1).split(",") if k.strip()]
    sizes = [f"{key}: checkpoint {old}, model {new}" for key, old, new in _SIZE.findall(text)]
    parts = []
    for kind in ("missing", "unexpected"):
        keys = list(dict.fromkeys(found[kind]))
        if keys:
            parts.append(f"{len(keys)} {kind} key{'s' if len(keys) != 1 else ''} ({_cut(keys)})")
    if sizes:
        parts.append(f"{len(sizes)} shape mismatch{'es' if len(sizes) != 1 else ''} ({'; '.join(sizes[:SHOWN_KEYS])}"
                     + (f"; … and {len(sizes) - SHOWN_KEYS} more)" if len(sizes) > SHOWN_KEYS else ")"))
    if parts:
        return "; ".join(parts)
    return text if len(text) <= 500 else text[:500] + " …"


def checkpoint_mismatch(checkpoint: str, config: Any, detail: object) -> CheckpointError:
    """The error for a checkpoint whose tensors do not fit the model ``config`` builds.

    Args:
        checkpoint: the checkpoint's path or hub name, as the user gave it.
        config: the config (its file name, or the ``Config``) whose model refused the tensors.
        detail: the ``load_state_dict`` error.

    Returns:
        One short message: the model the checkpoint was trained as against the model the config builds when they
        differ; else the differing keys, cut to counts and the first few.
    """
    if "qat_graphs." in str(detail):  # fake quantisers: the file layer's own message says what to use instead
        return _file_mismatch(checkpoint, getattr(config, "filename", config), detail)
    shown_config = getattr(config, "filename", None) or config
    saved, saved_config = _saved_model(checkpoint)
    current = _current_model(config)
    if saved and current and saved != current:
        source = f" (config {saved_config})" if saved_config else ""
        beside = os.path.join(os.path.dirname(checkpoint), RUN_CONFIG)
        if os.path.isfile(beside):
            hint = f"-c {beside}, the run's resolved config beside the checkpoint"
        else:
            hint = f"-c {saved_config or '<its config>'}; every checkpoint stores it in meta.config_yaml"
        return CheckpointError(f"{checkpoint} was trained as {saved}{source}; {shown_config} builds {current}: pass "
                               f"the checkpoint's config ({hint}) or a checkpoint of this model")
    trained = f" (it was trained as {saved}: same model type, other settings?)" if saved else ""
    return CheckpointError(f"{checkpoint} does not fit the model of {shown_config}{trained}: {short_detail(detail)}. "
                           "The checkpoint stores its training config in meta.config_yaml: compare its model "
                           "section with this config's")
