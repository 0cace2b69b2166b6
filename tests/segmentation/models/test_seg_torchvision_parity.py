"""Models built from configs/_base_/models equal torchvision's given the same (converted) weights:
deeplabv3_r50.yaml = deeplabv3_resnet50, fcn_r50.yaml = fcn_resnet50, and the backbone of
deeplabv3plus_mobilenetv2.yaml = mobilenet_v2's ``features`` (dilated after stride 8)."""

from __future__ import annotations

import copy

import pytest
import torch
import torchvision
from torch.nn.modules.batchnorm import _BatchNorm
from torchvision.models.segmentation import deeplabv3_resnet50, fcn_resnet50

from segmentation.models import convert_torchvision_deeplabv3, convert_torchvision_fcn
from segmentation.registry import MODELS

# base config -> (torchvision builder, converter)
ARCHS = {
    "deeplabv3_r50": (deeplabv3_resnet50, convert_torchvision_deeplabv3),
    "fcn_r50": (fcn_resnet50, convert_torchvision_fcn),
}


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


@pytest.fixture(scope="module", params=sorted(ARCHS))
def models(request, base_cfg_loader):
    """(name, torchvision model, our model with its converted weights), both in eval mode."""
    builder, convert = ARCHS[request.param]
    torch.manual_seed(0)
    tv = builder(weights=None, weights_backbone=None, num_classes=5, aux_loss=True)
    randomize_bn(tv)
    cfg = base_cfg_loader(request.param)
    cfg["num_classes"] = 5
    ours = MODELS.build(cfg)
    missing = ours.load_state_dict(convert(tv.state_dict()), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    return request.param, tv.eval(), ours.eval()


def test_logits_match_torchvision(models):
    name, tv, ours = models
    _, convert = ARCHS[name]
    assert set(convert(tv.state_dict())) == set(ours.state_dict())  # the converter covers the whole model
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = tv(x)
        out = ours(x, mode="tensor")
        aux = ours.auxiliary_head.predict(ours.extract_feat(x), x.shape[-2:])
    assert out.shape == ref["out"].shape == (1, 5, 64, 64)
    assert ref["out"].abs().max() > 1e-2  # a non-trivial output, so the comparison means something
    assert (out - ref["out"]).abs().max() <= 1e-4
    assert (aux - ref["aux"]).abs().max() <= 1e-4


def test_fcn_layout_is_torchvisions(base_cfg_loader):
    """fcn_r50.yaml: FCNHead 2048 -> 512 -> classes on stage 4, aux 1024 -> 256 on stage 3 (weights only: no
    forward, so this costs one full-size build)."""
    model = MODELS.build(dict(base_cfg_loader("fcn_r50"), num_classes=21))
    head, aux = model.decode_head, model.auxiliary_head
    assert (head.in_channels, head.channels, head.conv_seg.out_channels) == (2048, 512, 21)
    assert (aux.in_channels, aux.channels, aux.loss_decode[0].loss_weight) == (1024, 256, 0.4)
    # output stride 8 as torchvision's replace_stride_with_dilation: a stage's first block keeps the previous
    # dilation in its 3x3 conv, the others take the new one
    layer3, layer4 = model.backbone.layer3, model.backbone.layer4
    assert [layer3[0].conv2.stride, layer3[0].conv2.dilation, layer3[1].conv2.dilation] == [(1, 1), (1, 1), (2, 2)]
    assert [layer4[0].conv2.stride, layer4[0].conv2.dilation, layer4[1].conv2.dilation] == [(1, 1), (2, 2), (4, 4)]


def test_converters_reject_foreign_keys():
    with pytest.raises(KeyError, match="convert_torchvision_deeplabv3: unexpected key 'head.weight'"):
        convert_torchvision_deeplabv3({"head.weight": torch.zeros(1)})
    converted = convert_torchvision_deeplabv3({"module.classifier.4.bias": torch.zeros(3)})
    assert list(converted) == ["decode_head.conv_seg.bias"]
    # a DeepLabV3 checkpoint given to the FCN converter names the first foreign key
    with pytest.raises(KeyError, match=r"convert_torchvision_fcn: unexpected key 'classifier\.0\.convs\.0\.0\.weight'"):
        convert_torchvision_fcn({"classifier.0.convs.0.0.weight": torch.zeros(1)})
    assert list(convert_torchvision_fcn({"module.classifier.1.running_var": torch.ones(2)})) == [
        "decode_head.convs.0.1.running_var"
    ]


def test_deeplabv3plus_mobilenetv2_backbone_is_torchvisions(base_cfg_loader):
    """torchvision mobilenet_v2 weights load into the config's backbone by name; up to stride 8 the features are
    torchvision's, after it the 3x3 depthwise convs are dilated (2, then 4) and the stride stays 8. The heads
    get the low-level 24 ch (stride 4), the 320 ch and (aux) 96 ch maps."""
    cfg = copy.deepcopy(base_cfg_loader("deeplabv3plus_mobilenetv2"))
    cfg["num_classes"] = 5
    torch.manual_seed(0)
    model = MODELS.build(cfg).eval()
    tv = torchvision.models.mobilenet_v2(weights=None).eval()
    randomize_bn(tv)
    result = model.backbone.load_state_dict(tv.state_dict(), strict=False)
    assert result.missing_keys == []
    assert sorted(result.unexpected_keys) == ["classifier.1.bias", "classifier.1.weight"] + sorted(
        k for k in tv.state_dict() if k.startswith("features.18.")
    )
    assert model.backbone.out_channels == [24, 32, 96, 320] and model.backbone.out_strides == [4, 8, 8, 8]
    assert model.decode_head.in_channels == [24, 320] and model.auxiliary_head.in_channels == 96
    dilations = [block.conv[1][0].dilation[0] for block in list(model.backbone.features)[2:18]]
    assert dilations == [1] * 5 + [2] * 7 + [4] * 4  # groups 1-2 | 3-4 (64, 96 ch) | 5-6 (160, 320 ch)

    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        feats = model.extract_feat(x)
        ref = tv.features[:7](x)  # through group 2 (32 ch, stride 8): not dilated
        logits = model(x, mode="tensor")
    assert [tuple(f.shape[1:]) for f in feats] == [(24, 16, 16), (32, 8, 8), (96, 8, 8), (320, 8, 8)]
    assert (feats[1] - ref).abs().max() <= 1e-5
    assert logits.shape == (1, 5, 64, 64) and torch.isfinite(logits).all()
