"""Class-aware Cascade R-CNN (CascadeClsAwareRoIHead): the r101 config states Paddle's values, every stage scores
C + 1 classes and regresses 4C deltas, the top-scoring foreground class's box goes to the next stage (inference
and training), the stages merge with [0.2, 0.3, 0.5] (hand case), soft-NMS runs in eager two-stage inference, the
static (exported) graph of the class-aware stages equals eager predict, export refuses soft-NMS, and the errors."""

from __future__ import annotations

import copy
import math
import os

import pytest
import torch
from config_checks_detection import shrink_model
from demo_utils import ROOT
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData

import detection.models  # noqa: F401  (registers everything)
from detection.export import build_export_spec
from detection.export.two_stage import TwoStageExport
from detection.models.roi_heads import CascadeClsAwareRoIHead, CascadeRoIHead, bbox2roi
from detection.models.task_utils import SamplingResult
from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.config import ConfigError, apply_overrides, load_config
from oars.export.spec import ExportOptions

R101 = os.path.join(ROOT, "configs/detection/cacascade_rcnn/cacascade_rcnn_r101_vd_fpn_1x_coco.yaml")
DEMO = os.path.join(ROOT, "configs/detection/cacascade_rcnn/cacascade_rcnn_r18_fpn_demo_shapes.yaml")
MODEL = load_config(R101).to_dict()["model"]
STRIDES = [4, 8, 16, 32, 64]
IMG = 64
C = 3
WEIGHTS = [0.2, 0.3, 0.5]
HARD = {"type": "nms", "iou_threshold": 0.5}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _head(test_cfg: dict | None = None, **kwargs) -> CascadeClsAwareRoIHead:
    """The r101 config's RoI head at 8 channels, 32-d FCs and 3 classes."""
    cfg = {k: v for k, v in copy.deepcopy(MODEL["roi_head"]).items() if k != "_delete_"}
    cfg["bbox_roi_extractor"].pop("out_channels")
    cfg["bbox_head"] = [dict(h, fc_out_channels=32) for h in cfg["bbox_head"]]
    train = [dict(s, sampler=dict(s["sampler"], num=64)) for s in copy.deepcopy(MODEL["train_cfg"]["rcnn"])]
    cfg.update(num_classes=C, in_channels=[8] * 5, strides=STRIDES, train_cfg=train,
               test_cfg=dict(MODEL["test_cfg"]["rcnn"], **(test_cfg or {})))
    cfg.update(kwargs)
    return MODELS.build(cfg)


