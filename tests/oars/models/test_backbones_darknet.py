"""DarkNet-53 backbone: shapes, parameter count, unbuilt stages, freezing, pretrained loading, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from oars.models.backbones import DarkNet
from oars.registry import MODELS


def darknet53_param_count(base: int = 32) -> int:
    """Conv weights + BN affine parameters of the DarkNet-53 body, written out from the architecture."""

    def conv_bn(cin: int, cout: int, k: int) -> int:
        return cin * cout * k * k + 2 * cout

    total = conv_bn(3, base, 3)
    c = base
    for n in (1, 2, 8, 8, 4):
        total += conv_bn(c, 2 * c, 3)
        c *= 2
        total += n * (conv_bn(c, c // 2, 1) + conv_bn(c // 2, c, 3))
    return total


def test_default_darknet53(image):
    model = MODELS.build(dict(type="DarkNet")).eval()
    assert model.out_channels == [256, 512, 1024] and model.out_strides == [8, 16, 32]
    with torch.no_grad():
        outs = model(image)
    assert isinstance(outs, tuple)
    assert [tuple(o.shape[1:]) for o in outs] == [(256, 8, 8), (512, 4, 4), (1024, 2, 2)]
    # 40,584,928 parameters (conv + BN affine, no classifier): mmdet's and the paper's "~40.6 M" body
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == darknet53_param_count() == 40_584_928
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 52  # 53 layers minus the classifier
    assert all(m.bias is None for m in convs)
    acts = [m for m in model.modules() if isinstance(m, nn.LeakyReLU)]
    assert len(acts) == 52 and all(m.negative_slope == 0.1 for m in acts)


def test_narrow_all_indices(image):
    model = DarkNet(base_channels=8, out_indices=range(6)).eval()
    assert model.out_channels == [8, 16, 32, 64, 128, 256]
    assert model.out_strides == [1, 2, 4, 8, 16, 32]
    with torch.no_grad():
        outs = model(image)
    assert [tuple(o.shape[1:]) for o in outs] == [
        (c, 64 // s, 64 // s) for c, s in zip(model.out_channels, model.out_strides)
    ]
    assert [len(getattr(model, f"conv_res_block{i}")) for i in range(1, 6)] == [2, 3, 9, 9, 5]  # conv + blocks
    assert sum(p.numel() for p in model.parameters()) == darknet53_param_count(8)


def test_residual_block_is_identity_plus_branch():
    model = DarkNet(base_channels=8, out_indices=(1,)).eval()
    block = model.conv_res_block1.res0
    x = torch.randn(2, 16, 8, 8)
    with torch.no_grad():
        nn.init.zeros_(block.conv2[1].weight)  # zero BN scale + zero bias -> branch is leaky_relu(0) = 0
        assert torch.equal(block(x), x)  # no activation after the sum (negative inputs stay negative)
    assert block.conv1[0].kernel_size == (1, 1) and block.conv1[0].out_channels == 8
    assert block.conv2[0].kernel_size == (3, 3) and block.conv2[0].out_channels == 16


def test_unbuilt_stages_and_pretrained(image, tmp_path, pretrained):
    full = DarkNet(base_channels=8, out_indices=(3, 4, 5)).eval()
    path = tmp_path / "darknet.pth"
    torch.save({"state_dict": {f"backbone.{k}": v for k, v in full.state_dict().items()}}, path)

    short = pretrained(DarkNet(base_channels=8, out_indices=(2, 3), init=dict(checkpoint=str(path), prefix="backbone")))
    assert not hasattr(short, "conv_res_block4") and not hasattr(short, "conv_res_block5")
    assert short.stage_names == ["conv1", "conv_res_block1", "conv_res_block2", "conv_res_block3"]
    assert short.out_channels == [32, 64] and short.out_strides == [4, 8]
    with torch.no_grad():
        ours, ref = short.eval()(image), full(image)
    assert torch.equal(ours[1], ref[0])  # same weights, the stride-8 map is unchanged


@pytest.mark.parametrize("frozen_stages", [-1, 0, 2, 5])
def test_frozen_stages(frozen_stages, image):
    model = DarkNet(base_channels=8, out_indices=(3, 4, 5), frozen_stages=frozen_stages).train()
    names = model.stage_names
    for i, name in enumerate(names):
        stage = getattr(model, name)
        frozen = i <= frozen_stages
        assert all(p.requires_grad is not frozen for p in stage.parameters()), name
        assert all(m.training is not frozen for m in stage.modules()), name
    if frozen_stages >= 1:
        bn = model.conv_res_block1.conv[1]
        before = bn.running_mean.clone()
        model(image)
        assert torch.equal(bn.running_mean, before)
    model.eval()
    assert not any(m.training for m in model.modules())


def test_norm_eval(image):
    model = DarkNet(base_channels=8, norm_eval=True).train()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert model.training and bns and all(not m.training for m in bns)
    model(image)
    assert all(torch.equal(m.running_mean, torch.zeros_like(m.running_mean)) for m in bns)


def test_norm_and_act_specs():
    model = DarkNet(base_channels=8, out_indices=(1, 2), norm={"type": "GN", "num_groups": 4}, act="SiLU")
    assert any(isinstance(m, nn.GroupNorm) for m in model.modules())
    assert any(isinstance(m, nn.SiLU) for m in model.modules())
    outs = model(torch.randn(1, 3, 32, 32))
    assert [o.shape[-1] for o in outs] == [16, 8]


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(depth=21), r"depth=21 is not supported; accepted: \[53\]"),
        (dict(out_indices=(6,)), r"out_indices=\[6\].*\[0, 1, 2, 3, 4, 5\]"),
        (dict(out_indices=(4, 3)), r"out_indices=\[4, 3\].*strictly increasing"),
        (dict(out_indices=()), r"out_indices=\[\]"),
        (dict(frozen_stages=6), r"frozen_stages=6"),
        (dict(base_channels=7), r"base_channels=7"),
        (dict(norm="LN"), r"'LN'.*accepted"),
        (dict(act="Swish"), r"'Swish'.*accepted"),
    ],
)
def test_invalid_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        DarkNet(**{"base_channels": 8, **kwargs})
