"""Temporal shift against a hand-computed tensor; ResNetTSM keeps torchvision names and loads a resnet state dict;
the shift has no in-place writes, so the exported graph equals eager mode."""

from __future__ import annotations

import pytest
import torch
import torchvision

from video.models import ResNetTSM
from video.models.backbones import ShiftConv2d, temporal_shift


def test_shift_matches_hand_computed():
    # 1 clip, T=3 frames, C=4 channels, 1x1 pixels; shift_div=4 -> fold=1: channel 0 from t+1, channel 1 from t-1
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4, 1, 1)  # frame t, channel c -> 4t + c
    expected = torch.tensor([
        [4.0, 0.0, 2.0, 3.0],    # t=0: ch0 <- t1 (4), ch1 <- zero (no t-1)
        [8.0, 1.0, 6.0, 7.0],    # t=1: ch0 <- t2 (8), ch1 <- t0 (1)
        [0.0, 5.0, 10.0, 11.0],  # t=2: ch0 <- zero (no t+1), ch1 <- t1 (5)
    ]).reshape(3, 4, 1, 1)
    torch.testing.assert_close(temporal_shift(x, num_segments=3, shift_div=4), expected)


def test_shift_keeps_clips_apart():
    x = torch.randn(2 * 4, 16, 2, 2)
    out = temporal_shift(x, num_segments=4, shift_div=8)
    # the first frame of clip 1 takes channels 2..3 from t-1: zero, never from clip 0's last frame
    assert (out[4, 2:4] == 0).all()
    torch.testing.assert_close(out[3, 0:2], torch.zeros(2, 2, 2))
    torch.testing.assert_close(out[:, 4:], x[:, 4:])


def test_tsm_has_torchvision_names_and_loads_resnet(tmp_path):
    tv = torchvision.models.resnet18()
    path = tmp_path / "r18.pth"
    torch.save(tv.state_dict(), path)
    model = ResNetTSM(depth=18, num_segments=4, pretrained=str(path))
    assert isinstance(model.layer1[0].conv1, ShiftConv2d)
    assert set(model.state_dict()) == {k for k in tv.state_dict() if not k.startswith("fc.")}
    model.init_weights()
    torch.testing.assert_close(model.layer3[1].conv1.weight, tv.layer3[1].conv1.weight)
    # residual shift: with the shift the output differs from the plain ResNet on the same weights
    model.eval()
    tv.eval()
    x = torch.randn(4, 3, 32, 32)
    plain = tv.layer4(tv.layer3(tv.layer2(tv.layer1(tv.maxpool(tv.relu(tv.bn1(tv.conv1(x))))))))
    out = model(x)[0]
    assert out.shape == plain.shape and not torch.allclose(out, plain)


@pytest.mark.slow  # the dynamo ONNX export alone takes 10-40 s on 2 shared cores
def test_tsm_export_matches_eager(tmp_path):
    import onnxruntime as ort

    model = ResNetTSM(depth=18, base_channels=8, num_segments=4).eval()
    x = torch.randn(8, 3, 32, 32)
    path = tmp_path / "tsm.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=True, input_names=["x"])
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), model(x)[0].detach(), atol=1e-4, rtol=1e-4)
