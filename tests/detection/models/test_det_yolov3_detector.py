"""YOLOv3 detector on a narrow ResNet-18: loss / predict / tensor modes, rescaling, errors and an overfit check."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.structures import InstanceData
from torchvision.ops import box_iou

from detection.models import SingleStageDetector, YOLOv3
from detection.registry import MODELS
from detection.structures import DetDataSample

NUM_CLASSES = 3
CFG = dict(
    type="YOLOv3",
    num_classes=NUM_CLASSES,
    backbone=dict(type="ResNet", depth=18, base_channels=8, out_indices=(1, 2, 3)),
    neck=dict(type="YOLOv3Neck"),
    bbox_head=dict(
        type="YOLOv3Head",
        anchors=[[8, 8], [12, 16], [16, 12], [20, 24], [24, 20], [28, 32], [32, 40], [40, 32], [48, 48]],
    ),
)


def _sample(boxes, labels, ori=(64, 64), scale=(1.0, 1.0)) -> DetDataSample:
    s = DetDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=ori, scale_factor=scale, batch_input_shape=(64, 64)))
    s.gt_instances = InstanceData(
        bboxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), labels=torch.tensor(labels, dtype=torch.long)
    )
    return s


def _build(**overrides) -> YOLOv3:
    cfg = copy.deepcopy(CFG)
    cfg.update(overrides)
    return MODELS.build(cfg)


def test_build_infers_channels_and_strides():
    model = _build()
    assert isinstance(model, YOLOv3) and isinstance(model, SingleStageDetector)
    assert model.neck.in_channels == [16, 32, 64] and model.neck.out_channels == [32, 16, 8]
    assert model.bbox_head.in_channels == [32, 16, 8] and model.bbox_head.strides == [32, 16, 8]
    assert model.bbox_head.num_classes == NUM_CLASSES


def test_three_modes():
    torch.manual_seed(0)
    model = _build(test_cfg=dict(score_thr=0.0, conf_thr=0.0, max_per_img=20))
    inputs = torch.randn(2, 3, 64, 64)
    samples = [_sample([[10, 10, 30, 40]], [1]), _sample([], [])]
    losses = model(inputs, samples, mode="loss")
    assert set(losses) == {"loss_obj", "loss_cls", "loss_xy", "loss_wh"}
    assert all(torch.isfinite(v) for v in losses.values())
    raw = model(inputs, mode="tensor")
    assert [tuple(r.shape) for r in raw] == [(2, 24, 2, 2), (2, 24, 4, 4), (2, 24, 8, 8)]
    model.eval()
    with torch.no_grad():
        out = model(inputs, [_sample([], []), _sample([], [])], mode="predict")
        assert len(out) == 2 and all(isinstance(o, DetDataSample) for o in out)
        pred = out[0].pred_instances
        assert pred.bboxes.shape == (20, 4) and pred.scores.shape == (20,) and pred.labels.dtype == torch.long
        assert pred.bboxes.min() >= 0 and pred.bboxes.max() <= 64
        # Without samples: the input size is the original size.
        assert len(model(inputs, mode="predict")[1].pred_instances) == 20


def test_predictions_in_original_pixels():
    torch.manual_seed(0)
    model = _build(test_cfg=dict(score_thr=0.0, conf_thr=0.0, max_per_img=30)).eval()
    inputs = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        same = model(inputs, [_sample([], [])], mode="predict")[0].pred_instances
        half = model(inputs, [_sample([], [], ori=(128, 128), scale=(0.5, 0.5))], mode="predict")[0].pred_instances
    torch.testing.assert_close(half.bboxes, same.bboxes * 2)
    torch.testing.assert_close(half.scores, same.scores)


def test_config_errors():
    with pytest.raises(ValueError, match="num_classes"):
        _build(num_classes=0)
    with pytest.raises(ValueError, match="anchor_masks has 2 levels"):
        head = dict(CFG["bbox_head"], anchor_masks=[[0, 1, 2], [3, 4, 5]])
        _build(bbox_head=head)
    with pytest.raises(ValueError, match="bbox_head.num_classes=5"):
        _build(bbox_head=dict(CFG["bbox_head"], num_classes=5))
    with pytest.raises(ValueError, match="strides"):
        _build(bbox_head=dict(CFG["bbox_head"], strides=[64, 32, 16]))
    with pytest.raises(ValueError, match="unknown test_cfg keys"):
        _build(test_cfg=dict(iou_thr=0.5))
    with pytest.raises(ValueError, match="mode"):
        _build()(torch.zeros(1, 3, 64, 64), mode="lost")
    with pytest.raises(ValueError, match="data_samples"):
        _build()(torch.zeros(1, 3, 64, 64), mode="loss")


def test_overfit_two_images():
    torch.manual_seed(0)
    model = _build(test_cfg=dict(score_thr=0.05, max_per_img=10))
    g = torch.Generator().manual_seed(1)
    inputs = torch.randn(2, 3, 64, 64, generator=g)
    gts = [([[8.0, 12.0, 36.0, 44.0]], [2]), ([[30.0, 20.0, 50.0, 36.0]], [0])]
    samples = [_sample(b, lab) for b, lab in gts]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(40):
        loss = sum(model(inputs, samples, mode="loss").values())
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        out = model(inputs, [_sample([], []) for _ in range(2)], mode="predict")
    for sample, (boxes, labels) in zip(out, gts):
        pred = sample.pred_instances
        assert len(pred) > 0
        assert pred.labels[0].item() == labels[0]
        assert box_iou(pred.bboxes[:1], torch.tensor(boxes)).item() > 0.5


def test_train_and_val_step_through_mmengine():
    from mmengine.optim import OptimWrapper

    model = _build()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=1e-3))
    data = dict(inputs=torch.randn(2, 3, 64, 64), data_samples=[_sample([[4, 4, 40, 40]], [0]), _sample([], [])])
    log_vars = model.train_step(data, wrapper)
    assert {"loss", "loss_obj", "loss_cls", "loss_xy", "loss_wh"} <= set(log_vars)
    model.eval()
    out = model.val_step(dict(inputs=data["inputs"], data_samples=[_sample([], []), _sample([], [])]))
    assert all("pred_instances" in o for o in out)
