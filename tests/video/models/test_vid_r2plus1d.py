"""R(2+1)D-18 equals torchvision's r2plus1d_18: same parameter names, and with torchvision's (random, seeded)
weights loaded through the converter the recognizer's logits equal torchvision's to 1e-5."""

from __future__ import annotations

import pytest
import torch
import torchvision
from mmengine.registry import MODELS, DefaultScope

import video.models  # noqa: F401  (registers the video models)
from video.models import R2Plus1D, convert_torchvision_r2plus1d


@pytest.fixture(scope="module")
def torchvision_model() -> torch.nn.Module:
    torch.manual_seed(0)
    tv = torchvision.models.video.r2plus1d_18(num_classes=10)
    with torch.no_grad():  # non-trivial norms and classifier, so that a mis-mapped tensor shows
        for m in tv.modules():
            if isinstance(m, torch.nn.BatchNorm3d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        tv.fc.weight.normal_(0, 0.1)
        tv.fc.bias.normal_(0, 0.1)
    return tv.eval()


def test_parity_with_torchvision(torchvision_model):
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(dict(type="Recognizer3D", num_classes=10, backbone=dict(type="R2Plus1D", depth=18),
                                  cls_head=dict(type="I3DHead", average_clips="score")))
    model.load_state_dict(convert_torchvision_r2plus1d(torchvision_model.state_dict()), strict=True)
    model.eval()
    x = torch.randn(2, 3, 4, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = torchvision_model(x)
        got = model(x[:, None], mode="tensor")  # [B, V=1, 3, T, H, W]
    assert got.shape == (2, 10)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # real size: torchvision's 31.5M for 400 classes = this backbone + a 512 x 400 classifier
    backbone = sum(p.numel() for p in model.backbone.parameters())
    assert backbone + 512 * 400 + 400 == sum(p.numel() for p in torchvision.models.video.r2plus1d_18().parameters())
    assert 31.4e6 < backbone + 512 * 400 + 400 < 31.6e6


def test_backbone_loads_torchvision_file(torchvision_model, tmp_path):
    path = tmp_path / "r2plus1d_18.pth"
    torch.save(torchvision_model.state_dict(), path)
    backbone = R2Plus1D(depth=18, pretrained=str(path))
    assert set(backbone.state_dict()) == {k for k in torchvision_model.state_dict() if not k.startswith("fc.")}
    assert not torch.equal(backbone.layer2[0].conv1[0][3].weight, torchvision_model.layer2[0].conv1[0][3].weight)
    backbone.init_weights()  # the file is read here, not in __init__
    torch.testing.assert_close(backbone.layer2[0].conv1[0][3].weight, torchvision_model.layer2[0].conv1[0][3].weight)


def test_converter_rejects_other_models():
    with pytest.raises(ValueError, match="unexpected key 'conv1.weight'"):
        convert_torchvision_r2plus1d({"conv1.weight": torch.zeros(1)})