def _pyramid() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 8, max(1, IMG // s), max(1, IMG // s), generator=g) for s in STRIDES]


def _sample() -> DetDataSample:
    return DetDataSample(metainfo=dict(img_shape=(IMG, IMG), ori_shape=(IMG, IMG), batch_input_shape=(IMG, IMG),
                                       scale_factor=(1.0, 1.0)))


def _hand_set(head: CascadeRoIHead, logits: list[list[float]], biases: list[list[float]]) -> None:
    """Stage ``s`` outputs the constant class logits ``logits[s]`` and the constant deltas ``biases[s]`` (4C)."""
    with torch.no_grad():
        for s, bbox_head in enumerate(head.bbox_head):
            bbox_head.fc_cls.weight.zero_()
            bbox_head.fc_cls.bias.copy_(torch.tensor(logits[s]))
            bbox_head.fc_reg.weight.zero_()
            bbox_head.fc_reg.bias.copy_(torch.tensor(biases[s]))


def _predict(head: CascadeRoIHead, boxes: list[list[float]]) -> InstanceData:
    with torch.no_grad():
        return head.eval().predict(_pyramid(), [InstanceData(bboxes=torch.tensor(boxes))], [_sample()])[0]


def test_r101_config_states_paddles_values():
    head = _head()
    full = MODEL["roi_head"]
    assert full["type"] == "CascadeClsAwareRoIHead" and full["stage_score_weights"] == WEIGHTS
    assert head.stage_loss_weights == [1.0, 0.5, 0.25] and head.stage_score_weights == WEIGHTS
    # Paddle's regression weights [10, 10, 5, 5] * (1, 2, 3): std = 1 / weight
    for stage, head_s in enumerate(head.bbox_head):
        weights = [10 * (stage + 1), 10 * (stage + 1), 5 * (stage + 1), 5 * (stage + 1)]
        assert head_s.bbox_coder.target_stds == pytest.approx([1 / w for w in weights], rel=1e-8)
        assert not head_s.reg_class_agnostic
    assert [a.pos_iou_thr for a in head.bbox_assigner] == [0.5, 0.6, 0.7]
    assert head.test_cfg["nms"] == {"type": "soft_nms", "method": "gaussian", "sigma": 0.5, "iou_threshold": 0.0,
                                    "min_score": 0.01}
    assert MODEL["backbone"]["depth"] == 101 and MODEL["backbone"]["variant"] == "vd"


def test_every_stage_scores_c_plus_1_and_regresses_4c():
    head = _head().eval()
    rois = bbox2roi([torch.tensor([[4.0, 4, 30, 30], [10, 12, 50, 60]])])
    with torch.no_grad():
        for stage in range(3):
            cls_score, bbox_pred = head._bbox_forward(stage, _pyramid(), rois)
            assert cls_score.shape == (2, C + 1) and bbox_pred.shape == (2, 4 * C)
        scores, bbox_pred, last_rois = head(_pyramid(), rois)
    assert scores.shape == (2, C + 1) and bbox_pred.shape == (2, 4 * C) and last_rois.shape == (2, 5)
    torch.testing.assert_close(scores.sum(dim=1), torch.ones(2))  # merged probabilities


def _softmax(x: list[float]) -> list[float]:
    e = [math.exp(v) for v in x]
    return [v / sum(e) for v in e]


def test_merge_with_stage_weights_by_hand():
    """Box [8, 8, 28, 28] (20 px). Stage 0 moves every class's box by x + 0.1 w (delta 1 at std 0.1), stage 1
    not at all, stage 2 by y + 0.1 h (delta 3 at std 1/30): the stages' class boxes are [10, 8, 30, 28] twice
    and [10, 10, 30, 30]; merged 0.2 / 0.3 / 0.5: [10, 9, 30, 29]. Probabilities: 0.2 softmax([4, 0, 0, 0]) +
    0.3 softmax(0) + 0.5 softmax([-4, 0, 0, 0])."""
    head = _head(test_cfg=dict(score_thr=0.0, nms=HARD))
    logits = [[4.0, 0, 0, 0], [0.0, 0, 0, 0], [-4.0, 0, 0, 0]]
    _hand_set(head, logits, [[1.0, 0, 0, 0] * C, [0.0] * 4 * C, [0, 0.1 * 30, 0, 0] * C])
    res = _predict(head, [[8.0, 8, 28, 28]])
    probs = [sum(w * _softmax(s)[c] for w, s in zip(WEIGHTS, logits)) for c in range(C)]
    order = sorted(range(C), key=lambda c: -probs[c])
    assert res.labels.tolist() == order
    torch.testing.assert_close(res.scores, torch.tensor([probs[c] for c in order]))
    torch.testing.assert_close(res.bboxes, torch.tensor([[10.0, 9, 30, 29]]).repeat(C, 1))
    plain_mean = [sum(_softmax(s)[c] for s in logits) / 3 for c in range(C)]
    assert abs(plain_mean[0] - probs[0]) > 0.05  # the weights matter here


def test_top_scoring_class_box_goes_to_the_next_stage():
    """Stage 0 scores class 2 highest and moves class 0's box right (x + 2) and class 2's box down (y + 2); later
    stages keep boxes. Every class's later-stage boxes start from class 2's box: class 0's merged box is
    0.2 * (x + 2) + 0.8 * (y + 2)."""
    head = _head(test_cfg=dict(score_thr=0.0, nms=HARD))
    zero = [0.0] * 4 * C
    _hand_set(head, [[0.0, 0, 4, 0], [0.0] * 4, [0.0] * 4], [[1.0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], zero, zero])
    res = _predict(head, [[8.0, 8, 28, 28]])
    boxes = {int(label): box for label, box in zip(res.labels, res.bboxes)}
    torch.testing.assert_close(boxes[2], torch.tensor([8.0, 10, 28, 30]))
    torch.testing.assert_close(boxes[0], torch.tensor([8.4, 9.6, 28.4, 29.6]))
    torch.testing.assert_close(boxes[1], torch.tensor([8.0, 9.6, 28.0, 29.6]))  # 0.2 * unmoved + 0.8 * (y + 2)


def test_training_refines_by_the_predicted_class_not_the_target():
    """A positive RoI whose target is class 0 but whose top score is class 2 moves by class 2's deltas (Paddle),
    where the plain cascade moves it by its target's (MMDetection)."""
    head = _head()
    gts = torch.tensor([[0.0, 0, 20, 20]])
    priors = torch.tensor([[2.0, 2, 22, 22]])
    res = SamplingResult(priors, torch.tensor([0]), torch.tensor([], dtype=torch.long), torch.tensor([0]), gts,
                         torch.tensor([0]), num_gts=1, gt_added=False)
    rois = bbox2roi([res.pos_priors])
    deltas = torch.tensor([[1.0, 0, 0, 0, 0, 0, 0, 0, 0, 1.0, 0, 0]])  # class 0: x + 2, class 2: y + 2
    cls = torch.tensor([[0.0, 0, 4, 0]])
    target = torch.tensor([0])
    meta = [dict(img_shape=(IMG, IMG))]
    aware = head.bbox_head[0].refine_bboxes([res], rois, cls, deltas, head.refine_labels(target), meta)
    torch.testing.assert_close(aware[0].bboxes, torch.tensor([[2.0, 4, 22, 24]]))
    plain = head.bbox_head[0].refine_bboxes([res], rois, cls, deltas, CascadeRoIHead.refine_labels(head, target),
                                            meta)
    torch.testing.assert_close(plain[0].bboxes, torch.tensor([[4.0, 2, 24, 22]]))


def test_loss_backpropagates_through_every_stage():
    torch.manual_seed(0)
    head = _head()
    sample = _sample()
    sample.gt_instances = InstanceData(bboxes=torch.tensor([[4.0, 6, 30, 40], [28, 20, 60, 58]]),
                                       labels=torch.tensor([0, 2]))
    proposals = InstanceData(bboxes=torch.tensor([[5.0, 5, 31, 41], [27, 22, 58, 60], [0, 0, 20, 20]] * 10))
    losses = head.loss(_pyramid(), [proposals], [sample])
    total = sum(v for k, v in losses.items() if "loss" in k)
    total.backward()
    assert sorted(k for k in losses if k.startswith("s2.")) == ["s2.acc", "s2.loss_bbox", "s2.loss_cls"]
    assert all(h.fc_reg.weight.grad is not None for h in head.bbox_head)


def test_soft_nms_in_two_stage_predict():
    """Two RoIs of IoU 18 * 20 / (400 + 400 - 360) = 9/11, the same probabilities: per class the second keeps
    p * exp(-(9/11)^2 / 0.5) (Gaussian, every overlap decayed)."""
    head = _head(test_cfg=dict(score_thr=0.0))
    logits = [[2.0, 1, 0, 0]] * 3
    _hand_set(head, logits, [[0.0] * 4 * C] * 3)
    res = _predict(head, [[8.0, 8, 28, 28], [10, 8, 30, 28]])
    p = _softmax(logits[0])
    expected = sorted([p[c] for c in range(C)] + [p[c] * math.exp(-(9 / 11) ** 2 / 0.5) for c in range(C)],
                      reverse=True)
    expected = [s for s in expected if s >= 0.01]  # min_score
    torch.testing.assert_close(res.scores, torch.tensor(expected))


def _demo_model(overrides: list[str] = ()):
    cfg = load_config(DEMO)
    apply_overrides(cfg, ["model.test_cfg.rcnn.score_thr=0.0", "model.test_cfg.rcnn.max_per_img=20", *overrides])
    cfg.model = shrink_model(cfg.model)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    with torch.no_grad():
        for stage in model.roi_head.bbox_head:  # decisive scores and boxes instead of near-uniform ones
            stage.fc_cls.weight.mul_(30)
            stage.fc_reg.weight.mul_(10)
    return cfg, model


def test_static_graph_equals_eager_predict():
    cfg, model = _demo_model()
    image = torch.rand(1, 3, IMG * 2, IMG * 2, generator=torch.Generator().manual_seed(1)) * 255
    sample = DetDataSample(metainfo=dict(img_shape=(128, 128), ori_shape=(128, 128), scale_factor=(1.0, 1.0),
                                         batch_input_shape=(128, 128)))
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": [image[0]], "data_samples": [sample]}, training=False)
        eager = model(**data, mode="predict")[0].pred_instances
        num, boxes, scores, labels = TwoStageExport(model, (128, 128))(data["inputs"])
    n = int(num[0])
    assert n == len(eager) > 0
    torch.testing.assert_close(scores[0, :n], eager.scores, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(boxes[0, :n], eager.bboxes, atol=1e-4, rtol=1e-5)
    assert labels[0, :n].tolist() == eager.labels.tolist()


def test_export_refuses_soft_nms_naming_the_key():
    soft = "model.test_cfg.rcnn.nms={type: soft_nms, method: linear, sigma: 0.5, iou_threshold: 0.3, min_score: 0.05}"
    cfg, model = _demo_model([soft])
    with pytest.raises(ConfigError, match=r"cacascade_rcnn_r18_fpn_demo_shapes.yaml: model.test_cfg.rcnn.nms.type="
                                          r"soft_nms cannot be exported with the NMS inside the graph"):
        build_export_spec(model, cfg, ExportOptions(input_shape=(1, 3, 128, 128)))


def test_errors():
    with pytest.raises(ValueError, match=r"stage_score_weights=\[0.2, 0.3\] must be 3 weights >= 0 summing to 1"):
        _head(stage_score_weights=[0.2, 0.3])
    with pytest.raises(ValueError, match="summing to 1"):
        _head(stage_score_weights=[0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="score_combination='logits'; .* use 'probs'"):
        _head(score_combination="logits")
    heads = [dict(h, fc_out_channels=32) for h in MODEL["roi_head"]["bbox_head"]]
    heads[1]["reg_class_agnostic"] = True
    with pytest.raises(ValueError, match=r"bbox_head\[1\] regress class-agnostic boxes"):
        _head(bbox_head=heads)
