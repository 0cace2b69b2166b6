"""DeepLabV3-R50 from configs/_base_/models/deeplabv3_r50.yaml equals torchvision's deeplabv3_resnet50 given
the same (converted) weights."""

from __future__ import annotations

import pytest
import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torchvision.models.segmentation import deeplabv3_resnet50

from segmentation.models import convert_torchvision_deeplabv3
from segmentation.registry import MODELS


def randomize_bn(model: torch.nn.Module, seed: int = 0) -> None:
    """Random affine parameters and running statistics, so identity BNs cannot hide a wiring mistake."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, _BatchNorm):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=gen) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)


@pytest.fixture(scope="module")
def models(base_cfg_loader):
    torch.manual_seed(0)
    tv = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=5, aux_loss=True)
    randomize_bn(tv)
    cfg = base_cfg_loader("deeplabv3_r50")
    cfg["num_classes"] = 5
    ours = MODELS.build(cfg)
    missing = ours.load_state_dict(convert_torchvision_deeplabv3(tv.state_dict()), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    return tv.eval(), ours.eval()


def test_logits_match_torchvision(models):
    tv, ours = models
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = tv(x)
        out = ours(x, mode="tensor")
        aux = ours.auxiliary_head.predict(ours.extract_feat(x), x.shape[-2:])
    assert out.shape == ref["out"].shape == (1, 5, 64, 64)
    assert ref["out"].abs().max() > 1e-2  # a non-trivial output, so the comparison means something
    assert (out - ref["out"]).abs().max() <= 1e-4
    assert (aux - ref["aux"]).abs().max() <= 1e-4


def test_state_dict_keys_cover_the_whole_model(models):
    tv, ours = models
    converted = convert_torchvision_deeplabv3(tv.state_dict())
    assert set(converted) == set(ours.state_dict())


def test_converter_rejects_unknown_keys():
    with pytest.raises(KeyError, match="unexpected key 'head.weight'"):
        convert_torchvision_deeplabv3({"head.weight": torch.zeros(1)})
    converted = convert_torchvision_deeplabv3({"module.classifier.4.bias": torch.zeros(3)})
    assert list(converted) == ["decode_head.conv_seg.bias"]
