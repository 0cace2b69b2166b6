"""The SSD ``torchvision`` presets: our SSD300 VGG-16 and SSDLite320 MobileNetV3-Large with a converted torchvision
state dict (``tools/convert.py torchvision2oars``) give torchvision's boxes, scores and labels on the same images.

torchvision's weights cannot be downloaded here, so the models are torchvision's own constructors with
``weights=None, weights_backbone=None`` and a fixed seed; the class convs are scaled so that the random heads'
softmax is peaked (near-uniform scores would make the 200 / 300 kept detections a matter of float noise).
Tolerances: boxes 1e-3 px in original-image pixels (torchvision multiplies by ``original / 300``, we divide by
``300 / original``), scores 1e-5.
"""

from __future__ import annotations

import copy
import os
import runpy
import sys

import pytest
import torch
import torchvision
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from mmengine.structures import InstanceData
from torch import nn

from detection.models.convert_torchvision import COCO80_CATEGORY_IDS, ConversionError
from detection.models.convert_torchvision_onestage import ssd_from_torchvision
from detection.structures import DetDataSample
from oars.config import load_config

PRESETS = {
    "ssd300": os.path.join(ROOT, "configs/_base_/models/ssd300_vgg16_torchvision.yaml"),
    "ssdlite": os.path.join(ROOT, "configs/_base_/models/ssdlite_mobilenetv3_320_torchvision.yaml"),
}
SHAPES = [(240, 317), (200, 290)]


def _images(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in SHAPES[:n]]  # RGB


def _torchvision_model(kind: str, images: list[torch.Tensor]) -> nn.Module:
    """torchvision's model with a fixed seed; SSDLite's batch norms get the statistics of ``images`` (its 0.03-std
    initialisation through unit-variance running statistics gives 1e-15 activations) and its class convs are
    scaled x5 (a softmax spread like a trained model's instead of 1/91 everywhere)."""
    torch.manual_seed(0)
    if kind == "ssd300":
        return torchvision.models.detection.ssd300_vgg16(weights=None, weights_backbone=None).eval()
    tv = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    for m in tv.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = 1.0  # running statistics := those of the images
    tv.train()
    with torch.no_grad():
        batch, _ = tv.transform([img.float() / 255 for img in images])
        tv.head(list(tv.backbone(batch.tensors).values()))
        for block in tv.head.classification_head.module_list:
            block[1].weight.mul_(5.0)
    return tv.eval()


def _our_model(kind: str, state: dict) -> nn.Module:
    cfg = load_config(PRESETS[kind], ["model.num_classes=90"])
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    model.load_state_dict(state, strict=True)
    return model.eval()


def _predict(model: nn.Module, images: list[torch.Tensor]) -> list[InstanceData]:
    samples = [DetDataSample(metainfo=dict(ori_shape=tuple(i.shape[-2:]), img_shape=tuple(i.shape[-2:])))
               for i in images]
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": [i.flip(0) for i in images], "data_samples": samples})  # BGR
        return [s.pred_instances for s in model(**data, mode="predict")]


def _check_same(ref: dict, pred: InstanceData) -> None:
    """Same detections: count, labels (ours + 1 = torchvision's), boxes (1e-3 px) and scores (1e-5), matched one to
    one (greedily: random weights give some zero-area boxes, which NMS never suppresses, so exact duplicates occur)."""
    assert len(ref["boxes"]) == len(pred.bboxes) > 20
    dist = (ref["boxes"][:, None, :] - pred.bboxes[None, :, :]).abs().amax(dim=-1)
    ok = ((ref["labels"][:, None] == (pred.labels + 1)[None, :])
          & ((ref["scores"][:, None] - pred.scores[None, :]).abs() <= 1e-5) & (dist <= 1e-3))
    used = torch.zeros(len(pred.bboxes), dtype=torch.bool)
    for i in range(len(ref["boxes"])):
        free = (ok[i] & ~used).nonzero()
        assert len(free), f"torchvision's detection {i} ({ref['boxes'][i].tolist()}, label {int(ref['labels'][i])}, " \
                          f"score {float(ref['scores'][i]):.6f}) has no counterpart"
        used[free[0, 0]] = True
    assert (pred.scores[:-1] >= pred.scores[1:]).all()


def test_ssd300_gives_torchvision_detections():
    images = _images(1)  # one image: VGG-16 at 300 px is the slow part; SSDLite's test runs a batch of two
    tv = _torchvision_model("ssd300", images)
    ours = _our_model("ssd300", ssd_from_torchvision(tv.state_dict(), "all"))
    with torch.no_grad():
        ref = tv([img.float() / 255 for img in images])
    for r, p in zip(ref, _predict(ours, images)):
        _check_same(r, p)
    # the prior boxes are torchvision's, bit for bit
    sizes = [(38, 38), (19, 19), (10, 10), (5, 5), (3, 3), (1, 1)]
    batch, _ = tv.transform([images[0].float() / 255])
    tv_priors = tv.anchor_generator(batch, [torch.zeros(1, 1, h, w) for h, w in sizes])[0]
    assert torch.equal(ours.bbox_head.prior_generator.grid_priors(sizes, (300, 300)), tv_priors)


def test_ssdlite_converted_by_the_cli_gives_torchvision_detections(tmp_path, monkeypatch, capsys):
    images = _images(2)
    tv = _torchvision_model("ssdlite", images)
    src, out = tmp_path / "tv.pth", tmp_path / "oars.pth"
    torch.save(tv.state_dict(), src)
    script = os.path.join(ROOT, "tools", "convert.py")
    monkeypatch.setattr(sys, "argv", [script, "torchvision2oars", "--input", str(src), "--out", str(out),
                                      "--classes", "all", "-c", PRESETS["ssdlite"], "-o", "model.num_classes=90"])
    runpy.run_path(script, run_name="__main__")
    assert "num_classes 90 (classes=all)" in capsys.readouterr().out
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["meta"]["torchvision_labels"] == list(range(1, 91))
    ours = _our_model("ssdlite", ckpt["state_dict"])
    with torch.no_grad():
        ref = tv([img.float() / 255 for img in images])
    for r, p in zip(ref, _predict(ours, images)):
        _check_same(r, p)


def test_ssd_conversion_keeps_coco80_and_moves_the_background_last():
    torch.manual_seed(0)
    tv = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    state = tv.state_dict()
    conv = ssd_from_torchvision(state, "coco80")
    src_w = state["head.classification_head.module_list.2.1.weight"]  # [6 anchors * 91, C, 1, 1]
    ours = conv["bbox_head.cls_convs.2.1.weight"]
    assert ours.shape[0] == 6 * 81
    src, dst = src_w.reshape(6, 91, -1), ours.reshape(6, 81, -1)
    assert torch.equal(dst[:, :80], src[:, list(COCO80_CATEGORY_IDS)]) and torch.equal(dst[:, 80], src[:, 0])
    assert torch.equal(conv["bbox_head.reg_convs.2.1.bias"], state["head.regression_head.module_list.2.1.bias"])
    with pytest.raises(ConversionError, match="belong to no part"):
        ssd_from_torchvision({**state, "anchor_generator.x": torch.zeros(1)})
    with pytest.raises(ConversionError, match="whole torchvision SSD"):
        ssd_from_torchvision({k: v for k, v in state.items() if not k.startswith("head.classification")})
