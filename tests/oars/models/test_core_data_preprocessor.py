"""ImageDataPreprocessor (the core of Seg/Det preprocessors): vectorised normalise + pad vs a per-image
hand computation, for equal and mixed image sizes, and input checks."""

from __future__ import annotations

import pytest
import torch
from mmengine.structures import BaseDataElement

from oars.models.data_preprocessor import ImageDataPreprocessor
from oars.registry import MODELS

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def reference(images, mean, std, bgr_to_rgb, pad_val, shape):
    out = torch.full((len(images), images[0].shape[0], *shape), float(pad_val))
    for i, img in enumerate(images):
        x = img.flip(0).float() if bgr_to_rgb else img.float()
        if mean is not None:
            x = (x - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1)
        out[i, :, : x.shape[1], : x.shape[2]] = x
    return out


@pytest.mark.parametrize("shapes", [[(20, 24), (20, 24), (20, 24)], [(20, 24), (13, 30), (7, 5)]])
@pytest.mark.parametrize("mean,std,bgr", [(MEAN, STD, True), (None, None, False), ([100.0], [50.0], False)])
def test_matches_per_image_reference(shapes, mean, std, bgr):
    gen = torch.Generator().manual_seed(0)
    images = [torch.randint(0, 256, (3, h, w), generator=gen, dtype=torch.uint8) for h, w in shapes]
    samples = [BaseDataElement() for _ in images]
    pre = MODELS.build(dict(type="ImageDataPreprocessor", mean=mean, std=std, bgr_to_rgb=bgr, size_divisor=8,
                            pad_val=-1.5))
    out = pre(dict(inputs=images, data_samples=samples))
    shape = pre.target_shape(shapes)
    assert out["inputs"].shape == (3, 3, *shape) and shape[0] % 8 == 0 and shape[1] % 8 == 0
    torch.testing.assert_close(out["inputs"], reference(images, mean, std, bgr, -1.5, shape))
    for s, hw in zip(out["data_samples"], shapes):
        assert s.batch_input_shape == shape and s.pad_shape == shape and s.img_shape == hw and s.ori_shape == hw


def test_size_and_stacked_input():
    pre = ImageDataPreprocessor(size=(32, 40))
    out = pre(dict(inputs=torch.ones(2, 3, 30, 20, dtype=torch.uint8)))
    assert out["inputs"].shape == (2, 3, 32, 40) and out["inputs"][:, :, :30, :20].eq(1).all()
    assert out["inputs"][:, :, 30:].eq(0).all() and out["data_samples"] is None


def test_input_errors():
    with pytest.raises(TypeError, match="expects a dict with an 'inputs' key"):
        ImageDataPreprocessor()([torch.zeros(3, 4, 4)])
    with pytest.raises(ValueError, match="non-empty list"):
        ImageDataPreprocessor()(dict(inputs=[]))
    with pytest.raises(ValueError, match=r"stacked input must be \[B, C, H, W\]"):
        ImageDataPreprocessor()(dict(inputs=torch.zeros(3, 4, 4)))
    with pytest.raises(ValueError, match=r"image 0 has shape \(1, 4, 4\)"):
        ImageDataPreprocessor(bgr_to_rgb=True)(dict(inputs=[torch.zeros(1, 4, 4)]))
    with pytest.raises(ValueError, match="std values must be > 0"):
        ImageDataPreprocessor(mean=[0, 0, 0], std=[1, 0, 1])
