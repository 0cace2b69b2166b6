"""PSPHead: pyramid pooling against a hand-written bin-matrix reference, the mmseg pspnet_r50-d8 layout of
configs/_base_/models/pspnet_r50.yaml (shrunk), and argument errors."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from segmentation.models import PSPHead
from segmentation.registry import MODELS


def bin_matrix(size: int, bins: int) -> torch.Tensor:
    """[bins, size] averaging matrix of adaptive pooling: bin i covers [floor(i*n/s), ceil((i+1)*n/s))."""
    m = torch.zeros(bins, size)
    for i in range(bins):
        lo, hi = (i * size) // bins, math.ceil((i + 1) * size / bins)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def conv_bn_relu(x: torch.Tensor, block: torch.nn.Module) -> torch.Tensor:
    """A ConvNormAct in eval mode written out with functional ops (so the reference does not reuse modules)."""
    conv, bn = block[0], block[1]
    y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation)
    y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
    return F.relu(y)


def randomize_bn(model: torch.nn.Module, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)


def test_psp_head_matches_hand_computation():
    """8x8 input: bins 3 and 6 do not divide 8, so the cells overlap - the reference spells that out."""
    torch.manual_seed(0)
    head = PSPHead(in_channels=[4, 6], in_index=1, channels=5, num_classes=3, pool_scales=(1, 2, 3, 6)).eval()
    randomize_bn(head)
    x = torch.randn(2, 6, 8, 8)
    with torch.no_grad():
        out = head([torch.randn(2, 4, 16, 16), x])
        branches = []
        for s, branch in zip((1, 2, 3, 6), head.psp_modules):
            ph, pw = bin_matrix(8, s), bin_matrix(8, s)
            pooled = torch.einsum("ih,bchw,jw->bcij", ph, x, pw)
            y = conv_bn_relu(pooled, branch[1])
            branches.append(F.interpolate(y, size=(8, 8), mode="bilinear", align_corners=False))
        feat = conv_bn_relu(torch.cat([x, *branches], 1), head.bottleneck)
        ref = F.conv2d(feat, head.conv_seg.weight, head.conv_seg.bias)
    assert out.shape == (2, 3, 8, 8)
    assert head.bottleneck[0].in_channels == 6 + 4 * 5
    assert ref.abs().max() > 1e-2
    assert (out - ref).abs().max() <= 1e-5
    assert head.predict([x, x], (32, 24)).shape == (2, 3, 32, 24)


def test_pspnet_config_layout_and_losses(base_cfg_loader, batch_factory):
    """The base config's mmseg layout (bins 1/2/3/6, 512-ch bottleneck on stage 4, FCN aux on stage 3 at 0.4),
    checked on the full-size heads' widths and then trained one step shrunk."""
    cfg = copy.deepcopy(base_cfg_loader("pspnet_r50"))
    assert cfg["decode_head"]["pool_scales"] == [1, 2, 3, 6] and cfg["decode_head"]["channels"] == 512
    full_head = MODELS.build(dict(cfg["decode_head"], in_channels=[256, 512, 1024, 2048], num_classes=19))
    assert full_head.bottleneck[0].in_channels == 2048 + 4 * 512
    assert [b[1].conv.out_channels for b in full_head.psp_modules] == [512] * 4

    cfg["num_classes"] = 4
    cfg["backbone"].update(depth=18, base_channels=8)
    cfg["decode_head"]["channels"] = 8
    cfg["auxiliary_head"]["channels"] = 8
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    assert model.auxiliary_head.in_channels == 32 and model.auxiliary_head.loss_decode[0].loss_weight == 0.4
    model.train()
    data = model.data_preprocessor(batch_factory(), training=True)
    losses = model(**data, mode="loss")
    assert {"decode.loss_ce", "aux.loss_ce"} <= set(losses)
    sum(v for k, v in losses.items() if "loss" in k).backward()
    assert model.decode_head.psp_modules[3][1].conv.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(in_index=[0, 1]), "PSPHead takes one input feature"),
        (dict(pool_scales=[]), "pool_scales must be a non-empty list of positive ints"),
        (dict(pool_scales=[1, 0]), r"pool_scales must be a non-empty list of positive ints, got \[1, 0\]"),
    ],
)
def test_psp_head_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PSPHead(in_channels=[4, 8], num_classes=3, channels=4, **kwargs)
