"""DetDataPreprocessor (normalise + pad vs hand computation, metainfo, batch augments in training only) and
BatchRandomResize (boxes scaled exactly, sizes from the allowed set, interval honoured, state checkpointed)."""

from __future__ import annotations

import pytest
import torch
from mmengine.structures import InstanceData

from detection.models.batch_augments import BatchRandomResize
from detection.models.data_preprocessor import DetDataPreprocessor
from detection.registry import MODELS
from detection.structures import DetDataSample

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def make_batch(shapes=((40, 56), (64, 30)), seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    inputs, samples = [], []
    for i, (h, w) in enumerate(shapes):
        inputs.append(torch.randint(0, 256, (3, h, w), generator=gen, dtype=torch.uint8))
        sample = DetDataSample(
            metainfo=dict(img_shape=(h, w), ori_shape=(2 * h, 2 * w), scale_factor=(0.5, 0.5), img_id=i)
        )
        sample.gt_instances = InstanceData(
            bboxes=torch.tensor([[2.0, 4, 20, 30], [10, 1, 25, 39]]), labels=torch.tensor([1, 0])
        )
        sample.ignored_instances = InstanceData(bboxes=torch.tensor([[0.0, 0, 8, 8]]), labels=torch.tensor([2]))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def test_normalise_and_pad_match_hand_computation():
    pre = MODELS.build(
        dict(type="DetDataPreprocessor", mean=MEAN, std=STD, bgr_to_rgb=True, pad_size_divisor=32, pad_value=7)
    )
    batch = make_batch()
    out = pre(batch, training=False)
    x = out["inputs"]
    assert x.shape == (2, 3, 64, 64) and x.dtype == torch.float32
    for i, img in enumerate(batch["inputs"]):
        h, w = img.shape[-2:]
        expected = (img.flip(0).float() - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
        torch.testing.assert_close(x[i, :, :h, :w], expected)
        assert torch.all(x[i, :, h:] == 7) and torch.all(x[i, :, :, w:] == 7)
        s = out["data_samples"][i]
        assert s.batch_input_shape == (64, 64) and s.pad_shape == (64, 64) and s.img_shape == (h, w)
    # boxes untouched by bottom/right padding
    assert torch.equal(out["data_samples"][0].gt_instances.bboxes, make_batch()["data_samples"][0].gt_instances.bboxes)


def test_same_shapes_are_stacked_and_equal_the_mixed_path():
    batch = make_batch(shapes=((33, 50), (33, 50)))
    pre = DetDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True, pad_size_divisor=16, pad_value=0)
    stacked = pre(batch)["inputs"]
    assert stacked.shape == (2, 3, 48, 64)
    for i in range(2):  # one image at a time takes the same path; compare with a hand computation
        img = batch["inputs"][i]
        expected = torch.zeros(3, 48, 64)
        expected[:, :33, :50] = (img.flip(0).float() - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(
            3, 1, 1
        )
        torch.testing.assert_close(stacked[i], expected)
    # a stacked uint8 tensor input without samples
    out = DetDataPreprocessor(pad_size_divisor=32)(dict(inputs=torch.stack(batch["inputs"])))
    assert out["inputs"].shape == (2, 3, 64, 64) and out["data_samples"] is None


def test_batch_augments_run_in_training_only():
    pre = DetDataPreprocessor(
        mean=MEAN, std=STD, pad_size_divisor=32, batch_augments=[dict(type="BatchRandomResize", sizes=[96])]
    )
    out = pre(make_batch(), training=False)
    assert out["inputs"].shape[-2:] == (64, 64)
    out = pre(make_batch(), training=True)
    assert out["inputs"].shape[-2:] == (96, 96)
    s = out["data_samples"][0]
    assert s.batch_input_shape == (96, 96) and s.pad_shape == (96, 96)
    assert s.img_shape == (60, 84) and s.scale_factor == (0.75, 0.75)
    torch.testing.assert_close(s.gt_instances.bboxes, torch.tensor([[2.0, 4, 20, 30], [10, 1, 25, 39]]) * 1.5)
    torch.testing.assert_close(s.ignored_instances.bboxes, torch.tensor([[0.0, 0, 12, 12]]))
    assert "batch_augments.0.state" in pre.state_dict()
    with pytest.raises(TypeError, match="batch_augments\\[0\\]"):
        DetDataPreprocessor(batch_augments=[lambda x, y: (x, y)])


def test_errors_are_clear():
    with pytest.raises(ValueError, match="DetDataPreprocessor: give both mean and std"):
        DetDataPreprocessor(mean=MEAN)
    with pytest.raises(ValueError, match=r"image 0 has shape \(40, 56, 3\)"):
        DetDataPreprocessor(mean=MEAN, std=STD)(dict(inputs=[torch.zeros(40, 56, 3)]))
    with pytest.raises(ValueError, match="2 images but 1 data samples"):
        DetDataPreprocessor()(dict(inputs=make_batch()["inputs"], data_samples=[DetDataSample()]))


def test_batch_random_resize_boxes_exact_and_sizes_allowed():
    torch.manual_seed(0)
    aug = BatchRandomResize(size_range=(64, 160), size_divisor=32)
    assert aug.sizes == (64, 96, 128, 160)
    seen = set()
    for _ in range(20):
        batch = make_batch(shapes=((64, 64), (64, 64)))
        inputs = torch.rand(2, 3, 64, 64)
        out, samples = aug(inputs, batch["data_samples"])
        size = out.shape[-1]
        assert out.shape == (2, 3, size, size) and size in aug.sizes
        seen.add(size)
        r = size / 64
        torch.testing.assert_close(
            samples[1].gt_instances.bboxes, torch.tensor([[2.0, 4, 20, 30], [10, 1, 25, 39]]) * r
        )
        assert samples[1].img_shape == (size, size) and samples[1].batch_input_shape == (size, size)
    assert seen == set(aug.sizes)
    # a constant image stays constant: the resize is bilinear on the whole batch
    out, _ = aug(torch.full((1, 3, 64, 64), 3.0), None)
    assert torch.allclose(out, torch.tensor(3.0))


def test_batch_random_resize_interval_and_resume():
    torch.manual_seed(1)
    aug = BatchRandomResize(sizes=[32, 64, 96, 128, 160], interval=3)
    sizes = [aug(torch.rand(1, 3, 32, 32), None)[0].shape[-1] for _ in range(12)]
    for k in range(0, 12, 3):
        assert len(set(sizes[k : k + 3])) == 1
    assert len(set(sizes)) > 1
    # resume after 4 batches: state (batch count, size) and torch's RNG restored -> the same sizes follow
    torch.manual_seed(1)
    first = BatchRandomResize(sizes=[32, 64, 96, 128, 160], interval=3)
    for _ in range(4):
        first(torch.rand(1, 3, 32, 32), None)
    rng, state = torch.get_rng_state(), first.state_dict()
    resumed = BatchRandomResize(sizes=[32, 64, 96, 128, 160], interval=3)
    resumed.load_state_dict(state)
    torch.set_rng_state(rng)
    assert [resumed(torch.rand(1, 3, 32, 32), None)[0].shape[-1] for _ in range(8)] == sizes[4:]


def test_batch_random_resize_keep_ratio_and_errors():
    aug = BatchRandomResize(sizes=[128], keep_ratio=True, size_divisor=32)
    batch = make_batch(shapes=((64, 96), (64, 96)))
    out, samples = aug(torch.rand(2, 3, 64, 96), batch["data_samples"])
    assert out.shape[-2:] == (96, 128)  # long side 128, short side 85.3 -> 96 (multiple of 32)
    torch.testing.assert_close(
        samples[0].gt_instances.bboxes,
        torch.tensor([[2.0, 4, 20, 30], [10, 1, 25, 39]]) * torch.tensor([4 / 3, 1.5] * 2),
    )
    with pytest.raises(Exception, match="multiples of size_divisor"):
        BatchRandomResize(sizes=[100])
    with pytest.raises(Exception, match="interval"):
        BatchRandomResize(interval=0)
