"""YOLOv3Neck and YOLOv3Head: shapes, decoding by hand, losses, configuration errors."""

from __future__ import annotations

import math

import pytest
import torch
from mmengine.structures import InstanceData

from detection.models.heads import YOLOv3Head
from detection.models.necks import YOLOv3Neck
from detection.structures import DetDataSample
from oars.errors import DataError
from oars.models.backbones.resnet import ResNet

NUM_CLASSES = 3


def _sample(boxes, labels) -> DetDataSample:
    s = DetDataSample(metainfo=dict(img_shape=(64, 64), batch_input_shape=(64, 64), scale_factor=(1.0, 1.0)))
    s.gt_instances = InstanceData(
        bboxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), labels=torch.tensor(labels, dtype=torch.long)
    )
    return s


def test_neck_channels_and_order():
    neck = YOLOv3Neck(in_channels=[16, 32, 64])
    assert neck.out_channels == [32, 16, 8] and neck.out_strides == [32, 16, 8]
    feats = (torch.randn(2, 16, 8, 8), torch.randn(2, 32, 4, 4), torch.randn(2, 64, 2, 2))
    outs = neck(feats)
    assert [tuple(o.shape) for o in outs] == [(2, 32, 2, 2), (2, 16, 4, 4), (2, 8, 8, 8)]
    act = neck.detect[0].conv1.act
    assert isinstance(act, torch.nn.LeakyReLU) and act.negative_slope == 0.1


def test_neck_darknet_sizes():
    neck = YOLOv3Neck(in_channels=[256, 512, 1024])
    assert neck.out_channels == [512, 256, 128]
    assert neck.detect[1].conv1.in_channels == 512 + 256 and neck.detect[2].conv1.in_channels == 256 + 128
    head = YOLOv3Head(num_classes=80, in_channels=neck.out_channels)
    assert [c.conv.out_channels for c in head.convs_bridge] == [1024, 512, 256]
    assert [c.out_channels for c in head.convs_pred] == [255, 255, 255]


def test_neck_errors():
    with pytest.raises(ValueError, match="out_channels"):
        YOLOv3Neck(in_channels=[16, 32, 64], out_channels=[8, 8])
    with pytest.raises(ValueError, match="feature maps"):
        YOLOv3Neck(in_channels=[16, 32])([torch.zeros(1, 16, 4, 4)])


def test_head_config_errors():
    with pytest.raises(ValueError, match="num_classes"):
        YOLOv3Head(num_classes=0, in_channels=[8, 8, 8])
    with pytest.raises(ValueError, match="anchor_masks has 2 levels"):
        YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], anchor_masks=[[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="anchor_masks"):
        YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], anchor_masks=[[0, 1], [2, 3], [4, 9]])
    with pytest.raises(ValueError, match="iou_loss"):
        YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], iou_loss="ciou")
    with pytest.raises(ValueError, match="unknown test_cfg keys \\['iou_thr'\\]"):
        YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], test_cfg=dict(iou_thr=0.5))
    with pytest.raises(ValueError, match="test_cfg.nms"):
        YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], test_cfg=dict(nms=dict(iou_thr=0.5)))
    head = YOLOv3Head(num_classes=2, in_channels=[8, 8, 8], test_cfg=dict(score_thr=0.1))
    assert head.test_cfg == dict(
        score_thr=0.1, conf_thr=0.005, nms=dict(iou_threshold=0.45), max_per_img=100, nms_pre=1000
    )


