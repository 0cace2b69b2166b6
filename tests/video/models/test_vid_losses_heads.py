"""Losses against hand-written formulas, consensus modules, head argument checks and predictions."""

from __future__ import annotations

import pytest
import torch
from mmengine.registry import DefaultScope

from video.models import AvgConsensus, BCELossWithLogits, CrossEntropyLoss, I3DHead, MaxConsensus, TSNHead
from video.registry import TASK_UTILS
from video.structures import ActionDataSample


def test_cross_entropy_with_label_smoothing_matches_formula():
    torch.manual_seed(0)
    scores, labels, eps = torch.randn(6, 5), torch.tensor([0, 4, 2, 2, 1, 3]), 0.2
    target = torch.full((6, 5), eps / 5)
    target[torch.arange(6), labels] += 1 - eps
    expected = -(target * scores.log_softmax(1)).sum(1).mean()
    torch.testing.assert_close(CrossEntropyLoss(label_smoothing=eps)(scores, labels), expected)
    torch.testing.assert_close(CrossEntropyLoss(loss_weight=2.0)(scores, labels),
                               2 * -scores.log_softmax(1)[torch.arange(6), labels].mean())
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        CrossEntropyLoss(label_smoothing=1.0)
    with pytest.raises(ValueError, match="BCELossWithLogits and multi_label"):
        CrossEntropyLoss()(scores, torch.zeros(6, 5))


def test_bce_matches_formula():
    torch.manual_seed(0)
    scores, hot = torch.randn(4, 3), torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]]).float()
    p = scores.sigmoid()
    expected = -(hot * p.log() + (1 - hot) * (1 - p).log()).mean()
    torch.testing.assert_close(BCELossWithLogits()(scores, hot), expected)
    weighted = BCELossWithLogits(class_weight=[1.0, 2.0, 0.5])(scores, hot)
    expected_w = -((hot * p.log() + (1 - hot) * (1 - p).log()) * torch.tensor([1.0, 2.0, 0.5])).mean()
    torch.testing.assert_close(weighted, expected_w)
    with pytest.raises(ValueError, match="multi-hot \\[N, C\\]"):
        BCELossWithLogits()(scores, torch.tensor([0, 1, 2, 0]))


def test_consensus_modules():
    x = torch.tensor([[[1.0, 4.0], [3.0, 2.0]]])  # [N=1, T=2, C=2]
    torch.testing.assert_close(AvgConsensus()(x), torch.tensor([[[2.0, 3.0]]]))
    torch.testing.assert_close(MaxConsensus()(x), torch.tensor([[[3.0, 4.0]]]))
    with DefaultScope.overwrite_default_scope("video"):
        assert isinstance(TASK_UTILS.build(dict(type="MaxConsensus")), MaxConsensus)


def test_tsn_head_consensus_equals_mean_of_frame_scores():
    torch.manual_seed(0)
    head = TSNHead(num_classes=3, in_channels=8, dropout_ratio=0.0).eval()
    feats = torch.randn(2 * 4, 8, 2, 2)  # 2 views of 4 frames
    per_frame = head.fc_cls(feats.mean((2, 3)))
    torch.testing.assert_close(head(feats, num_segs=4), per_frame.reshape(2, 4, 3).mean(1))


def test_head_arguments_and_labels_are_checked():
    with pytest.raises(ValueError, match="average_clips='mean' is not supported"):
        I3DHead(num_classes=3, in_channels=8, average_clips="mean")
    head = I3DHead(num_classes=3, in_channels=8)
    bad = [ActionDataSample().set_gt_label(3)]
    with pytest.raises(ValueError, match="gt_label \\[3\\] out of range for num_classes=3"):
        head.loss(torch.randn(1, 3), bad)
    with pytest.raises(ValueError, match="features must be \\[N, C, t, h, w\\]"):
        head(torch.randn(2, 8))


def test_label_check_stays_inside_a_compiled_graph():
    """Under torch.compile the range check is an in-graph assert (no graph break each step) that still refuses."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    head = I3DHead(num_classes=3, in_channels=8)
    loss = torch.compile(head.loss, backend="eager", fullgraph=True)  # fullgraph: a graph break would raise
    good = loss(torch.randn(1, 3), [ActionDataSample().set_gt_label(2)])
    assert good["loss_cls"].isfinite()
    assert not counters["graph_break"]
    with pytest.raises(RuntimeError, match="I3DHead: a gt_label is out of range for num_classes=3"):
        loss(torch.randn(1, 3), [ActionDataSample().set_gt_label(3)])
    torch._dynamo.reset()


def test_predict_score_mode_softmaxes_mean_logits():
    head = I3DHead(num_classes=3, in_channels=8, average_clips="score")
    logits = torch.tensor([[1.0, 0.0, 0.0], [0.0, 3.0, 0.0]])  # 1 video, 2 views
    pred = head.predict(logits, 2, [ActionDataSample()])[0]
    torch.testing.assert_close(pred.pred_score, torch.tensor([0.5, 1.5, 0.0]).softmax(0))
    assert pred.pred_label.tolist() == [1]
