"""Non-local block: shape, identity at initialisation, the embedded-Gaussian formula against a hand-written einsum,
attention across the frames of one clip but never across clips; ResNetNL's placement and torchvision names."""

from __future__ import annotations

import pytest
import torch
import torchvision

from video.models import NonLocalBlock, ResNetNL


def test_shape_and_identity_at_init():
    block = NonLocalBlock(16, num_segments=4).eval()
    x = torch.randn(8, 16, 6, 6)
    out = block(x)
    assert out.shape == x.shape
    torch.testing.assert_close(out, x)  # the output norm's weight starts at 0: z = x + 0


@pytest.mark.parametrize("sub_sample", [False, True])
def test_matches_embedded_gaussian_formula(sub_sample):
    torch.manual_seed(0)
    block = NonLocalBlock(8, num_segments=3, sub_sample=sub_sample).eval()
    torch.nn.init.normal_(block.out_norm.weight)
    x = torch.randn(6, 8, 4, 4)  # 2 clips of 3 frames
    n, t = 2, 3

    def tokens(f):  # [N*T, C', h, w] -> [N, T*h*w, C']
        return f.reshape(n, t, f.shape[1], -1).permute(0, 1, 3, 2).reshape(n, -1, f.shape[1])

    theta, phi, g = tokens(block.theta(x)), tokens(block.pool(block.phi(x))), tokens(block.pool(block.g(x)))
    attn = torch.softmax(torch.einsum("nic,njc->nij", theta, phi), dim=-1)
    y = torch.einsum("nij,njc->nic", attn, g).reshape(n, t, 4, 4, -1).permute(0, 1, 4, 2, 3).reshape(6, -1, 4, 4)
    expected = x + block.out_norm(block.out_conv(y))
    torch.testing.assert_close(block(x), expected, atol=1e-5, rtol=1e-5)


def test_attends_within_a_clip_only():
    torch.manual_seed(0)
    block = NonLocalBlock(8, num_segments=2, sub_sample=False).eval()
    torch.nn.init.ones_(block.out_norm.weight)
    x = torch.randn(4, 8, 3, 3)  # clip 0 = frames 0, 1; clip 1 = frames 2, 3
    y = x.clone()
    y[0] += 1.0  # change frame 0 of clip 0
    a, b = block(x), block(y)
    assert not torch.allclose(a[1], b[1])  # frame 1 of the same clip sees it
    torch.testing.assert_close(a[2:], b[2:])  # the other clip does not


def test_resnet_nl_placement_and_names():
    model = ResNetNL(depth=50, num_segments=4)
    assert sorted(model.non_local_blocks) == ["layer2_1", "layer2_3", "layer3_1", "layer3_3", "layer3_5"]
    tv_keys = {k for k in torchvision.models.resnet50().state_dict() if not k.startswith("fc.")}
    own = set(model.state_dict())
    assert tv_keys <= own and all(k.startswith("non_local_blocks.") for k in own - tv_keys)


def test_resnet_nl_forward_and_bad_mask():
    model = ResNetNL(depth=18, base_channels=8, num_segments=2, non_local=[[0, 0], [1, 1], [0, 1], [0, 0]]).eval()
    assert len(model.non_local_blocks) == 3
    out = model(torch.randn(4, 3, 32, 32))[0]
    assert out.shape == (4, 64, 1, 1)
    with pytest.raises(ValueError, match="one 0/1 flag per block"):
        ResNetNL(depth=18, num_segments=2, non_local=[[0, 0, 0], [0, 1, 0, 1], [0, 1], [0, 0]])


@pytest.mark.slow  # a dynamo ONNX export: several seconds on 2 shared cores
def test_block_export_matches_eager(tmp_path):
    import onnxruntime as ort

    torch.manual_seed(0)
    block = NonLocalBlock(16, num_segments=4).eval()
    torch.nn.init.normal_(block.out_norm.weight)
    x = torch.randn(8, 16, 6, 6)
    path = tmp_path / "nl.onnx"
    torch.onnx.export(block, (x,), str(path), dynamo=True, input_names=["x"])
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(got), block(x), atol=1e-5, rtol=1e-5)
