"""The champion backbones' pieces: DCNv2 (``ModulatedDeformConv2d``), ResNet's deep stem / average-pool shortcut /
DCN switches and depth 200, SENet-154, and their full-size parameter counts against published numbers (each with a
hand count written out below)."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn
from torch.nn import functional as F

from oars.export.errors import ExportError
from oars.models import ResNet
from oars.models.backbones import SENet
from oars.models.layers import ModulatedDeformConv2d, modulated_deform_conv
from oars.models.layers.deform_conv import check_deform_conv_export
from oars.registry import MODELS

FC_1000 = 2048 * 1000 + 1000  # the ImageNet classifier of every 2048-channel trunk below, not part of a backbone


def conv(a: int, b: int, k: int = 1, groups: int = 1) -> int:
    """A bias-free k x k convolution a -> b."""
    return a // groups * b * k * k


def bn(c: int) -> int:
    return 2 * c


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------- DCNv2


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 1, 1, 4), (1, 2, 2, 2)])
def test_dcn_with_zero_offsets_and_unit_masks_is_the_plain_conv(stride, padding, dilation, groups):
    torch.manual_seed(0)
    dcn = ModulatedDeformConv2d(8, 16, 3, stride=stride, padding=padding, dilation=dilation, groups=groups)
    plain = nn.Conv2d(8, 16, 3, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=False)
    plain.weight.data.copy_(dcn.weight.data)
    x = torch.randn(2, 8, 9, 11)
    offset, mask = dcn.offset_and_mask(x)
    assert offset.abs().max() == 0 and offset.shape[1] == 18 and mask.shape[1] == 9
    want = plain(x)
    got = modulated_deform_conv(x, offset, torch.ones_like(mask), dcn.weight, None, stride, padding, dilation)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # the fresh layer: a regular grid and every mask sigmoid(0) = 0.5 (mmcv's and Paddle's initialisation)
    torch.testing.assert_close(dcn(x), 0.5 * want, rtol=1e-5, atol=1e-5)
    # the bad case: offsets of half a pixel move the samples, and the result is no longer the plain conv
    shifted = modulated_deform_conv(x, offset + 0.5, torch.ones_like(mask), dcn.weight, None, stride, padding,
                                    dilation)
    assert (shifted - want).abs().max() > 1e-2


def test_dcn_learns_offsets_and_keeps_conv_weight_names():
    dcn = ModulatedDeformConv2d(4, 4, 3, padding=1)
    assert sorted(n for n, _ in dcn.named_parameters()) == ["conv_offset.bias", "conv_offset.weight", "weight"]
    dcn(torch.randn(1, 4, 6, 6)).sum().backward()
    assert dcn.conv_offset.weight.grad is not None and dcn.conv_offset.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"in_channels=6 and out_channels=4 must be divisible by groups=4"):
        ModulatedDeformConv2d(6, 4, 3, groups=4)


def test_dcn_exports_at_opset_19_and_runs_in_onnx_runtime(tmp_path):
    """ONNX ``DeformConv`` (opset 19): ONNX Runtime computes what ``deform_conv2d`` computes, offsets not zero."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    dcn = ModulatedDeformConv2d(4, 8, 3, stride=2, padding=1, groups=2).eval()
    nn.init.normal_(dcn.conv_offset.weight, std=0.3)
    x = torch.randn(1, 4, 10, 12)
    path = tmp_path / "dcn.onnx"
    torch.onnx.export(dcn, (x,), str(path), dynamo=True, opset_version=19, verbose=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(got), dcn(x), rtol=1e-4, atol=1e-4)


