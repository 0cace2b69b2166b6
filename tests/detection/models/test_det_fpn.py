"""FPN: equal to torchvision's FeaturePyramidNetwork with copied weights; shapes, strides, init, errors."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
import torch
from torch import nn
from torchvision.ops import FeaturePyramidNetwork
from torchvision.ops.feature_pyramid_network import LastLevelMaxPool, LastLevelP6P7

from detection.models.necks import FPN, fpn_keys_from_torchvision
from detection.registry import MODELS

IN_CHANNELS = [8, 16, 24, 32]
# Odd sizes: the top-down pass must upsample to the finer map's size, not by a fixed factor of 2.
SIZES = [(33, 41), (17, 21), (9, 11), (5, 6)]


def _feats(batch: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(batch, c, h, w, generator=g) for c, (h, w) in zip(IN_CHANNELS, SIZES)]


def _tv_outputs(tv: FeaturePyramidNetwork, feats: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(tv(OrderedDict((f"c{i}", x) for i, x in enumerate(feats))).values())


def _load_from_tv(ours: FPN, tv: nn.Module, prefix: str = "") -> None:
    state = {prefix + k: v for k, v in tv.state_dict().items()}
    ours.load_state_dict(fpn_keys_from_torchvision(state), strict=True)


def test_matches_torchvision_with_last_level_max_pool():
    torch.manual_seed(0)
    tv = FeaturePyramidNetwork(IN_CHANNELS, 16, extra_blocks=LastLevelMaxPool()).eval()
    ours = FPN(IN_CHANNELS, 16, num_outs=5).eval()
    _load_from_tv(ours, tv)
    feats = _feats()
    with torch.no_grad():
        expected, got = _tv_outputs(tv, feats), ours(feats)
    assert len(got) == len(expected) == 5
    for e, o in zip(expected, got):
        torch.testing.assert_close(o, e)
    assert [tuple(o.shape[-2:]) for o in got] == SIZES + [(3, 3)]


@pytest.mark.parametrize("source", ["on_input", "on_output"])
def test_matches_torchvision_retinanet_p6p7(source):
    """RetinaNet: levels C3-C5 (start_level=1), P6 = 3x3/2 conv on C5 (or on P5), P7 = conv(relu(P6))."""
    torch.manual_seed(1)
    in_p6 = IN_CHANNELS[-1] if source == "on_input" else 16  # LastLevelP6P7 uses P5 when in == out channels
    tv = FeaturePyramidNetwork(IN_CHANNELS[1:], 16, extra_blocks=LastLevelP6P7(in_p6, 16)).eval()
    ours = FPN(IN_CHANNELS, 16, num_outs=5, start_level=1, add_extra_convs=source, relu_before_extra_convs=True)
    # Inside a detection model the keys carry the model's prefix; the backbone's own keys are dropped.
    state = {"backbone.fpn." + k: v for k, v in tv.state_dict().items()}
    state["backbone.body.conv1.weight"] = torch.zeros(1)
    ours.load_state_dict(fpn_keys_from_torchvision(state), strict=True)
    feats = _feats(1)
    with torch.no_grad():
        expected, got = _tv_outputs(tv, feats[1:]), ours.eval()(feats)
    assert len(got) == 5
    for e, o in zip(expected, got):
        torch.testing.assert_close(o, e)
    assert ours.out_strides == [8, 16, 32, 64, 128]


def test_matches_torchvision_with_batch_norm():
    torch.manual_seed(2)
    tv = FeaturePyramidNetwork(IN_CHANNELS, 16, norm_layer=nn.BatchNorm2d)
    for m in tv.modules():  # non-trivial running statistics, so that copying them is checked
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 2)
    ours = FPN(IN_CHANNELS, 16, num_outs=4, norm="BN")
    _load_from_tv(ours, tv)
    feats = _feats()
    with torch.no_grad():
        expected, got = _tv_outputs(tv.eval(), feats), ours.eval()(feats)
    for e, o in zip(expected, got):
        torch.testing.assert_close(o, e)


def test_extra_levels_shapes_and_strides():
    feats = _feats(1)
    pooled = FPN(IN_CHANNELS, 8, num_outs=6)
    outs = pooled(feats)
    assert [tuple(o.shape) for o in outs][-2:] == [(1, 8, 3, 3), (1, 8, 2, 2)]
    torch.testing.assert_close(outs[5], outs[4][:, :, ::2, ::2])  # max-pool with kernel 1 = subsampling
    assert pooled.out_channels == [8] * 6 and pooled.out_strides == [4, 8, 16, 32, 64, 128]
    assert len(pooled.extra_convs) == 0

    convs = FPN(IN_CHANNELS, 8, num_outs=5, start_level=1, add_extra_convs=True, in_strides=[2, 4, 8, 16])
    assert convs.extra_source == "on_input" and convs.extra_convs[0].conv.in_channels == IN_CHANNELS[-1]
    assert convs.out_strides == [4, 8, 16, 32, 64]
    assert [tuple(o.shape[-2:]) for o in convs(feats)] == SIZES[1:] + [(3, 3), (2, 2)]

    lateral = FPN(IN_CHANNELS, 8, num_outs=3, end_level=1, add_extra_convs="on_lateral")
    outs = lateral(feats)
    assert lateral.out_strides == [4, 8, 16] and [tuple(o.shape[-2:]) for o in outs] == [(33, 41), (17, 21), (9, 11)]
    assert lateral.extra_convs[0].conv.in_channels == 8


def test_xavier_init_and_registry():
    fpn = MODELS.build(dict(type="FPN", in_channels=IN_CHANNELS, out_channels=16, num_outs=5, add_extra_convs=True))
    assert isinstance(fpn, FPN)
    for m in fpn.modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
            fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            assert m.weight.abs().max() <= bound and m.weight.abs().max() > 0.8 * bound
            assert torch.count_nonzero(m.bias) == 0


def test_gradients_reach_every_parameter():
    fpn = FPN(IN_CHANNELS, 8, num_outs=5, add_extra_convs="on_output", relu_before_extra_convs=True)
    sum(o.sum() for o in fpn(_feats(1))).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in fpn.parameters())


def test_errors():
    with pytest.raises(ValueError, match="in_channels"):
        FPN(256, 16, num_outs=5)
    with pytest.raises(ValueError, match="num_outs=3"):
        FPN(IN_CHANNELS, 16, num_outs=3)
    with pytest.raises(ValueError, match="add_extra_convs='on_top'"):
        FPN(IN_CHANNELS, 16, num_outs=5, add_extra_convs="on_top")
    with pytest.raises(ValueError, match="in_strides"):
        FPN(IN_CHANNELS, 16, num_outs=5, in_strides=[4, 8])
    with pytest.raises(ValueError, match="start_level"):
        FPN(IN_CHANNELS, 16, num_outs=5, start_level=4)
    with pytest.raises(ValueError, match="got 3 maps, built for 4"):
        FPN(IN_CHANNELS, 16, num_outs=5)(_feats()[:3])
    with pytest.raises(ValueError, match="no FPN key"):
        fpn_keys_from_torchvision({"body.conv1.weight": torch.zeros(1)})
