"""ResNet backbone: parity with torchvision, shapes, dilation, v1c and vd variants, freezing, errors."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

import oars.models.utils as model_utils
from oars.engine.checkpoint import CheckpointError
from oars.models import ResNet, load_pretrained
from oars.registry import MODELS


def tv_stages(tv: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    x = tv.maxpool(tv.relu(tv.bn1(tv.conv1(x))))
    outs = []
    for name in ("layer1", "layer2", "layer3", "layer4"):
        x = getattr(tv, name)(x)
        outs.append(x)
    return outs


def assert_close(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() <= 1e-5


@pytest.mark.parametrize("depth,output_stride", [(18, None), (50, None), (50, 8)])
def test_torchvision_parity(depth, output_stride, randomize, image, tmp_path, pretrained):
    torch.manual_seed(0)
    dilation = [False, True, True] if output_stride == 8 else None
    tv = randomize(getattr(torchvision.models, f"resnet{depth}")(replace_stride_with_dilation=dilation))
    with torch.no_grad():
        ref = tv_stages(tv, image)

    ours = ResNet(depth, output_stride=output_stride)
    result = ours.load_state_dict(tv.state_dict(), strict=False)
    assert result.missing_keys == []
    assert sorted(result.unexpected_keys) == ["fc.bias", "fc.weight"]
    with torch.no_grad():
        assert_close(ours.eval()(image), ref)

    path = tmp_path / "tv.pth"
    torch.save(tv.state_dict(), path)
    from_file = pretrained(ResNet(depth, output_stride=output_stride, init=dict(checkpoint=str(path)))).eval()
    with torch.no_grad():
        assert_close(from_file(image), ref)
    assert from_file.out_strides == ([4, 8, 8, 8] if output_stride == 8 else [4, 8, 16, 32])


def test_dilation_matches_torchvision_layout():
    tv = torchvision.models.resnet50(replace_stride_with_dilation=[False, True, True])
    ours = ResNet(50, output_stride=8)
    tv_convs = {n: (m.stride, m.dilation, m.padding) for n, m in tv.named_modules() if isinstance(m, nn.Conv2d)}
    our_convs = {n: (m.stride, m.dilation, m.padding) for n, m in ours.named_modules() if isinstance(m, nn.Conv2d)}
    assert our_convs == tv_convs
    assert ours.layer3[0].conv2.dilation == (1, 1) and ours.layer3[1].conv2.dilation == (2, 2)
    assert ours.layer4[0].conv2.dilation == (2, 2) and ours.layer4[1].conv2.dilation == (4, 4)


@pytest.mark.parametrize(
    "output_stride,sizes,strides",
    [(None, [16, 8, 4, 2], [4, 8, 16, 32]), (32, [16, 8, 4, 2], [4, 8, 16, 32]),
     (16, [16, 8, 4, 4], [4, 8, 16, 16]), (8, [16, 8, 8, 8], [4, 8, 8, 8])],
)
def test_output_stride_shapes(output_stride, sizes, strides, image):
    model = ResNet(18, base_channels=16, output_stride=output_stride).eval()
    outs = model(image)
    assert [o.shape[-1] for o in outs] == sizes
    assert model.out_strides == strides
    assert [o.shape[1] for o in outs] == model.out_channels == [16, 32, 64, 128]


def test_out_indices_and_unbuilt_stages(image, tmp_path):
    model = ResNet(50, base_channels=16, out_indices=(1, 3)).eval()
    outs = model(image)
    assert [o.shape[1] for o in outs] == model.out_channels == [128, 512]
    assert model.out_strides == [8, 32]

    short = ResNet(18, out_indices=(0, 1))
    assert not hasattr(short, "layer3") and not hasattr(short, "layer4")
    assert len(short(image)) == 2
    path = tmp_path / "r18.pth"
    torch.save({"state_dict": torchvision.models.resnet18().state_dict()}, path)
    report = load_pretrained(short, dict(checkpoint=str(path)), skip_prefixes=["fc.", "layer3.", "layer4."])
    assert report == ([], [], [])


def test_registry_build_and_config_override():
    model = MODELS.build(dict(type="ResNet", depth=18, base_channels=8, out_indices=[3]))
    assert isinstance(model, ResNet) and model.out_channels == [64]


def test_vd_variant(image, tmp_path, pretrained):
    model = ResNet(50, base_channels=16, variant="vd").eval()
    names = dict(model.named_modules())
    assert "conv1" not in names and "bn1" not in names
    assert [model.stem[i].out_channels for i in (0, 3, 6)] == [8, 8, 16]
    assert [model.stem[i].stride for i in (0, 3, 6)] == [(2, 2), (1, 1), (1, 1)]
    down = model.layer2[0].downsample
    assert isinstance(down[0], nn.AvgPool2d) and down[0].kernel_size == 2 and down[0].ceil_mode
    assert not down[0].count_include_pad
    assert down[1].kernel_size == (1, 1) and down[1].stride == (1, 1)
    assert isinstance(down[2], nn.BatchNorm2d)
    outs = model(image)
    assert [tuple(o.shape[1:]) for o in outs] == [(64, 16, 16), (128, 8, 8), (256, 4, 4), (512, 2, 2)]
    # odd sizes: ceil_mode keeps the shortcut the same size as the strided 3x3 path
    assert [o.shape[-1] for o in model(torch.randn(1, 3, 50, 50))] == [13, 7, 4, 2]

    dilated = ResNet(50, base_channels=16, variant="vd", output_stride=8).eval()
    assert [o.shape[-1] for o in dilated(image)] == [16, 8, 8, 8]
    assert dilated.layer3[0].downsample[0].kernel_size == 1

    # mmseg-style checkpoint: keys under "backbone."
    path = tmp_path / "vd.pth"
    torch.save({"state_dict": {f"backbone.{k}": v for k, v in model.state_dict().items()}}, path)
    init = dict(checkpoint=str(path), prefix="backbone")
    loaded = pretrained(ResNet(50, base_channels=16, variant="vd", init=init)).eval()
    with torch.no_grad():
        assert_close(loaded(image), outs)


def test_v1c_variant(randomize, image):
    """ResNetV1c = torchvision's stages behind the vd deep stem: mmseg's ``resnet50_v1c`` state-dict names and
    shapes (torchvision's minus ``conv1``/``bn1``/``fc``, plus ``stem.{0,1,3,4,6,7}``), torchvision's own stages
    computing the same features from our stem's output, and the plain strided-conv shortcut."""
    with torch.device("meta"):  # names and shapes only
        r50, tv50 = ResNet(50, variant="c"), torchvision.models.resnet50()
    assert r50.variant == "c"
    stem = {"stem.0.weight": (32, 3, 3, 3), "stem.3.weight": (32, 32, 3, 3), "stem.6.weight": (64, 32, 3, 3)}
    stem |= {f"stem.{i}.{k}": (c,) for i, c in ((1, 32), (4, 32), (7, 64)) for k in ("weight", "bias",
                                                                                        "running_mean", "running_var")}
    stem |= {f"stem.{i}.num_batches_tracked": () for i in (1, 4, 7)}
    tv_shapes = {k: tuple(v.shape) for k, v in tv50.state_dict().items() if not k.startswith(("conv1.", "bn1.", "fc."))}
    assert {k: tuple(v.shape) for k, v in r50.state_dict().items()} == tv_shapes | stem
    assert [type(m).__name__ for m in r50.stem] == ["Conv2d", "BatchNorm2d", "ReLU"] * 3
    for layer in (r50.layer2, r50.layer3, r50.layer4):
        shortcut = layer[0].downsample
        assert [type(m).__name__ for m in shortcut] == ["Conv2d", "BatchNorm2d"] and shortcut[0].stride == (2, 2)

    torch.manual_seed(0)
    tv = randomize(torchvision.models.resnet18())
    ours = randomize(ResNet(18, variant="c"), seed=1)
    result = ours.load_state_dict(tv.state_dict(), strict=False)
    # (BN fills a missing num_batches_tracked itself, so it is not reported)
    assert set(result.missing_keys) == {k for k in stem if not k.endswith("num_batches_tracked")}
    assert set(result.unexpected_keys) == {k for k in tv.state_dict() if k.startswith(("conv1.", "bn1.", "fc."))}
    with torch.no_grad():
        x = ours.maxpool(ours.stem(image))
        ref = []
        for name in ("layer1", "layer2", "layer3", "layer4"):
            x = getattr(tv, name)(x)
            ref.append(x)
        assert_close(ours(image), ref)
    # odd sizes: the strided 1x1 shortcut and the strided 3x3 both give ceil(n / 2)
    assert [o.shape[-1] for o in ours(torch.randn(1, 3, 50, 50))] == [13, 7, 4, 2]

    dilated = ResNet(18, base_channels=8, variant="c", output_stride=8, frozen_stages=0).train()
    assert dilated.layer3[0].downsample[0].stride == (1, 1) and dilated.layer3[1].conv1.dilation == (2, 2)
    assert all(not p.requires_grad for p in dilated.stem.parameters()) and not dilated.stem.training


@pytest.mark.parametrize("depth,blocks", [(34, [3, 4, 6, 3]), (101, [3, 4, 23, 3])])
def test_depths_run(depth, blocks):
    model = ResNet(depth, base_channels=8).eval()
    assert [len(getattr(model, f"layer{i}")) for i in range(1, 5)] == blocks
    outs = model(torch.randn(1, 3, 32, 32))
    assert [o.shape[-1] for o in outs] == [8, 4, 2, 1]


@pytest.mark.parametrize("depth", [101, 152])
def test_parameter_count_matches_torchvision(depth):
    tv = getattr(torchvision.models, f"resnet{depth}")()
    expected = sum(p.numel() for n, p in tv.named_parameters() if not n.startswith("fc."))
    ours = ResNet(depth)
    assert sum(p.numel() for p in ours.parameters()) == expected
    assert set(ours.state_dict()) == {k for k in tv.state_dict() if not k.startswith("fc.")}


def test_frozen_stages(image):
    model = ResNet(18, base_channels=8, frozen_stages=1)
    model.train()
    for mod in (model.conv1, model.bn1, model.layer1):
        assert all(not p.requires_grad for p in mod.parameters())
        assert all(not m.training for m in mod.modules())
    assert all(p.requires_grad for p in model.layer2.parameters())
    assert model.layer2.training and model.layer2[0].bn1.training
    before = model.layer1[0].bn1.running_mean.clone()
    model(image)
    assert torch.equal(model.layer1[0].bn1.running_mean, before)
    assert not torch.equal(model.layer2[0].bn1.running_mean, torch.zeros_like(before[:16]))

    stem_only = ResNet(18, base_channels=8, variant="vd", frozen_stages=0).train()
    assert all(not p.requires_grad for p in stem_only.stem.parameters())
    assert all(p.requires_grad for p in stem_only.layer1.parameters())
    assert not stem_only.stem.training and stem_only.layer1.training


def test_norm_eval(image):
    model = ResNet(18, base_channels=8, norm_eval=True).train()
    assert model.training
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and all(not m.training for m in bns)
    model(image)
    assert all(torch.equal(m.running_mean, torch.zeros_like(m.running_mean)) for m in bns)
    assert all(p.requires_grad for p in model.parameters())


def test_zero_init_residual():
    model = ResNet(50, base_channels=8, zero_init_residual=True)
    assert all(torch.all(b.bn3.weight == 0) for layer in (model.layer1, model.layer4) for b in layer)
    assert torch.all(model.bn1.weight == 1)
    basic = ResNet(18, base_channels=8, zero_init_residual=True)
    assert torch.all(basic.layer2[1].bn2.weight == 0) and torch.all(basic.layer2[1].bn1.weight == 1)


@pytest.mark.parametrize(
    "norm", ["BN", "SyncBN", "FrozenBN", {"type": "GN", "num_groups": 4}, {"type": "BN", "momentum": 0.01}]
)
@pytest.mark.parametrize("variant", ["b", "vd"])
def test_norm_types_run(norm, variant):
    model = ResNet(18, base_channels=8, norm=norm, variant=variant)
    x = torch.randn(2, 3, 32, 32)
    for mode in (True, False):
        outs = model.train(mode)(x)
        assert [tuple(o.shape) for o in outs] == [(2, 8, 8, 8), (2, 16, 4, 4), (2, 32, 2, 2), (2, 64, 1, 1)]
        assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (dict(depth=20), r"depth=20 .*18, 34, 50, 101, 152"),
        (dict(depth=18, output_stride=4), r"output_stride=4 .*None, 8, 16, 32"),
        (dict(depth=18, out_indices=(3, 1)), r"out_indices=\[3, 1\].*\[0, 1, 2, 3\]"),
        (dict(depth=18, out_indices=(4,)), r"out_indices=\[4\]"),
        (dict(depth=18, out_indices=()), r"out_indices=\[\]"),
        (dict(depth=18, variant="d"), r"variant='d'.*'b', 'c', 'vd'"),
        (dict(depth=18, strides=(1, 2, 2)), r"strides=\[1, 2, 2\]"),
        (dict(depth=18, frozen_stages=5), r"frozen_stages=5"),
        (dict(depth=18, norm="XN"), r"'XN'.*BN"),
        (dict(depth=18, init=dict(path="x.pth")), r"init has unknown keys \['path'\]"),
        (dict(depth=18, init=dict(strict=True)), r"init needs a 'checkpoint'"),
    ],
)
def test_invalid_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        ResNet(**kwargs)


