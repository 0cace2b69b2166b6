"""MobileNetV1 / MobileNetV3 backbones: torchvision parity (V3), shapes, freezing, errors."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from oars.models import load_pretrained
from oars.models.backbones import MobileNetV1, MobileNetV3
from oars.registry import MODELS

CLASSIFIER_KEYS = ["classifier.0.bias", "classifier.0.weight", "classifier.3.bias", "classifier.3.weight"]
NUM_FEATURES = {"large": 17, "small": 13}


def assert_close(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() <= 1e-5


def tv_features(tv: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    outs = []
    for layer in tv.features:
        x = layer(x)
        outs.append(x)
    return outs


# ---------------------------------------------------------------- MobileNetV3


@pytest.mark.parametrize("arch,widen_factor", [("large", 1.0), ("small", 1.0), ("small", 0.75)])
def test_v3_torchvision_parity(arch, widen_factor, randomize, image, tmp_path, pretrained):
    torch.manual_seed(0)
    tv = randomize(getattr(torchvision.models, f"mobilenet_v3_{arch}")(width_mult=widen_factor))
    with torch.no_grad():
        ref = tv_features(tv, image)

    ours = MobileNetV3(arch, widen_factor, out_indices=range(NUM_FEATURES[arch]))
    assert list(ours.state_dict()) == [k for k in tv.state_dict() if not k.startswith("classifier.")]
    result = ours.load_state_dict(tv.state_dict(), strict=False)
    assert result.missing_keys == []
    assert sorted(result.unexpected_keys) == CLASSIFIER_KEYS
    with torch.no_grad():
        assert_close(ours.eval()(image), ref)
    assert ours.out_channels == [r.shape[1] for r in ref]
    assert ours.out_strides == [64 // r.shape[-1] for r in ref]

    # default YOLOv3 levels, loaded from a file; the final 1x1 conv is not built
    path = tmp_path / "mbv3.pth"
    torch.save(tv.state_dict(), path)
    default = pretrained(MobileNetV3(arch, widen_factor, init=dict(checkpoint=str(path)))).eval()
    indices = default.out_indices
    assert len(default.features) == indices[-1] + 1 < NUM_FEATURES[arch]
    assert default.out_strides == [8, 16, 32]
    with torch.no_grad():
        assert_close(default(image), [ref[i] for i in indices])
    skip = ["classifier."] + [f"features.{j}." for j in range(indices[-1] + 1, NUM_FEATURES[arch])]
    assert load_pretrained(default, dict(checkpoint=str(path)), skip_prefixes=skip) == ([], [], [])


@pytest.mark.parametrize(
    "arch,channels", [("large", [(40, 8), (112, 4), (160, 2)]), ("small", [(24, 8), (48, 4), (96, 2)])]
)
def test_v3_default_outputs_and_registry(arch, channels, image):
    model = MODELS.build(dict(type="MobileNetV3", arch=arch)).eval()
    assert model.out_indices == {"large": (6, 12, 15), "small": (3, 8, 11)}[arch]
    with torch.no_grad():
        outs = model(image)
    assert isinstance(outs, tuple)
    assert [(o.shape[1], o.shape[-1]) for o in outs] == channels
    assert model.out_channels == [c for c, _ in channels] and model.out_strides == [8, 16, 32]


def test_v3_frozen_stages_and_norm_eval(image):
    model = MobileNetV3("small", frozen_stages=3).train()
    for j, layer in enumerate(model.features):
        frozen = j <= 3
        assert all(p.requires_grad is not frozen for p in layer.parameters()), j
        assert all(m.training is not frozen for m in layer.modules()), j
    bn = model.features[3].block[0][1]
    before = bn.running_mean.clone()
    model(image)
    assert torch.equal(bn.running_mean, before)
    assert not torch.equal(model.features[4].block[0][1].running_mean, torch.zeros(96))

    norm_eval = MobileNetV3("small", norm_eval=True).train()
    bns = [m for m in norm_eval.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norm_eval.training and bns and all(not m.training for m in bns)
    assert all(m.eps == 1e-3 and m.momentum == 0.01 for m in bns)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(arch="medium"), r"arch='medium'.*\['large', 'small'\]"),
        (dict(arch="small", out_indices=(13,)), r"out_indices=\[13\].*\[0, 1, .*, 12\]"),
        (dict(out_indices=(17,)), r"out_indices=\[17\].*\[0, 1, .*, 16\]"),
        (dict(out_indices=(3, 3)), r"out_indices=\[3, 3\].*strictly increasing"),
        (dict(frozen_stages=17), r"frozen_stages=17"),
        (dict(widen_factor=0), r"widen_factor=0"),
        (dict(norm={"type": "LN"}), r"'LN'.*accepted"),
    ],
)
def test_v3_invalid_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MobileNetV3(**kwargs)


# ---------------------------------------------------------------- MobileNetV1


def test_v1_default_outputs_and_registry(image):
    model = MODELS.build(dict(type="MobileNetV1")).eval()
    assert model.out_indices == (4, 6, 13)
    assert model.out_channels == [256, 512, 1024] and model.out_strides == [8, 16, 32]
    with torch.no_grad():
        outs = model(image)
    assert isinstance(outs, tuple)
    assert [tuple(o.shape[1:]) for o in outs] == [(256, 8, 8), (512, 4, 4), (1024, 2, 2)]
    # MobileNet-224 has 4.2 M parameters of which 1.025 M are the 1024x1000 classifier
    assert sum(p.numel() for p in model.parameters()) == 3_206_976


def test_v1_narrow_all_indices(image):
    model = MobileNetV1(0.25, out_indices=range(14)).eval()
    assert model.out_channels == [8, 16, 32, 32, 64, 64, 128, 128, 128, 128, 128, 128, 256, 256]
    assert model.out_strides == [2, 2, 4, 4, 8, 8, 16, 16, 16, 16, 16, 16, 32, 32]
    with torch.no_grad():
        outs = model(image)
    assert [tuple(o.shape[1:]) for o in outs] == [
        (c, 64 // s, 64 // s) for c, s in zip(model.out_channels, model.out_strides)
    ]
    block = model.features[2]  # depthwise 3x3 with the stride, then pointwise 1x1
    dw, pw = block[0][0], block[1][0]
    assert dw.groups == dw.in_channels == 16 and dw.stride == (2, 2) and dw.kernel_size == (3, 3)
    assert pw.kernel_size == (1, 1) and pw.out_channels == 32
    assert sum(isinstance(m, nn.ReLU) for m in model.modules()) == 27  # stem + 2 per block


def test_v1_unbuilt_blocks_and_pretrained(image, tmp_path, pretrained):
    full = MobileNetV1(0.25).eval()
    path = tmp_path / "mbv1.pth"
    torch.save(full.state_dict(), path)
    short = pretrained(MobileNetV1(0.25, out_indices=(4, 6), init=dict(checkpoint=str(path), strict=False))).eval()
    assert len(short.features) == 7 and short.out_channels == [64, 128]
    with torch.no_grad():
        assert_close(short(image), full(image)[:2])


@pytest.mark.parametrize("frozen_stages", [-1, 0, 5])
def test_v1_frozen_stages(frozen_stages, image):
    model = MobileNetV1(0.25, frozen_stages=frozen_stages).train()
    for j, layer in enumerate(model.features):
        frozen = j <= frozen_stages
        assert all(p.requires_grad is not frozen for p in layer.parameters()), j
        assert all(m.training is not frozen for m in layer.modules()), j
    model(image)


def test_v1_norm_eval_and_specs(image):
    model = MobileNetV1(0.25, norm_eval=True, act="ReLU6").train()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(not m.training for m in bns) and any(isinstance(m, nn.ReLU6) for m in model.modules())
    model(image)
    assert all(torch.equal(m.running_mean, torch.zeros_like(m.running_mean)) for m in bns)
    gn = MobileNetV1(0.25, out_indices=(2,), norm={"type": "GN", "num_groups": 8})
    assert gn(image)[0].shape == (1, 32, 16, 16)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(out_indices=(14,)), r"out_indices=\[14\].*\[0, 1, .*, 13\]"),
        (dict(out_indices=(6, 4)), r"out_indices=\[6, 4\].*strictly increasing"),
        (dict(frozen_stages=14), r"frozen_stages=14"),
        (dict(widen_factor=0.01), r"widen_factor=0.01"),
        (dict(act="Swish"), r"'Swish'.*accepted"),
    ],
)
def test_v1_invalid_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MobileNetV1(**kwargs)
