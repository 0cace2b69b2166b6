"""build_norm_layer, build_activation_layer and ConvNormAct."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torchvision.ops.misc import Conv2dNormActivation, FrozenBatchNorm2d

from oars.models.layers import ConvNormAct, build_activation_layer, build_norm_layer


@pytest.mark.parametrize(
    "norm,cls",
    [
        ("BN", nn.BatchNorm2d),
        ("SyncBN", nn.SyncBatchNorm),
        ("FrozenBN", FrozenBatchNorm2d),
        ("GN", nn.GroupNorm),
        ("IN", nn.InstanceNorm2d),
        ({"type": "GN", "num_groups": 4}, nn.GroupNorm),
        ({"type": "BN", "momentum": 0.01, "eps": 1e-3}, nn.BatchNorm2d),
    ],
)
def test_every_norm_builds_and_runs(norm, cls):
    layer = build_norm_layer(norm, 64)
    assert type(layer) is cls
    x = torch.randn(2, 64, 4, 4)
    for mode in (True, False):
        y = layer.train(mode)(x)
        assert y.shape == x.shape and torch.isfinite(y).all()


def test_norm_arguments_reach_the_layer():
    bn = build_norm_layer({"type": "BN", "momentum": 0.01, "eps": 1e-3}, 8)
    assert bn.momentum == 0.01 and bn.eps == 1e-3 and bn.num_features == 8
    gn = build_norm_layer({"type": "GN", "num_groups": 4}, 8)
    assert gn.num_groups == 4 and gn.num_channels == 8
    assert build_norm_layer("GN", 64).num_groups == 32
    spec = {"type": "GN", "num_groups": 2}
    build_norm_layer(spec, 4)
    assert spec == {"type": "GN", "num_groups": 2}  # the config dict is not consumed


def test_batchnorm_normalises_in_train_mode():
    x = torch.randn(4, 3, 5, 5) * 3 + 2
    y = build_norm_layer("BN", 3).train()(x)
    assert torch.allclose(y.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5)
    frozen = build_norm_layer("FrozenBN", 3)
    frozen.running_mean.fill_(2.0)
    frozen.running_var.fill_(4.0)
    assert torch.allclose(frozen.train()(x), (x - 2) / torch.sqrt(torch.tensor(4.0 + 1e-5)), atol=1e-6)


@pytest.mark.parametrize(
    "norm,num,pattern",
    [
        ("XN", 8, r"unknown norm type 'XN'; accepted: \['BN', 'FrozenBN', 'GN', 'IN', 'SyncBN'\]"),
        ({"num_groups": 2}, 8, r"has no 'type' key"),
        (3, 8, r"norm must be a string or a dict"),
        ("GN", 48, r"num_groups=32 cannot normalise 48 channels"),
        ({"type": "FrozenBN", "momentum": 0.1}, 8, r"invalid arguments \{'momentum': 0.1\} for norm type 'FrozenBN'"),
    ],
)
def test_norm_errors(norm, num, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_norm_layer(norm, num)


def test_activation_builder():
    assert isinstance(build_activation_layer("ReLU"), nn.ReLU) and build_activation_layer("ReLU").inplace
    leaky = build_activation_layer({"type": "LeakyReLU", "negative_slope": 0.2})
    assert leaky.negative_slope == 0.2
    assert isinstance(build_activation_layer("GELU"), nn.GELU)
    with pytest.raises(ValueError, match=r"unknown activation type 'Swish'"):
        build_activation_layer("Swish")


def test_conv_norm_act_layout_and_padding():
    m = ConvNormAct(4, 8, 3, dilation=2)
    assert [type(c) for c in m] == [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
    assert m.conv.padding == (2, 2) and m.conv.bias is None
    assert m(torch.randn(1, 4, 9, 9)).shape == (1, 8, 9, 9)
    assert ConvNormAct(4, 8, 5, stride=2)(torch.randn(1, 4, 9, 9)).shape == (1, 8, 5, 5)
    assert ConvNormAct(4, 8, 1).conv.padding == (0, 0)

    plain = ConvNormAct(4, 8, 3, norm=None, act=None)
    assert len(plain) == 1 and plain.conv.bias is not None and plain.norm is None and plain.act is None
    no_norm = ConvNormAct(4, 8, 3, norm=None)
    assert isinstance(no_norm[1], nn.ReLU) and no_norm.conv.bias is not None
    dw = ConvNormAct(8, 8, 3, groups=8, norm={"type": "GN", "num_groups": 2}, act="ReLU6")
    assert dw.conv.groups == 8 and isinstance(dw.norm, nn.GroupNorm) and isinstance(dw.act, nn.ReLU6)


def test_conv_norm_act_matches_torchvision_block():
    ours = ConvNormAct(4, 8, 3, stride=2, dilation=1, act="ReLU6").eval()
    tv = Conv2dNormActivation(4, 8, 3, stride=2, activation_layer=nn.ReLU6).eval()
    assert list(ours.state_dict()) == list(tv.state_dict())
    with torch.no_grad():
        for p in tv.parameters():
            p.normal_()
        tv[1].running_var.uniform_(0.5, 1.5)
    ours.load_state_dict(tv.state_dict())
    x = torch.randn(2, 4, 9, 9)
    assert torch.allclose(ours(x), tv(x), atol=1e-6)