def test_export_below_opset_19_is_refused_naming_dcn_stages():
    cfg = {"type": "FasterRCNN", "backbone": {"type": "SENet", "dcn_stages": [False, True, True, True]}}
    with pytest.raises(ExportError, match=r"x\.yaml: model\.backbone\.dcn_stages turns on deformable convolutions "
                                          r".*--opset 19 or later \(got --opset 18\)"):
        check_deform_conv_export(cfg, 18, "x.yaml")
    check_deform_conv_export(cfg, 19, "x.yaml")  # DeformConv exists from opset 19
    check_deform_conv_export({"backbone": {"dcn_stages": [False] * 4}}, 18, "x.yaml")  # no DCN: any opset
    check_deform_conv_export({"backbone": {"type": "ResNet"}}, 16, "x.yaml")


# ---------------------------------------------------------------------------------------------------- ResNet


def test_deep_stem_widths_and_avg_down(image):
    """ACE2P's 64-64-128 deep stem feeds layer1 128 channels; ``avg_down`` alone gives the vd shortcut behind the
    7x7 stem; ``variant: vd`` is the two switches together (same modules and names)."""
    model = ResNet(50, base_channels=16, deep_stem=True, stem_channels=(16, 16, 32)).eval()
    assert [model.stem[i].out_channels for i in (0, 3, 6)] == [16, 16, 32]
    assert [model.stem[i].stride for i in (0, 3, 6)] == [(2, 2), (1, 1), (1, 1)]
    assert model.layer1[0].conv1.in_channels == 32 and model.layer1[0].downsample[0].in_channels == 32
    assert model.forward_stem(image).shape == (1, 32, 16, 16)
    assert [tuple(o.shape[1:]) for o in model(image)] == [(64, 16, 16), (128, 8, 8), (256, 4, 4), (512, 2, 2)]
    assert isinstance(model.layer2[0].downsample[0], nn.Conv2d)  # no avg_down: the strided 1x1 shortcut

    avg = ResNet(50, base_channels=16, avg_down=True).eval()
    assert hasattr(avg, "conv1") and not hasattr(avg, "stem")
    pool = avg.layer2[0].downsample[0]
    assert isinstance(pool, nn.AvgPool2d) and pool.kernel_size == 2 and pool.ceil_mode and not pool.count_include_pad
    assert avg.layer2[0].downsample[1].stride == (1, 1)
    assert [o.shape[-1] for o in avg(torch.randn(1, 3, 50, 50))] == [13, 7, 4, 2]

    switches = ResNet(50, base_channels=16, deep_stem=True, avg_down=True)
    vd = ResNet(50, base_channels=16, variant="vd")
    assert list(switches.state_dict()) == list(vd.state_dict())
    vd.load_state_dict(switches.state_dict())
    with torch.no_grad():
        for a, b in zip(switches.eval()(image), vd.eval()(image)):
            torch.testing.assert_close(a, b)