def test_checkpoint_problems(tmp_path, monkeypatch):
    logged = []
    monkeypatch.setattr(model_utils, "print_log", lambda msg, **kw: logged.append((msg, kw)))
    state = ResNet(18, base_channels=8).state_dict()
    state["layer1.0.conv1.weight"] = torch.zeros(3, 3, 3, 3)
    state["extra.weight"] = torch.zeros(1)
    del state["layer4.1.bn2.bias"]
    path = tmp_path / "bad.pth"
    torch.save(state, path)

    model = ResNet(18, base_channels=8, init=dict(checkpoint=str(path)))
    assert logged == []  # nothing is read when the model is built
    model.init_weights()
    assert len(logged) == 1
    msg = logged[0][0]
    assert str(path) in msg and "layer4.1.bn2.bias" in msg and "extra.weight" in msg
    assert "layer1.0.conv1.weight: (3, 3, 3, 3) vs (8, 8, 3, 3)" in msg
    assert torch.equal(model.layer2[0].conv1.weight, state["layer2.0.conv1.weight"])

    with pytest.raises(CheckpointError, match="layer4.1.bn2.bias"):
        ResNet(18, base_channels=8, init=dict(checkpoint=str(path), strict=True)).init_weights()
    missing = ResNet(18, init=dict(checkpoint=str(tmp_path / "missing.pth")))  # builds: eval needs no file
    with pytest.raises(CheckpointError, match=r"ResNet pretrained weights \(init.checkpoint\): .*not found: .*missing"):
        missing.init_weights()

    nested = tmp_path / "nested.pth"
    fresh = ResNet(18, base_channels=8).state_dict()
    torch.save({"state_dict": {f"model.backbone.{k}": v for k, v in fresh.items()}}, nested)
    with pytest.raises(CheckpointError, match="prefix: 'model.backbone'"):
        ResNet(18, base_channels=8, init=dict(checkpoint=str(nested))).init_weights()


def test_frozen_bn_loads_torchvision_weights_quietly(randomize, image, tmp_path, monkeypatch, pretrained):
    logged = []
    monkeypatch.setattr(model_utils, "print_log", lambda msg, **kw: logged.append(msg))
    tv = randomize(torchvision.models.resnet18())
    path = tmp_path / "r18.pth"
    torch.save(tv.state_dict(), path)  # holds num_batches_tracked, which FrozenBN lacks
    model = pretrained(ResNet(18, norm="FrozenBN", frozen_stages=1, init=dict(checkpoint=str(path)))).train()
    assert logged == []
    with torch.no_grad():
        for a, b in zip(model(image), tv_stages(tv, image)):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-4)
