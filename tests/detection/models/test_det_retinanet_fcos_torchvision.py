"""The ``torchvision`` presets of RetinaNet and FCOS: our SingleStageDetector with a state dict converted from
torchvision's ``retinanet_resnet50_fpn`` / ``fcos_resnet50_fpn`` gives torchvision's boxes, scores and labels on
the same image (measured: boxes within 2e-5 px, scores equal; checked at 1e-3 px and 1e-5); the converter (also
through ``tools/convert.py torchvision2oars``' function, and for pre-0.13 RetinaNet checkpoints); the preset
values are torchvision's.

torchvision's weights cannot be downloaded here: the models are its constructors with ``weights=None,
weights_backbone=None`` and a fixed seed; batch norms take the test image's statistics and become
``FrozenBatchNorm2d(eps=0)`` (what torchvision builds for its COCO_V1 checkpoints); the head convs are re-drawn
(Kaiming) so that random heads give varied, confident detections; output 0 (the background, never trained
positive in torchvision) is silenced because ``classes='all'`` drops it.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch
import torchvision
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from torch import nn
from torchvision.ops.misc import FrozenBatchNorm2d

from detection.models.convert_checkpoint import convert_checkpoint_file
from detection.models.convert_torchvision import COCO80_CATEGORY_IDS
from detection.models.convert_torchvision_onestage import dense_from_torchvision
from detection.structures import DetDataSample
from oars.config import load_config

PRESETS = {
    "retinanet": os.path.join(ROOT, "configs/_base_/models/retinanet_r50_fpn_torchvision.yaml"),
    "fcos": os.path.join(ROOT, "configs/_base_/models/fcos_r50_fpn_torchvision.yaml"),
}
BUILD = {"retinanet": torchvision.models.detection.retinanet_resnet50_fpn,
         "fcos": torchvision.models.detection.fcos_resnet50_fpn}
MIN_SIZE = 256  # torchvision's 800 at test size; both sides get the same value
SHAPE = (200, 250)  # resized to 256 x 320: a multiple of 32, so no batch padding (torchvision clips to 256 x 320)


def _image() -> torch.Tensor:
    return torch.randint(0, 256, (3, *SHAPE), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))  # RGB


def _to_frozen(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            frozen = FrozenBatchNorm2d(child.num_features, eps=0.0)
            frozen.weight.copy_(child.weight.detach())
            frozen.bias.copy_(child.bias.detach())
            frozen.running_mean.copy_(child.running_mean)
            frozen.running_var.copy_(child.running_var + 1e-5)
            setattr(module, name, frozen)
        else:
            _to_frozen(child)


def _torchvision_model(kind: str, image: torch.Tensor) -> nn.Module:
    torch.manual_seed(0)
    tv = BUILD[kind](weights=None, weights_backbone=None, min_size=MIN_SIZE)
    for m in tv.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = 1.0  # running statistics := those of the image
    tv.eval()
    tv.backbone.body.train()
    with torch.no_grad():
        batch, _ = tv.transform([image.float() / 255])
        tv.backbone.body(batch.tensors)
    tv.eval()
    _to_frozen(tv)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in tv.head.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, generator=g)
        cls = tv.head.classification_head.cls_logits
        cls.weight.mul_(0.3 if kind == "retinanet" else 1.0)
        cls.bias.view(-1, 91)[:, 0] = -100.0
        reg = tv.head.regression_head.bbox_reg
        reg.weight.mul_(0.1 if kind == "retinanet" else 0.05)
        if kind == "fcos":
            reg.bias.fill_(1.5)  # distances of 1.5 strides (ReLU'd): boxes with area
    return tv


def _our_model(kind: str, state: dict, overrides: list[str] = ()) -> nn.Module:
    cfg = load_config(PRESETS[kind], [f"model.data_preprocessor.min_size={MIN_SIZE}", *overrides])
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    model.load_state_dict(state, strict=True)
    return model.eval()


def _predict(model: nn.Module, image: torch.Tensor):
    sample = DetDataSample(metainfo=dict(ori_shape=SHAPE, img_shape=SHAPE))
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": [image.flip(0)], "data_samples": [sample]})  # BGR
        assert tuple(data["inputs"].shape[-2:]) == (256, 320)
        return model(**data, mode="predict")[0].pred_instances


@pytest.fixture(scope="module", params=["retinanet", "fcos"])
def pair(request):
    kind = request.param
    image = _image()
    tv = _torchvision_model(kind, image)
    with torch.no_grad():
        ref = tv([image.float() / 255])[0]
    return kind, tv, ref, image


@pytest.mark.slow  # ~3 s of CPU per model: two R50-FPN forwards at 256 x 320
def test_gives_torchvision_detections(pair):
    kind, tv, ref, image = pair
    pred = _predict(_our_model(kind, dense_from_torchvision(tv.state_dict(), "all"), ["model.num_classes=90"]),
                    image)
    cap = 300 if kind == "retinanet" else 100
    assert len(ref["boxes"]) == len(pred.bboxes) == cap  # detections_per_img reached: the top-k's really cut
    assert ref["scores"].max() - ref["scores"].min() > 0.1 and ref["scores"].max() < 0.99  # varied, not saturated
    # each of torchvision's detections to our nearest of the same label (boxes may be degenerate: no IoU)
    dist = (ref["boxes"][:, None] - pred.bboxes[None]).abs().amax(dim=-1)
    dist[ref["labels"][:, None] != (pred.labels + 1)[None, :]] = float("inf")
    idx = dist.argmin(dim=1)
    assert len(set(idx.tolist())) == len(idx)
    torch.testing.assert_close(pred.bboxes[idx], ref["boxes"], atol=1e-3, rtol=0)
    torch.testing.assert_close(pred.scores[idx], ref["scores"], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_coco80_conversion_through_the_tool(pair, tmp_path):
    """``tools/convert.py torchvision2oars`` (its function) writes a checkpoint that loads strictly into the top
    config; with ``coco80`` the kept classes score exactly as torchvision's (sigmoid per class)."""
    kind, tv, ref, image = pair
    src, dst = tmp_path / "tv.pth", tmp_path / "oars.pth"
    torch.save(tv.state_dict(), src)
    config = os.path.join(ROOT, f"configs/detection/{kind}/{kind}_r50_fpn_torchvision_coco.yaml")
    message = convert_checkpoint_file(str(src), str(dst), "coco80", config)
    assert "RetinaNet / FCOS" in message and "num_classes 80" in message
    saved = torch.load(dst, weights_only=True)
    assert saved["meta"]["torchvision_labels"] == list(COCO80_CATEGORY_IDS)
    pred = _predict(_our_model(kind, saved["state_dict"]), image)
    ids = torch.tensor(COCO80_CATEGORY_IDS)
    kept = torch.isin(ref["labels"], ids)
    ours = {(round(s, 5), int(ids[lab])) for s, lab in zip(pred.scores.tolist(), pred.labels.tolist())}
    theirs = {(round(s, 5), int(lab)) for s, lab in zip(ref["scores"][kept].tolist(), ref["labels"][kept].tolist())}
    assert len(theirs & ours) >= 0.9 * len(theirs)  # the cap (max_per_img) cuts differently at the tail


