"""BiSeNetV2: real-size parameter count against a hand count of the paper's / mmseg's layers (2.16M backbone,
3.36M with the decode head: the "3.4M" usually quoted), the five outputs' strides and widths at sizes that are
not multiples of 32, and the four booster heads of the config."""

from __future__ import annotations

import copy

import pytest
import torch
from config_checks_segmentation import shrink_model

from segmentation.registry import MODELS


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _conv(k: int, cin: int, cout: int, groups: int = 1, norm: bool = True) -> int:
    """Parameters of a k x k conv (+ BN weight/bias, or a bias without norm)."""
    return k * k * cin // groups * cout + (2 * cout if norm else cout)


def _hand_count() -> int:
    detail = (_conv(3, 3, 64) + _conv(3, 64, 64)) + 3 * _conv(3, 64, 64) + (_conv(3, 64, 128) + 2 * _conv(3, 128, 128))
    stem = _conv(3, 3, 16) + _conv(1, 16, 8) + _conv(3, 8, 16) + _conv(3, 32, 16)

    def ge_down(i: int, o: int) -> int:  # gather 3x3, two depthwise (x6), project; separable shortcut
        m = 6 * i
        return (_conv(3, i, i) + _conv(3, i, m, groups=i) + _conv(3, m, m, groups=m) + _conv(1, m, o)
                + _conv(3, i, i, groups=i) + _conv(1, i, o))

    def ge(c: int) -> int:
        return _conv(3, c, c) + _conv(3, c, 6 * c, groups=c) + _conv(1, 6 * c, c)

    semantic = stem + ge_down(16, 32) + ge(32) + ge_down(32, 64) + ge(64) + ge_down(64, 128) + 3 * ge(128)
    ce = 2 * 128 + _conv(1, 128, 128) + _conv(3, 128, 128)
    separable = _conv(3, 128, 128, groups=128) + _conv(1, 128, 128, norm=False)
    bga = 2 * separable + 3 * _conv(3, 128, 128)  # detail_down, semantic_conv, final conv
    return detail + semantic + ce + bga


def test_full_size_parameters(base_cfg_loader):
    cfg = base_cfg_loader("bisenetv2")
    with torch.device("meta"):  # shapes only
        model = MODELS.build(copy.deepcopy(cfg))
    backbone = _params(model.backbone)
    assert backbone == _hand_count() == 2_157_712
    inference = backbone + _params(model.decode_head)  # the deployed network: aux heads train only
    assert 3.3e6 < inference < 3.45e6, inference
    assert model.backbone.out_channels == [128, 16, 32, 64, 128]
    assert model.backbone.out_strides == [8, 4, 8, 16, 32]
    assert [h.in_index for h in model.auxiliary_head] == [1, 2, 3, 4]
    assert [h.channels for h in model.auxiliary_head] == [16, 64, 256, 1024]
    assert model.decode_head.in_index == 0 and model.decode_head.channels == 1024


def test_branch_shapes_and_booster_losses(base_cfg_loader, batch_factory):
    torch.manual_seed(0)
    cfg = shrink_model(base_cfg_loader("bisenetv2"))
    cfg["num_classes"] = 4
    model = MODELS.build(cfg)
    bb = model.backbone
    bb.eval()
    # 70x90 is not a multiple of 32: both branches round up at every stride-2 step, so BGA's two gates still meet
    x = torch.randn(1, 3, 70, 90)
    with torch.no_grad():
        outs = bb(x)
        detail = bb.detail(x)
        semantic = bb.semantic(x)
    expected = [(16, 9, 12), (4, 18, 23), (8, 9, 12), (8, 5, 6), (16, 3, 3)]
    assert [tuple(t.shape[1:]) for t in outs] == expected
    assert tuple(detail.shape[1:]) == (16, 9, 12)  # detail branch: 1/8, wide
    assert [tuple(t.shape[1:]) for t in semantic] == expected[1:] + [(16, 3, 3)]  # ... CE block keeps 1/32
    for got, want in zip(outs[1:], semantic[:-1]):
        torch.testing.assert_close(got, want)  # booster features are the semantic stages themselves

    model.train()
    losses = model(**model.data_preprocessor(batch_factory(), True), mode="loss")
    assert {"decode.loss_ce", "aux0.loss_ce", "aux1.loss_ce", "aux2.loss_ce", "aux3.loss_ce"} <= set(losses)
    assert all(h.loss_decode[0].loss_weight == 1.0 for h in model.auxiliary_head)
    total = sum(v for k, v in losses.items() if "loss" in k)
    total.backward()
    # every branch learns from the losses: the detail branch through BGA, the stem through its booster head
    assert bb.detail.detail_branch[0][0].conv.weight.grad.abs().sum() > 0
    assert bb.semantic.stage1.conv_first.conv.weight.grad.abs().sum() > 0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"detail_channels\[-1\] \(64\), semantic_channels\[-1\] \(128\)"):
        MODELS.build(dict(type="BiSeNetV2", detail_channels=[64, 64, 64]))
    with pytest.raises(ValueError, match="out_indices must be"):
        MODELS.build(dict(type="BiSeNetV2", out_indices=[0, 5]))