def test_dcn_stages_resnet_loads_torchvision_weights(randomize):
    """``dcn_stages`` swaps the 3x3 convs of those stages only; torchvision's ``conv2.weight`` loads into them and
    only the offset convs are new (and start at zero)."""
    model = ResNet(50, dcn_stages=[False, True, True, True])
    dcn = {n for n, m in model.named_modules() if isinstance(m, ModulatedDeformConv2d)}
    assert len(dcn) == 4 + 6 + 3 and all(n.startswith(("layer2.", "layer3.", "layer4.")) for n in dcn)
    assert all(n.endswith(".conv2") for n in dcn)
    assert all(model.get_submodule(n).conv_offset.weight.abs().sum() == 0 for n in dcn)
    result = model.load_state_dict(randomize(torchvision.models.resnet50()).state_dict(), strict=False)
    assert sorted(result.missing_keys) == sorted(f"{n}.conv_offset.{p}" for n in dcn for p in ("weight", "bias"))
    assert sorted(result.unexpected_keys) == ["fc.bias", "fc.weight"]
    stride2 = model.layer3[0].conv2
    assert (stride2.stride, stride2.conv_offset.stride) == (2, (2, 2))

    small = ResNet(18, base_channels=8, dcn_stages=[True, False, False, True]).train()  # BasicBlock's 2nd conv
    assert isinstance(small.layer1[1].conv2, ModulatedDeformConv2d) and isinstance(small.layer1[1].conv1, nn.Conv2d)
    outs = small(torch.randn(2, 3, 64, 64))
    assert [o.shape[1] for o in outs] == [8, 16, 32, 64]
    sum(o.sum() for o in outs).backward()
    assert small.layer4[0].conv2.conv_offset.weight.grad is not None


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(depth=50, stem_channels=(32, 32, 64)), r"stem_channels=\[32, 32, 64\] sets the deep stem's widths, "
                                                      r"but the deep stem is off; set deep_stem: true"),
        (dict(depth=50, deep_stem=True, stem_channels=(32, 64)), r"stem_channels=\(32, 64\) must be 3 positive"),
        (dict(depth=50, deep_stem="yes"), r"deep_stem='yes' must be true or false"),
        (dict(depth=50, avg_down=1), r"avg_down=1 must be true or false"),
        (dict(depth=50, dcn_stages=(True, True, True)), r"dcn_stages=\(True, True, True\) must be 4 booleans"),
        (dict(depth=50, dcn_stages=(0, 1, 1, 1)), r"dcn_stages=\(0, 1, 1, 1\) must be 4 booleans"),
        (dict(depth=200, variant="x"), r"variant='x'"),
        (dict(depth=250), r"depth=250 is not supported; accepted: \[18, 34, 50, 101, 152, 200\]"),
    ],
)
def test_resnet_option_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        ResNet(**kwargs)


def test_resnet_defaults_unchanged():
    """No new switch on by default: ResNet-50 is torchvision's layout (the same parameter names and shapes)."""
    ours = {k: v.shape for k, v in ResNet(50).state_dict().items()}
    theirs = {k: v.shape for k, v in torchvision.models.resnet50().state_dict().items() if not k.startswith("fc.")}
    assert ours == theirs


def _bottleneck_stages(inplanes: int, blocks: tuple[int, ...], avg_down: bool = False) -> int:
    """Hand count of ResNet's four Bottleneck stages (planes 64 .. 512, BN everywhere): per block conv(in, p) +
    conv(p, p, 3) + conv(p, 4p) with three BN, plus the first block's shortcut conv(in, 4p) + BN (the vd average
    pool adds no parameter)."""
    total = 0
    for i, n in enumerate(blocks):
        p = 64 * 2**i
        for j in range(n):
            cin = inplanes if j == 0 else 4 * p
            total += conv(cin, p) + bn(p) + conv(p, p, 3) + bn(p) + conv(p, 4 * p) + bn(4 * p)
        total += conv(inplanes, 4 * p) + bn(4 * p)
        inplanes = 4 * p
    return total


def test_resnet200_and_resnet101_vd_parameter_counts():
    """ResNet-200 (He et al. 2016, "Identity Mappings"; timm's ``resnet200``: 64,673,832 parameters with its
    2048 -> 1000 fc): 7x7 stem conv(3, 64, 7) + BN = 9,536; stages [3, 24, 36, 3]: 62,615,296; trunk
    62,624,832 + fc 2,049,000 = 64,673,832.
    ResNet-101-vd: torchvision's resnet101 44,549,160 less its fc (2,049,000) = 42,500,160, whose 7x7 stem (9,536)
    becomes the deep stem conv(3, 32, 3) + BN + conv(32, 32, 3) + BN + conv(32, 64, 3) + BN = 28,768 (+19,232);
    average-pool shortcuts have no parameters: 42,519,392."""
    stem7 = conv(3, 64, 7) + bn(64)
    deep = conv(3, 32, 3) + bn(32) + conv(32, 32, 3) + bn(32) + conv(32, 64, 3) + bn(64)
    assert (stem7, deep) == (9_536, 28_768)
    r200 = stem7 + _bottleneck_stages(64, (3, 24, 36, 3))
    assert r200 == 62_624_832 and r200 + FC_1000 == 64_673_832
    r101 = stem7 + _bottleneck_stages(64, (3, 4, 23, 3))
    assert r101 + FC_1000 == 44_549_160  # torchvision resnet101's weights meta
    with torch.device("meta"):
        assert count(ResNet(200)) == r200
        assert count(ResNet(101, variant="vd")) == r101 - stem7 + deep == 42_519_392
        assert count(ResNet(101, deep_stem=True, avg_down=True)) == 42_519_392


