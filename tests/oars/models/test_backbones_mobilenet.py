"""MobileNetV2 backbone: parity with torchvision's mobilenet_v2, dilation, freezing, errors."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from oars.models import MobileNetV2, load_pretrained
from oars.registry import MODELS

# last ``features`` index of each of the 7 groups, then the final 1x1 conv
STAGE_ENDS = [1, 3, 6, 10, 13, 16, 17, 18]


def tv_features(tv: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    outs = []
    for j, layer in enumerate(tv.features):
        x = layer(x)
        if j in STAGE_ENDS:
            outs.append(x)
    return outs


def assert_close(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() <= 1e-5


@pytest.mark.parametrize("widen_factor", [1.0, 0.5])
def test_torchvision_parity(widen_factor, randomize, image, tmp_path, pretrained):
    torch.manual_seed(0)
    tv = randomize(torchvision.models.mobilenet_v2(width_mult=widen_factor))
    with torch.no_grad():
        ref = tv_features(tv, image)

    ours = MobileNetV2(widen_factor, out_indices=range(8))
    result = ours.load_state_dict(tv.state_dict(), strict=False)
    assert result.missing_keys == []
    assert sorted(result.unexpected_keys) == ["classifier.1.bias", "classifier.1.weight"]
    with torch.no_grad():
        assert_close(ours.eval()(image), ref)
    assert ours.out_channels == [r.shape[1] for r in ref]
    assert ours.out_strides == [2, 4, 8, 16, 16, 32, 32, 32]

    path = tmp_path / "mbv2.pth"
    torch.save(tv.state_dict(), path)
    default = pretrained(MobileNetV2(widen_factor, init=dict(checkpoint=str(path)))).eval()
    assert len(default.features) == 18  # features.18 only exists when index 7 is asked for
    with torch.no_grad():
        assert_close(default(image), [ref[i] for i in (1, 2, 4, 6)])
    report = load_pretrained(default, dict(checkpoint=str(path)), skip_prefixes=["classifier.", "features.18."])
    assert report == ([], [], [])


def test_default_outputs_and_registry(image):
    model = MODELS.build(dict(type="MobileNetV2")).eval()
    outs = model(image)
    assert [tuple(o.shape[1:]) for o in outs] == [(24, 16, 16), (32, 8, 8), (96, 4, 4), (320, 2, 2)]
    assert model.out_channels == [24, 32, 96, 320] and model.out_strides == [4, 8, 16, 32]


@pytest.mark.parametrize("output_stride,strides,untouched", [(16, [4, 8, 16, 16, 16], 4), (8, [4, 8, 8, 8, 8], 2)])
def test_output_stride(output_stride, strides, untouched, image):
    torch.manual_seed(0)
    plain = MobileNetV2(0.5, out_indices=(1, 2, 3, 4, 6)).eval()
    dilated = MobileNetV2(0.5, out_indices=(1, 2, 3, 4, 6), output_stride=output_stride).eval()
    dilated.load_state_dict(plain.state_dict())
    assert dilated.out_strides == strides
    outs, ref = dilated(image), plain(image)
    assert [o.shape[-1] for o in outs] == [64 // s for s in strides]
    # groups before the first dilated one are untouched
    for a, b in zip(outs[:untouched], ref[:untouched]):
        assert torch.equal(a, b)

    def dw(j):  # depthwise conv of block features[j] (features.1 has no expansion conv)
        return dilated.features[j].conv[0 if j == 1 else 1][0]

    if output_stride == 16:
        expected = {j: 1 for j in range(1, 14)} | {j: 2 for j in range(14, 18)}
    else:
        expected = {j: 1 for j in range(1, 7)} | {j: 2 for j in range(7, 14)} | {j: 4 for j in range(14, 18)}
    assert {j: dw(j).dilation[0] for j in range(1, 18)} == expected
    assert all(dw(j).padding[0] == dw(j).dilation[0] for j in range(1, 18))
    assert dw(14).stride == (1, 1) and not dilated.features[14].use_res_connect
    assert dilated.features[15].use_res_connect


def test_frozen_stages_and_norm_eval(image):
    model = MobileNetV2(0.5, frozen_stages=2).train()
    frozen = list(model.features[:4])  # stem, group 0 (features.1), group 1 (features.2-3)
    assert all(not p.requires_grad for m in frozen for p in m.parameters())
    assert all(not m.training for f in frozen for m in f.modules())
    assert all(p.requires_grad for p in model.features[4].parameters()) and model.features[4].training
    before = model.features[3].conv[0][1].running_mean.clone()
    model(image)
    assert torch.equal(model.features[3].conv[0][1].running_mean, before)

    stem = MobileNetV2(0.5, frozen_stages=0).train()
    assert not stem.features[0].training and stem.features[1].training
    assert not stem.features[0][0].weight.requires_grad and stem.features[1].conv[0][0].weight.requires_grad

    norm_eval = MobileNetV2(0.5, norm_eval=True).train()
    bns = [m for m in norm_eval.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norm_eval.training and bns and all(not m.training for m in bns)
    norm_eval(image)
    assert all(torch.equal(m.running_mean, torch.zeros_like(m.running_mean)) for m in bns)


@pytest.mark.parametrize("norm", ["BN", "SyncBN", "FrozenBN", {"type": "GN", "num_groups": 8}])
def test_norm_types_run(norm):
    model = MobileNetV2(0.5, norm=norm)
    x = torch.randn(2, 3, 32, 32)
    for mode in (True, False):
        outs = model.train(mode)(x)
        assert [o.shape[-1] for o in outs] == [8, 4, 2, 1]
        assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(out_indices=(8,)), r"out_indices=\[8\].*\[0, 1, 2, 3, 4, 5, 6, 7\]"),
        (dict(out_indices=(2, 2)), r"out_indices=\[2, 2\]"),
        (dict(output_stride=12), r"output_stride=12 .*None, 8, 16, 32"),
        (dict(frozen_stages=9), r"frozen_stages=9"),
        (dict(widen_factor=0), r"widen_factor=0"),
        (dict(norm={"type": "LN"}), r"'LN'.*accepted"),
    ],
)
def test_invalid_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MobileNetV2(**kwargs)
