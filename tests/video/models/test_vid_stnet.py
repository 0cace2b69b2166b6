"""StNet: super-images, temporal blocks (identity start, 3x1x1 formula), the temporal Xception head, Recognizer2D
modes with views, conv1 inflation of a torchvision checkpoint, learning a motion, real size."""

from __future__ import annotations

import pytest
import torch
import torchvision

from oars.engine.checkpoint import CheckpointError
from oars.models.backbones.resnet import ResNet
from video.models.backbones.stnet import StNet, TemporalBlock, inflate_conv1
from video.models.heads.stnet_head import StNetHead
from video.registry import MODELS
from video.structures import ActionDataSample

T, N = 3, 2  # segments per view, frames per segment


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread avoids OpenMP hand-offs that dominate on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_backbone(**over) -> StNet:
    torch.manual_seed(0)
    return StNet(**{**dict(depth=18, num_clips=T, clip_len=N, base_channels=8), **over})


def recognizer(num_classes: int = 4, **head) -> torch.nn.Module:
    torch.manual_seed(0)
    return MODELS.build(dict(
        type="Recognizer2D", num_classes=num_classes,
        backbone=dict(type="StNet", depth=18, num_clips=T, clip_len=N, base_channels=8),
        cls_head=dict(type="StNetHead", mid_channels=16, **head)))


def test_super_images_stack_the_frames_of_a_segment_frame_major():
    net = small_backbone()
    frames = torch.arange(2 * T * N, dtype=torch.float32)[:, None, None, None] * 10 + torch.arange(3.0)[:, None, None]
    frames = frames.expand(-1, 3, 4, 4)  # frame i, channel c holds 10 i + c
    sup = net.super_images(frames)
    assert sup.shape == (2 * T, 3 * N, 4, 4)
    for seg in range(2 * T):
        for f in range(N):
            for c in range(3):
                assert sup[seg, 3 * f + c, 0, 0] == 10 * (seg * N + f) + c
    assert net.super_images(sup) is sup


def test_backbone_output_keeps_segments_as_time():
    net = small_backbone().eval()
    x = torch.randn(2 * T * N, 3, 64, 64)
    with torch.no_grad():
        (out,) = net(x)
        (same,) = net(net.super_images(x))
    assert out.shape == (2, 64, T, 2, 2) and net.out_channels == [64] and net.num_segments == T * N
    assert torch.equal(out, same)
    with pytest.raises(ValueError, match="multiple of num_clips x clip_len"):
        net(torch.randn(T * N + 1, 3, 64, 64))
    with pytest.raises(ValueError, match="neither frames"):
        net(torch.randn(T, 5, 64, 64))


def test_temporal_block_formula_and_identity_start():
    torch.manual_seed(0)
    block = TemporalBlock(4, num_clips=3, zero_init=False).eval()
    with torch.no_grad():
        block.bn.running_mean.uniform_(-1, 1)
        block.bn.running_var.uniform_(0.5, 2)
        block.bn.weight.uniform_(0.5, 1.5)
    x = torch.randn(2 * 3, 4, 2, 2)
    with torch.no_grad():
        got = block(x)
        w, b = block.conv.weight[:, :, :, 0, 0], block.conv.bias  # [O, I, 3]
        xs = x.reshape(2, 3, 4, 2, 2)
        padded = torch.cat([torch.zeros_like(xs[:, :1]), xs, torch.zeros_like(xs[:, :1])], dim=1)
        conv = torch.stack([sum(torch.einsum("oi,nihw->nohw", w[:, :, k], padded[:, t + k]) for k in range(3)) + b[
            None, :, None, None] for t in range(3)], dim=1)
        bn = block.bn
        norm = (conv.relu() - bn.running_mean[:, None, None]) / torch.sqrt(bn.running_var[:, None, None] + bn.eps)
        expected = xs + norm * bn.weight[:, None, None] + bn.bias[:, None, None]
    assert torch.allclose(got, expected.reshape_as(x), atol=1e-5)
    identity = TemporalBlock(4, num_clips=3).train()
    assert torch.equal(identity(x), x)  # zero-initialised norm weight: the block starts as the identity


