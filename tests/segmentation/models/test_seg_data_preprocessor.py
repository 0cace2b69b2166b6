"""SegDataPreprocessor: BGR->RGB, normalisation, bottom/right padding of images and labels, metainfo."""

from __future__ import annotations

import pytest
import torch
from mmengine.structures import PixelData

from segmentation.models import SegDataPreprocessor
from segmentation.structures import SegDataSample

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def test_normalise_pad_and_labels(batch_factory):
    batch = batch_factory()
    pre = SegDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True, pad_val=0, seg_pad_val=255)
    out = pre(batch, training=True)
    x = out["inputs"]
    assert x.shape == (2, 3, 64, 64) and x.dtype == torch.float32
    img = batch["inputs"][1]  # 56x48, BGR
    rgb = img.flip(0).float()
    expected = (rgb - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
    torch.testing.assert_close(x[1, :, :56, :48], expected)
    assert torch.all(x[1, :, 56:] == 0) and torch.all(x[1, :, :, 48:] == 0)
    gt = out["data_samples"][1].gt_sem_seg.data
    assert gt.shape == (1, 64, 64)
    assert torch.all(gt[:, 56:] == 255) and torch.all(gt[:, :, 48:] == 255)
    sample = out["data_samples"][1]
    assert sample.batch_input_shape == (64, 64) and sample.pad_shape == (64, 64)
    assert sample.img_shape == (56, 48) and sample.ori_shape == (112, 96)


def test_size_and_divisor():
    img = torch.randint(0, 255, (3, 30, 20), dtype=torch.uint8)
    out = SegDataPreprocessor(size=(32, 40), size_divisor=16)(dict(inputs=[img], data_samples=None))
    assert out["inputs"].shape == (1, 3, 32, 48)  # at least size, then rounded up to 16
    torch.testing.assert_close(out["inputs"][0, :, :30, :20], img.float())  # no mean/std: only float
    out = SegDataPreprocessor(size_divisor=32)(dict(inputs=torch.zeros(2, 3, 33, 64, dtype=torch.uint8)))
    assert out["inputs"].shape == (2, 3, 64, 64) and out["data_samples"] is None


def test_predict_only_samples_and_device():
    pre = SegDataPreprocessor(mean=MEAN, std=STD)
    sample = SegDataSample(metainfo=dict(ori_shape=(20, 20)))
    out = pre(dict(inputs=[torch.zeros(3, 16, 12, dtype=torch.uint8)], data_samples=[sample]))
    assert "gt_sem_seg" not in out["data_samples"][0]
    assert out["data_samples"][0].img_shape == (16, 12)
    assert out["inputs"].device == pre.device == torch.device("cpu")


def test_errors():
    with pytest.raises(ValueError, match="give both mean and std"):
        SegDataPreprocessor(mean=MEAN)
    with pytest.raises(ValueError, match=r"image 0 has shape \(16, 12\)"):
        SegDataPreprocessor(mean=MEAN, std=STD)(dict(inputs=[torch.zeros(16, 12)]))
    with pytest.raises(ValueError, match=r"image 0 has shape \(16, 12, 3\)"):
        SegDataPreprocessor(mean=MEAN, std=STD)(dict(inputs=[torch.zeros(16, 12, 3)]))
    with pytest.raises(ValueError, match="2 images but 1 data samples"):
        SegDataPreprocessor()(dict(inputs=[torch.zeros(3, 4, 4)] * 2, data_samples=[SegDataSample()]))


def test_uint8_labels_pad_narrow_and_widen_only_when_needed():
    img = torch.zeros(3, 6, 5, dtype=torch.uint8)
    gt = torch.randint(0, 4, (1, 6, 5), dtype=torch.uint8)
    for pad_val, dtype in [(255, torch.uint8), (-1, torch.long)]:
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(data=gt.clone())
        out = SegDataPreprocessor(size=(8, 8), seg_pad_val=pad_val)(
            dict(inputs=[img], data_samples=[sample]), training=True)
        padded = out["data_samples"][0].gt_sem_seg.data
        assert padded.dtype == dtype and padded.shape == (1, 8, 8)
        assert torch.equal(padded[:, :6, :5].long(), gt.long()) and torch.all(padded[:, 6:] == pad_val)
