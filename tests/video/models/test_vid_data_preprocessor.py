"""ActionDataPreprocessor: clip stacking (NCHW / NCTHW), BGR->RGB + normalisation as the image tasks', feature
padding with a valid-step mask, and clear errors."""

from __future__ import annotations

import pytest
import torch

from video.models import ActionDataPreprocessor
from video.structures import ActionDataSample

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def reference(clip: torch.Tensor, channel_axis: int) -> torch.Tensor:
    """Hand-written normalisation: flip BGR->RGB on ``channel_axis``, subtract mean, divide by std."""
    shape = [1] * clip.dim()
    shape[channel_axis] = 3
    rgb = clip.flip(channel_axis).float()
    return (rgb - torch.tensor(MEAN).view(shape)) / torch.tensor(STD).view(shape)


def test_nchw_stacks_and_normalises():
    pre = ActionDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True, format_shape="NCHW")
    clips = [torch.randint(0, 256, (6, 3, 8, 10), dtype=torch.uint8) for _ in range(2)]
    out = pre(dict(inputs=clips, data_samples=None))["inputs"]
    assert out.shape == (2, 6, 3, 8, 10) and out.dtype == torch.float32
    torch.testing.assert_close(out[1], reference(clips[1], 1))


def test_ncthw_stacks_and_normalises():
    pre = ActionDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True, format_shape="NCTHW")
    clips = [torch.randint(0, 256, (2, 3, 4, 8, 10), dtype=torch.uint8) for _ in range(3)]
    out = pre(dict(inputs=clips))["inputs"]
    assert out.shape == (3, 2, 3, 4, 8, 10)
    torch.testing.assert_close(out[2], reference(clips[2], 1))


def test_clip_errors():
    pre = ActionDataPreprocessor(format_shape="NCTHW")
    with pytest.raises(ValueError, match="expects \\[V, 3, T, H, W\\]"):
        pre(dict(inputs=[torch.zeros(4, 3, 8, 8, dtype=torch.uint8)]))
    with pytest.raises(ValueError, match="differ in shape"):
        pre(dict(inputs=[torch.zeros(1, 3, 4, 8, 8), torch.zeros(1, 3, 4, 8, 9)]))
    with pytest.raises(ValueError, match="format_shape='NCTWH'"):
        ActionDataPreprocessor(format_shape="NCTWH")


def test_features_are_padded_with_mask():
    pre = ActionDataPreprocessor()
    rgb = [torch.randn(5, 4), torch.randn(3, 4)]
    audio = [torch.randn(5, 2), torch.randn(3, 2)]
    samples = [ActionDataSample(metainfo=dict(num_frames=4)), ActionDataSample(metainfo=dict(num_frames=3))]
    out = pre(dict(inputs=dict(rgb=rgb, audio=audio), data_samples=samples))["inputs"]
    assert out["rgb"].shape == (2, 5, 4) and out["audio"].shape == (2, 5, 2)
    torch.testing.assert_close(out["rgb"][1, :3], rgb[1])
    assert (out["rgb"][1, 3:] == 0).all()
    assert out["mask"].tolist() == [[True] * 4 + [False], [True] * 3 + [False] * 2]


def test_stacked_batch_is_accepted_and_checked():
    pre = ActionDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True)
    stacked = torch.randint(0, 256, (2, 4, 3, 8, 8), dtype=torch.uint8)
    out = pre(dict(inputs=stacked))["inputs"]
    torch.testing.assert_close(out[0], reference(stacked[0], 1))
    with pytest.raises(ValueError, match="needs a stacked batch \\[B, V\\*T, 3, H, W\\]"):
        pre(dict(inputs=torch.zeros(2, 4, 8, 8, 3)))