def test_zero_init_stnet_equals_its_2d_resnet_until_trained():
    """With identity temporal blocks StNet is the 2D ResNet on super-images: segments do not interact."""
    net = small_backbone().eval()
    plain = ResNet(depth=18, in_channels=3 * N, base_channels=8, out_indices=(3,)).eval()
    plain.load_state_dict(net.state_dict(), strict=False)
    x = torch.randn(T * N, 3, 64, 64)
    with torch.no_grad():
        (out,) = net(x)
        ref = plain(net.super_images(x))[0]
        assert torch.allclose(out[0].transpose(0, 1), ref, atol=1e-5)
        coupled = small_backbone(temporal_zero_init=False).eval()
        y = x.clone()
        y[:N] = torch.randn(N, 3, 64, 64)  # change segment 0 only
        (a,), (b,) = coupled(x), coupled(y)
        assert not torch.allclose(a[:, :, 1:], b[:, :, 1:], atol=1e-4)  # other segments see it through time
        (a,), (b,) = net(x), net(y)
        assert torch.equal(a[:, :, 1:], b[:, :, 1:])


def test_head_shapes_and_max_over_time():
    torch.manual_seed(0)
    head = StNetHead(num_classes=5, in_channels=8, mid_channels=6).eval()
    x = torch.randn(3, 8, T, 2, 2)
    with torch.no_grad():
        logits = head(x, num_segs=T * N)
        assert logits.shape == (3, 5)
        assert torch.allclose(head(x.mean(dim=(3, 4))), logits)
        expected = head.fc_cls(head.xception(x.mean(dim=(3, 4))).amax(2))
    assert torch.allclose(logits, expected)
    assert head.xception.dw1.groups == 8 and head.xception.dw2.groups == 6 and head.fc_cls.in_features == 6
    with pytest.raises(ValueError, match="are not \\[N, 8, T"):
        head(torch.randn(3, 7, T))


def test_recognizer_modes_with_views():
    model = recognizer()
    b, v = 2, 2
    inputs = torch.randn(b, v * T * N, 3, 64, 64)
    data = [ActionDataSample().set_gt_label(i) for i in range(b)]
    model.train()
    losses = model(inputs, data, mode="loss")
    assert torch.isfinite(losses["loss_cls"])
    losses["loss_cls"].backward()
    named = dict(model.named_parameters())
    for name, p in named.items():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    # zero-initialised temporal norms: their weights learn first, the 3x1x1 conv gets gradient once they move
    assert named["backbone.temporal2.bn.weight"].grad.abs().sum() > 0
    assert named["cls_head.xception.dw1.weight"].grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        scores = model(inputs, mode="tensor")
        preds = model(inputs, [ActionDataSample() for _ in range(b)], mode="predict")
        per_view = torch.stack([model(inputs[:, i * T * N:(i + 1) * T * N], mode="tensor") for i in range(v)])
    assert scores.shape == (b, 4)
    assert torch.allclose(scores.sum(1), torch.ones(b), atol=1e-5)
    assert torch.allclose(scores, per_view.mean(0), atol=1e-5)  # average_clips 'prob' over the 2 views
    assert torch.allclose(torch.stack([p.pred_score for p in preds]), scores)


def test_learns_direction_of_motion():
    """A bright square moving right or left: one frame cannot tell them apart; 12 steps lower the loss."""
    torch.manual_seed(0)
    model = recognizer(num_classes=2).train()
    b, size = 8, 32
    frames = torch.zeros(b, T * N, 3, size, size)
    labels = torch.arange(b) % 2
    for i in range(b):
        start = int(torch.randint(4, 10, ()))
        for f in range(T * N):
            x = start + 3 * f if labels[i] == 0 else start + 3 * (T * N - 1 - f)
            frames[i, f, :, 12:20, x:x + 6] = 1.0
    data = [ActionDataSample().set_gt_label(int(c)) for c in labels]
    optim = torch.optim.Adam(model.parameters(), lr=3e-3)
    history = []
    for _ in range(12):
        loss = model(frames, data, mode="loss")["loss_cls"]
        optim.zero_grad()
        loss.backward()
        optim.step()
        history.append(float(loss.detach()))
    assert all(torch.isfinite(torch.tensor(history)))
    assert sum(history[-3:]) / 3 < 0.5 * sum(history[:3]) / 3, history


