"""A trained model for a run: built from a config in its task's scope, a checkpoint (a file or a hub name) loaded
strictly, in eval mode on a device. The export, inference, streams and compression all start here.
"""

from __future__ import annotations

import copy

import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope

from oars.engine.checkpoint import checkpoint_mismatch, load_checkpoint_file, state_dict_from_checkpoint
from oars.tasks import activate


def init_model(cfg: Config, checkpoint: str, device: str = "cpu") -> torch.nn.Module:
    """Build ``cfg.model`` in the config's scope, load ``checkpoint`` strictly, set eval mode.

    The model gets ``dataset_meta`` (classes, palette) from the checkpoint when it has them.
    """
    ckpt = load_checkpoint_file(checkpoint)
    activate(cfg.get("default_scope"))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        model = MODELS.build(copy.deepcopy(cfg.model))
    state = state_dict_from_checkpoint(ckpt)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise checkpoint_mismatch(checkpoint, cfg, err) from None
    meta = ckpt.get("meta", {}) if isinstance(ckpt, dict) else {}
    model.dataset_meta = meta.get("dataset_meta") or {}
    return model.to(device).eval()
