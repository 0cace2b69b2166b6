"""Export-test helper (imported by tests/export): a shrunk model of any config saved as a checkpoint, with a
64-px export input."""

from __future__ import annotations

import copy
import os

import config_checks_detection
import config_checks_segmentation
import torch
from mmengine.registry import MODELS, DefaultScope

from oars.config import apply_overrides, load_config

SIZE = 64
TASK_CHECKS = {"segmentation": config_checks_segmentation, "detection": config_checks_detection}


def shrunk_export_case(config: str, folder: str, size: int = SIZE, batch: int = 1):
    """Load ``config``, shrink its model, export at ``batch x 3 x size x size`` (the test Resize goes to ``size``
    too), build the model with random weights and save it as a checkpoint. Returns (cfg, checkpoint path)."""
    cfg = load_config(config)
    scope = cfg.default_scope
    overrides = [f"export.input_shape=[{batch},3,{size},{size}]"]
    for split in ("test_dataloader", "val_dataloader"):
        for i, step in enumerate(cfg[split]["dataset"]["pipeline"]):
            if step["type"] == "Resize":
                overrides.append(f"{split}.dataset.pipeline.{i}.scale=[{size},{size}]")
    apply_overrides(cfg, overrides)
    cfg.model = TASK_CHECKS[scope].shrink_model(cfg.model)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    _randomise_norm_stats(model)
    classes = [f"class{i}" for i in range(cfg.model.num_classes)]
    ckpt = os.path.join(folder, "model.pth")
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, ckpt)
    return cfg, ckpt


def _randomise_norm_stats(model: torch.nn.Module) -> None:
    """Non-trivial BatchNorm statistics, so that the exported graph's folded norms are really tested."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