def test_conv1_inflation_from_a_torchvision_checkpoint(tmp_path):
    torch.manual_seed(0)
    tv = torchvision.models.resnet18(weights=None)
    path = tmp_path / "resnet18.pth"
    torch.save(tv.state_dict(), path)
    for mode in ("mean", "repeat"):
        net = StNet(depth=18, num_clips=T, clip_len=N, inflate=mode, pretrained=str(path))
        net.init_weights()
        assert torch.equal(net.conv1.weight, inflate_conv1(tv.conv1.weight, N, mode))
        assert torch.equal(net.layer3[1].conv2.weight, tv.layer3[1].conv2.weight)
        assert net.temporal2.bn.weight.abs().sum() == 0  # not in the file: left at the identity start
    w = tv.conv1.weight.detach()
    repeat, mean = inflate_conv1(w, N, "repeat"), inflate_conv1(w, N, "mean")
    assert repeat.shape == mean.shape == (64, 3 * N, 7, 7)
    frame = torch.randn(1, 3, 16, 16)
    still = frame.repeat(1, N, 1, 1)  # the same frame N times
    conv = torch.nn.functional.conv2d
    assert torch.allclose(conv(still, repeat, padding=3), conv(frame, w, padding=3), atol=1e-5)
    grey = frame.mean(1, keepdim=True).repeat(1, 3, 1, 1)
    assert torch.allclose(conv(still, mean, padding=3), conv(grey, w, padding=3), atol=1e-5)


def test_bad_configs_and_files():
    with pytest.raises(ValueError, match="in_channels is fixed"):
        StNet(depth=18, in_channels=3)
    with pytest.raises(ValueError, match="temporal_stages"):
        StNet(depth=18, temporal_stages=(1, 4))
    with pytest.raises(ValueError, match="inflate='max'"):
        StNet(depth=18, inflate="max")
    with pytest.raises(ValueError, match="not both"):
        StNet(depth=18, pretrained="a.pth", init={"checkpoint": "b.pth"})
    net = StNet(depth=18, pretrained="/nonexistent/resnet.pth")
    with pytest.raises(CheckpointError, match="StNet pretrained weights"):
        net.init_weights()
    with pytest.raises(ValueError, match="differs from the backbone's"):
        MODELS.build(dict(type="Recognizer2D", num_classes=3, num_segments=7,
                          backbone=dict(type="StNet", depth=18, num_clips=T, clip_len=N),
                          cls_head=dict(type="StNetHead")))


def test_real_size_parameter_count():
    """ResNet-50, 7 segments of 5 frames, 400 classes, on the meta device."""
    with torch.device("meta"):
        model = MODELS.build(dict(type="Recognizer2D", num_classes=400, backbone=dict(type="StNet"),
                                  cls_head=dict(type="StNetHead"))).eval()
        total = sum(p.numel() for p in model.parameters())
        backbone = sum(p.numel() for p in model.backbone.parameters())
        print(f"StNet-R50 T=7 N=5, 400 classes: {total / 1e6:.2f} M parameters (backbone {backbone / 1e6:.2f} M)")
        assert abs(total - 33.16e6) < 0.05e6 and abs(backbone - 27.48e6) < 0.05e6
        scores = model(torch.empty(1, 35, 3, 224, 224), mode="tensor")
        (feat,) = model.backbone(torch.empty(35, 3, 224, 224))
    assert scores.shape == (1, 400) and feat.shape == (1, 2048, 7, 7, 7)
