"""Export-test helper (tests/export, tests/deploy): a shrunk model of any config saved as a checkpoint, with a
64-px export input."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence

import config_checks_detection
import config_checks_segmentation
import torch
from mmengine.registry import MODELS, DefaultScope

from oars.config import apply_overrides, load_config

SIZE = 64
TASK_CHECKS = {"segmentation": config_checks_segmentation, "detection": config_checks_detection}


def shrunk_export_case(config: str, folder: str, size: int = SIZE, batch: int = 1, overrides: Sequence[str] = (),
                       standardise_logits: bool = False):
    """Load ``config``, shrink its model, export at ``batch x 3 x size x size`` (the test Resize goes to ``size``
    too), apply ``overrides``, build the model with random weights and save it as a checkpoint. Returns (cfg,
    checkpoint path). ``standardise_logits``: a segmentor whose labels depend on the image (see
    ``_standardise_logits``)."""
    cfg = load_config(config)
    scope = cfg.default_scope
    opts = [f"export.input_shape=[{batch},3,{size},{size}]"]
    for split in ("test_dataloader", "val_dataloader"):
        for i, step in enumerate(cfg[split]["dataset"]["pipeline"]):
            if step["type"] == "Resize":
                opts.append(f"{split}.dataset.pipeline.{i}.scale=[{size},{size}]")
    apply_overrides(cfg, [*opts, *overrides])
    cfg.model = TASK_CHECKS[scope].shrink_model(cfg.model)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    _randomise_norm_stats(model)
    if standardise_logits and scope == "segmentation":
        _standardise_logits(model, size)
    classes = [f"class{i}" for i in range(cfg.model.num_classes)]
    os.makedirs(folder, exist_ok=True)
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


def _standardise_logits(model: torch.nn.Module, size: int) -> None:
    """Scale each class's classifier row so its logits have mean 0 / std 1 over a random input: a random-weight
    segmentor otherwise predicts one class everywhere (features vary little, biases dominate)."""
    g = torch.Generator().manual_seed(2)
    conv = model.decode_head.conv_seg
    with torch.no_grad():
        logits = model.encode_decode(torch.rand(2, 3, size, size, generator=g) * 4 - 2)
        mean, std = logits.mean((0, 2, 3)), logits.std((0, 2, 3)).clamp(min=1e-6)
        conv.weight.div_(std[:, None, None, None])
        conv.bias.sub_(mean).div_(std)