# ---------------------------------------------------------------------------------------------------- SENet


def senet_hand_count(depth_blocks: tuple[int, ...] = (3, 8, 36, 3), groups: int = 64, group_width: int = 4,
                     reduction: int = 16, with_bn: bool = True, dcn_stages: tuple[bool, ...] = (False,) * 4) -> int:
    """SENet-154 by hand (Cadene's ``senet154`` layout): stem conv(3, 64, 3) + conv(64, 64, 3) + conv(64, 128, 3);
    per block of width w (256 .. 2048) conv(in, w/2) + grouped conv(w/2, w, 3, groups) + conv(w, w) + SE fc(w, w/16)
    + fc(w/16, w) with biases; shortcut conv(128, 256, 1) in stage 1, conv(in, w, 3) in stages 2-4; BN (2 per
    channel) after every conv unless frozen; a DCNv2 block adds its offset conv fc(w/2 * 9, 27)."""
    norm = bn if with_bn else (lambda c: 0)
    total = conv(3, 64, 3) + norm(64) + conv(64, 64, 3) + norm(64) + conv(64, 128, 3) + norm(128)
    inplanes = 128
    for i, n in enumerate(depth_blocks):
        w = groups * group_width * 2**i
        hidden = w // reduction
        for j in range(n):
            cin = inplanes if j == 0 else w
            total += conv(cin, w // 2) + norm(w // 2) + conv(w // 2, w, 3, groups) + norm(w) + conv(w, w) + norm(w)
            total += w * hidden + hidden + hidden * w + w
            if dcn_stages[i]:
                total += (w // 2 * 9 + 1) * 27
        total += conv(inplanes, w, 1 if i == 0 else 3) + norm(w)
        inplanes = w
    return total


def test_senet154_parameter_count():
    """SENet-154 (Hu et al. 2018; Cadene's pretrainedmodels ``senet154``: 115,088,984 parameters with its
    2048 -> 1000 ``last_linear``): trunk 113,039,984 + fc 2,049,000. DCNv2 in C3-C5 adds 8 x 62,235 + 36 x 124,443 +
    3 x 248,859 = 5,724,405 offset parameters; frozen BN (buffers) removes 247,552."""
    trunk = senet_hand_count()
    assert trunk == 113_039_984 and trunk + FC_1000 == 115_088_984
    dcn = (False, True, True, True)
    assert senet_hand_count(dcn_stages=dcn) - trunk == 8 * 62_235 + 36 * 124_443 + 3 * 248_859 == 5_724_405
    assert trunk - senet_hand_count(with_bn=False) == 247_552
    with torch.device("meta"):
        assert count(SENet()) == trunk
        assert count(SENet(dcn_stages=list(dcn))) == trunk + 5_724_405
        assert count(SENet(dcn_stages=list(dcn), norm="FrozenBN")) == 118_516_837


def test_senet_layout_names_and_shapes(tmp_path, pretrained):
    torch.manual_seed(0)
    model = MODELS.build(dict(type="SENet", depth=50, groups=4, group_width=2, dcn_stages=[False, True, True, True]))
    assert isinstance(model, SENet) and model.out_channels == [8, 16, 32, 64] and model.out_strides == [4, 8, 16, 32]
    keys = set(model.state_dict())
    assert {"layer0.conv1.weight", "layer0.bn3.running_var", "layer1.0.se_module.fc1.bias",
            "layer1.0.downsample.0.weight", "layer4.2.conv3.weight", "layer3.0.conv2.conv_offset.weight"} <= keys
    assert model.layer1[0].downsample[0].kernel_size == (1, 1)  # stage 1: 1x1 projection, stride 1
    assert model.layer2[0].downsample[0].kernel_size == (3, 3) and model.layer2[0].downsample[0].stride == (2, 2)
    assert model.layer1[0].conv2.groups == 4 and isinstance(model.layer2[0].conv2, ModulatedDeformConv2d)
    assert model.layer2[0].conv2.groups == 4 and model.layer2[0].conv2.weight.shape == (16, 2, 3, 3)
    x = torch.randn(2, 3, 64, 64)
    outs = model.train()(x)
    assert [tuple(o.shape[1:]) for o in outs] == [(8, 16, 16), (16, 8, 8), (32, 4, 4), (64, 2, 2)]
    sum(o.mean() for o in outs).backward()
    assert model.layer4[0].conv2.conv_offset.weight.grad is not None

    # a Cadene-style checkpoint (keys as above, plus its classifier) loads by name
    model.eval()
    state = {**model.state_dict(), "last_linear.weight": torch.zeros(1000, 64), "last_linear.bias": torch.zeros(1000)}
    torch.save(state, tmp_path / "senet.pth")
    loaded = pretrained(SENet(depth=50, groups=4, group_width=2, dcn_stages=[False, True, True, True],
                              init=dict(checkpoint=str(tmp_path / "senet.pth"), strict=True))).eval()
    with torch.no_grad():
        for a, b in zip(loaded(x), model(x)):
            torch.testing.assert_close(a, b)


def test_senet_frozen_stages_norm_eval_and_out_indices():
    model = SENet(depth=50, groups=4, group_width=2, frozen_stages=1, norm_eval=True, out_indices=(1, 2)).train()
    assert not any(p.requires_grad for p in model.layer0.parameters())
    assert not any(p.requires_grad for p in model.layer1.parameters())
    assert all(p.requires_grad for p in model.layer2.parameters())
    assert not model.layer0.training and not model.layer1.training and model.layer2.training
    assert not model.layer2[0].bn1.training  # norm_eval
    assert not hasattr(model, "layer4") and model.out_channels == [16, 32]
    assert [o.shape[1] for o in model(torch.randn(1, 3, 32, 32))] == [16, 32]


def test_senet_se_gate_scales_channels():
    """The SE gate is a per-channel factor in (0, 1) from the channel means (zero fc weights: every gate 0.5)."""
    model = SENet(depth=50, groups=4, group_width=2)
    se = model.layer1[0].se_module
    nn.init.zeros_(se.fc2.weight)
    nn.init.zeros_(se.fc2.bias)
    x = torch.randn(2, 8, 5, 5)
    torch.testing.assert_close(se(x), 0.5 * x)
    nn.init.normal_(se.fc2.weight)
    nn.init.constant_(se.fc1.bias, 5.0)  # the hidden unit on (after the ReLU) whatever the input
    gate = torch.sigmoid(se.fc2(F.relu(se.fc1(x.mean((2, 3), keepdim=True)))))
    torch.testing.assert_close(se(x), x * gate)
    assert not torch.allclose(se(x), 0.5 * x)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(depth=34), r"SENet: depth=34 is not supported; accepted: \[50, 101, 152\]"),
        (dict(groups=0), r"SENet: groups=0 must be a positive int"),
        (dict(group_width=3), r"SENet: group_width=3 must be even"),
        (dict(stem_channels=(64, 128)), r"SENet: stem_channels=\(64, 128\) must be 3 positive ints"),
        (dict(dcn_stages=[True]), r"SENet: dcn_stages=\[True\] must be 4 booleans"),
        (dict(frozen_stages=7), r"SENet: frozen_stages=7 is invalid"),
        (dict(out_indices=(2, 1)), r"SENet: out_indices=\[2, 1\] is invalid"),
    ],
)
def test_senet_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        SENet(**kwargs)