def test_pre_013_retinanet_keys_convert():
    """Checkpoints saved before torchvision 0.13 (the COCO_V1 file) hold the towers as conv.{0,2,4,6}."""
    state = {
        "backbone.body.conv1.weight": torch.zeros(1),
        "backbone.fpn.inner_blocks.0.0.weight": torch.zeros(1),
        "head.classification_head.conv.2.weight": torch.zeros(1),
        "head.classification_head.cls_logits.weight": torch.arange(9 * 91.0).reshape(9 * 91, 1),
        "head.classification_head.cls_logits.bias": torch.arange(9 * 91.0),
        "head.regression_head.conv.6.bias": torch.zeros(1),
        "head.regression_head.bbox_reg.weight": torch.zeros(36, 1),
    }
    out = dense_from_torchvision(state, "all")
    assert {"bbox_head.classification_head.conv.1.0.weight", "bbox_head.regression_head.conv.3.0.bias",
            "backbone.conv1.weight", "neck.inner_blocks.0.0.weight"} <= set(out)
    bias = out["bbox_head.classification_head.cls_logits.bias"]
    assert bias.shape == (9 * 90,) and bias[:3].tolist() == [1.0, 2.0, 3.0] and bias[90].item() == 92.0


def test_preset_values_are_torchvision_defaults():
    torch.manual_seed(0)
    for kind in ("retinanet", "fcos"):
        tv = BUILD[kind](weights=None, weights_backbone=None)
        cfg = load_config(PRESETS[kind]).model
        assert cfg.test_cfg.score_thr == tv.score_thresh and cfg.test_cfg.nms.iou_threshold == tv.nms_thresh
        assert cfg.test_cfg.max_per_img == tv.detections_per_img and cfg.test_cfg.nms_pre == tv.topk_candidates
        sizes = [list(s) for s in tv.anchor_generator.sizes]
        assert cfg.bbox_head.anchor_generator.sizes == sizes
        assert [tuple(cfg.bbox_head.anchor_generator.ratios)] * 5 == list(tv.anchor_generator.aspect_ratios)
        pre = cfg.data_preprocessor
        assert (pre.min_size, pre.max_size) == (tv.transform.min_size[0], tv.transform.max_size)
    assert tv.center_sampling_radius == load_config(PRESETS["fcos"]).model.train_cfg.assigner.center_sampling_radius
