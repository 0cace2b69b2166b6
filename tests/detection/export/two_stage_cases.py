"""Shrunk Faster / Mask / Cascade R-CNN models with decisive random weights, for the export tests
(tests/detection/export/test_export_two_stage.py, tests/deploy/test_deploy_cpp_two_stage.py).

Random initial weights give every proposal the same objectness and every RoI near-uniform class scores, so
detections would tie everywhere and any order-dependent step (top-k, NMS) would decide at random; here the
RPN's and the box head's classifiers and regressors are rescaled so that scores and boxes vary.
"""

from __future__ import annotations

import copy
import os

import torch
from config_checks_detection import shrink_model
from mmengine.registry import DefaultScope

from oars.config import apply_overrides, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONFIGS = {
    "faster": "configs/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml",
    "mask": "configs/detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml",
    "cascade": "configs/detection/cascade_rcnn/cascade_rcnn_r50_fpn_1x_coco.yaml",
    "cascade_mask": "configs/detection/cascade_rcnn/cascade_mask_rcnn_r50_fpn_1x_coco.yaml",
    # torchvision's semantics: its box coder, LevelMapper pooling (sampling 2, not aligned), small RoI boxes
    # dropped (test_cfg.rcnn.min_bbox_size), torchvision mask pasting
    "mask_torchvision": "configs/detection/mask_rcnn/mask_rcnn_r50_fpn_torchvision_coco.yaml",
}
SIZE = 128
# Few proposals and classes: the test models run in well under a second.
TEST_OVERRIDES = (
    "model.test_cfg.rpn.nms_pre=200", "model.test_cfg.rpn.max_per_img=60", "model.test_cfg.rcnn.max_per_img=40",
    "model.test_cfg.rcnn.score_thr=0.1",
)


def load_case(name: str, size: int = SIZE, batch: int = 1, overrides: tuple[str, ...] = ()):
    """The config of case ``name`` (shrunk model, ``size`` x ``size`` export and test Resize, few classes)."""
    cfg = load_config(os.path.join(ROOT, CONFIGS[name]))
    opts = [f"export.input_shape=[{batch},3,{size},{size}]", "model.num_classes=3", *TEST_OVERRIDES]
    for split in ("test_dataloader", "val_dataloader"):
        for i, step in enumerate(cfg[split]["dataset"]["pipeline"]):
            if step["type"] == "Resize":
                opts.append(f"{split}.dataset.pipeline.{i}.scale=[{size},{size}]")
    apply_overrides(cfg, [*opts, *overrides])
    cfg.model = shrink_model(cfg.model)
    return cfg


def decisive_weights(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Rescale the classifiers and regressors of the RPN and the RoI heads (see the module docstring), and give
    the norms non-trivial statistics. In place; returns ``model``."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        rpn = model.rpn_head
        rpn.cls_logits.weight.copy_(torch.randn(rpn.cls_logits.weight.shape, generator=g) * 0.5)
        rpn.bbox_pred.weight.copy_(torch.randn(rpn.bbox_pred.weight.shape, generator=g) * 0.02)
        heads = model.roi_head.bbox_head
        for head in heads if isinstance(heads, torch.nn.ModuleList) else [heads]:
            head.fc_cls.weight.copy_(torch.randn(head.fc_cls.weight.shape, generator=g) * 0.5)
            head.fc_cls.bias.copy_(torch.randn(head.fc_cls.bias.shape, generator=g))
            head.fc_reg.weight.copy_(torch.randn(head.fc_reg.weight.shape, generator=g) * 0.05)
    return model


def build_case(name: str, size: int = SIZE, batch: int = 1, overrides: tuple[str, ...] = ()):
    """(cfg, model in eval mode with decisive weights) of case ``name``."""
    cfg = load_case(name, size, batch, overrides)
    torch.manual_seed(0)
    from mmengine.registry import MODELS

    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    return cfg, decisive_weights(model)


def save_checkpoint(model: torch.nn.Module, folder: str, num_classes: int = 3) -> str:
    """``folder/model.pth`` with the model's weights and class names (what export_model loads)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.pth")
    classes = [f"class{i}" for i in range(num_classes)]
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, path)
    return path