def test_decode_one_cell_by_hand():
    head = YOLOv3Head(num_classes=2, in_channels=[4, 4, 4])
    c = 7
    raw = [torch.zeros(1, 3 * c, h, w) for h, w in [(2, 2), (4, 4), (8, 8)]]
    # Level 0 (stride 32), local anchor 1 = anchor 7 (156x198), cell column 1, row 0.
    raw[0][0, c : 2 * c, 0, 1] = torch.tensor([0.2, -0.3, 0.1, -0.2, 1.0, 0.5, -1.0])
    boxes, scores = head.decode(raw)
    assert boxes.shape == (1, 252, 4) and scores.shape == (1, 252, 2)
    idx = (1 * 2 + 0) * 2 + 1
    cx = (torch.sigmoid(torch.tensor(0.2)) + 1) * 32
    cy = (torch.sigmoid(torch.tensor(-0.3)) + 0) * 32
    w, h = 156 * math.exp(0.1), 198 * math.exp(-0.2)
    torch.testing.assert_close(boxes[0, idx], torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]))
    expected = torch.sigmoid(torch.tensor(1.0)) * torch.sigmoid(torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(scores[0, idx], expected)
    # A zero output: the anchor centred on its cell, scores 0.5 * 0.5.
    torch.testing.assert_close(boxes[0, 0], torch.tensor([16 - 58.0, 16 - 45.0, 16 + 58.0, 16 + 45.0]))
    # Grids are cached per feature size.
    assert head.priors([(2, 2), (4, 4), (8, 8)], torch.device("cpu")) is head.priors(
        [(2, 2), (4, 4), (8, 8)], torch.device("cpu")
    )


def test_decode_scale_x_y():
    head = YOLOv3Head(num_classes=1, in_channels=[4, 4, 4], scale_x_y=1.05)
    raw = [torch.zeros(1, 18, h, w) for h, w in [(2, 2), (4, 4), (8, 8)]]
    raw[0][0, 0, 0, 0] = 3.0
    boxes, _ = head.decode(raw)
    cx = (torch.sigmoid(torch.tensor(3.0)) * 1.05 - 0.025) * 32
    torch.testing.assert_close((boxes[0, 0, 0] + boxes[0, 0, 2]) / 2, cx)


def _tiny_feats():
    torch.manual_seed(0)
    backbone = ResNet(depth=18, base_channels=8, out_indices=(1, 2, 3)).eval()
    with torch.no_grad():
        return backbone(torch.randn(2, 3, 64, 64)), backbone.out_channels


@pytest.mark.parametrize("extra", [dict(), dict(label_smooth=True, iou_loss="giou", scale_x_y=1.05)])
def test_loss_finite_and_decreasing(extra):
    feats, channels = _tiny_feats()
    neck = YOLOv3Neck(in_channels=channels)
    head = YOLOv3Head(num_classes=NUM_CLASSES, in_channels=neck.out_channels, **extra)
    samples = [_sample([[14, 21, 26, 35], [0, 0, 60, 50]], [0, 2]), _sample([[40, 8, 56, 40]], [1])]
    params = list(neck.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    history = []
    for _ in range(20):
        losses = head.loss(neck(feats), samples)
        assert set(losses) == {"loss_obj", "loss_cls", "loss_xy", "loss_wh"} | (
            {"loss_iou"} if extra.get("iou_loss") else set()
        )
        total = sum(losses.values())
        assert torch.isfinite(total)
        opt.zero_grad()
        total.backward()
        opt.step()
        history.append(total.item())
    assert history[-1] < 0.7 * history[0]


def test_loss_without_boxes_is_finite():
    feats, channels = _tiny_feats()
    neck = YOLOv3Neck(in_channels=channels)
    head = YOLOv3Head(num_classes=NUM_CLASSES, in_channels=neck.out_channels, iou_loss="giou", label_smooth=True)
    losses = head.loss(neck(feats), [_sample([], []), _sample([], [])])
    assert all(torch.isfinite(v) for v in losses.values())
    assert losses["loss_cls"].item() == 0 and losses["loss_obj"].item() > 0
    sum(losses.values()).backward()


def test_label_out_of_range_is_a_data_error():
    head = YOLOv3Head(num_classes=2, in_channels=[4, 4, 4])
    raw = [torch.zeros(1, 21, h, w) for h, w in [(2, 2), (4, 4), (8, 8)]]
    with pytest.raises(DataError, match="gt labels"):
        head.loss_by_feat(raw, [_sample([[0, 0, 10, 10]], [2])])


def test_label_check_stays_inside_a_compiled_graph():
    """Under torch.compile the label range check is an in-graph assert (``int(tensor)`` would break the graph at
    every step) that still refuses a bad label."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    head = YOLOv3Head(num_classes=2, in_channels=[4, 4, 4])
    gather = torch.compile(head._gather_gt, backend="eager")
    gather([_sample([[0, 0, 10, 10]], [1])], torch.device("cpu"))
    assert not any("item" in reason or "Tensor.__int__" in reason for reason in counters["graph_break"])
    with pytest.raises(RuntimeError, match=r"YOLOv3Head: gt labels must be in \[0, 1\]"):
        gather([_sample([[0, 0, 10, 10]], [2])], torch.device("cpu"))
    torch._dynamo.reset()


def test_label_smoothing_targets():
    from detection.models.losses import class_targets

    t = class_targets(torch.tensor([1]), 4, label_smooth=True)
    torch.testing.assert_close(t, torch.tensor([[1 / 40, 1 - 1 / 40, 1 / 40, 1 / 40]]))
    t = class_targets(torch.tensor([0]), 80, label_smooth=True)
    torch.testing.assert_close(t[0, :2], torch.tensor([1 - 1 / 80, 1 / 80]))


def test_predict_rescales_and_clips():
    head = YOLOv3Head(num_classes=2, in_channels=[4, 4, 4], test_cfg=dict(score_thr=0.3, conf_thr=0.3)).eval()
    c = 7
    raw = [torch.full((1, 3 * c, h, w), -10.0) for h, w in [(2, 2), (4, 4), (8, 8)]]
    # One confident box: level 2, anchor 0 (10x13) at cell (2, 3) -> centre (20, 28), class 1.
    raw[2][0, 0:c, 3, 2] = torch.tensor([0.0, 0.0, 0.0, 0.0, 5.0, -5.0, 5.0])
    meta = dict(img_shape=(64, 64), ori_shape=(128, 128), scale_factor=(0.5, 0.5), batch_input_shape=(64, 64))
    res = head.predict_by_feat(raw, [meta])[0]
    assert res.labels.tolist() == [1]
    torch.testing.assert_close(res.bboxes, torch.tensor([[30.0, 43.0, 50.0, 69.0]]))
    res = head.predict_by_feat(raw, [meta], rescale=False)[0]
    torch.testing.assert_close(res.bboxes, torch.tensor([[15.0, 21.5, 25.0, 34.5]]))
    # conf_thr filters on objectness alone.
    head.test_cfg["conf_thr"] = 0.999
    assert len(head.predict_by_feat(raw, [meta])[0]) == 0


def test_decode_exports_with_dynamic_shapes():
    """``torch.export`` (what the ONNX exporter runs) keeps batch and feature sizes symbolic: the prior
    cache must not freeze them."""
    head = YOLOv3Head(num_classes=2, in_channels=[4, 4, 4]).eval()

    class Decode(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = head

        def forward(self, a, b, c):
            return self.head.decode(self.head([a, b, c]))

    n, h, w = torch.export.Dim("n", min=1, max=8), torch.export.Dim("h", min=1, max=40), torch.export.Dim("w", max=40)
    feats = (torch.randn(2, 4, 2, 2), torch.randn(2, 4, 4, 4), torch.randn(2, 4, 8, 8))  # sizes 1 would specialise
    shapes = {"a": {0: n, 2: h, 3: w}, "b": {0: n, 2: 2 * h, 3: 2 * w}, "c": {0: n, 2: 4 * h, 3: 4 * w}}
    program = torch.export.export(Decode(), feats, dynamic_shapes=shapes)
    other = (torch.randn(3, 4, 3, 5), torch.randn(3, 4, 6, 10), torch.randn(3, 4, 12, 20))
    for got, want in zip(program.module()(*other), Decode()(*other)):
        torch.testing.assert_close(got, want)
