"""Soft-NMS (the runtime's one NumPy implementation, oars_deploy.soft_nms): both decays against their formula on
a 3-box hand case and against a plain-Python loop on random boxes; per-class in one pass; the ``test_cfg.nms``
option of the detection heads (accepted, refused with the key named), the one-stage eager path, the raw export's
deploy.yaml carrying it to the predictor, which applies it, and the refusal of an in-graph NMS export."""

from __future__ import annotations

import copy
import math
import os

import numpy as np
import pytest
import torch
from config_checks_detection import shrink_model
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope

from detection.export import build_export_spec
from detection.models.heads.dense_utils import check_nms_cfg, nms_predict, soft_nms_image
from detection.structures import DetDataSample
from oars.config import ConfigError, apply_overrides, load_config
from oars.export.spec import ExportOptions
from oars_deploy.errors import DeployError
from oars_deploy.predictors.detection_boxes.postprocess import detection
from oars_deploy.soft_nms import multiclass_soft_nms, soft_nms

# A and B overlap with IoU 9 * 10 / (100 + 100 - 90) = 9 / 11; C overlaps neither.
BOXES = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30]], dtype=np.float64)
SCORES = np.array([0.9, 0.8, 0.7])
IOU_AB = 9 / 11
SOFT = dict(type="soft_nms", method="gaussian", sigma=0.5, iou_threshold=0.0, min_score=0.001)


def test_gaussian_by_hand():
    keep, kept = soft_nms(BOXES, SCORES, "gaussian", sigma=0.5)
    assert keep.tolist() == [0, 2, 1]  # B decayed below C
    np.testing.assert_allclose(kept, [0.9, 0.7, 0.8 * math.exp(-IOU_AB**2 / 0.5)], rtol=1e-12)
    keep, _ = soft_nms(BOXES, SCORES, "gaussian", sigma=0.5, min_score=0.25)  # B's 0.21 falls below: dropped
    assert keep.tolist() == [0, 2]


def test_linear_by_hand():
    keep, kept = soft_nms(BOXES, SCORES, "linear", iou_threshold=0.3)
    assert keep.tolist() == [0, 2, 1]
    np.testing.assert_allclose(kept, [0.9, 0.7, 0.8 * (1 - IOU_AB)], rtol=1e-12)
    keep, kept = soft_nms(BOXES, SCORES, "linear", iou_threshold=0.9)  # 9/11 is not above 0.9: no decay
    assert keep.tolist() == [0, 1, 2] and kept.tolist() == [0.9, 0.8, 0.7]
    keep, _ = soft_nms(BOXES, SCORES, "linear", labels=np.array([0, 1, 0]))  # A and B of different classes
    assert keep.tolist() == [0, 1, 2]
    keep, _ = soft_nms(BOXES, SCORES, "linear", max_keep=2)
    assert keep.tolist() == [0, 2]


def reference(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, method: str, sigma: float, thr: float,
              min_score: float) -> list[tuple[int, float]]:
    """Bodla's loop, literally: pick the best remaining, decay the others of its class, drop the low ones."""
    remaining = {i: float(s) for i, s in enumerate(scores)}
    kept = []
    while remaining:
        m = max(remaining, key=lambda i: (remaining[i], -i))
        kept.append((m, remaining.pop(m)))
        for i in list(remaining):
            if labels[i] != labels[m]:
                continue
            iw = max(min(boxes[i, 2], boxes[m, 2]) - max(boxes[i, 0], boxes[m, 0]), 0.0)
            ih = max(min(boxes[i, 3], boxes[m, 3]) - max(boxes[i, 1], boxes[m, 1]), 0.0)
            area = lambda b: (b[2] - b[0]) * (b[3] - b[1])  # noqa: E731
            iou = iw * ih / (area(boxes[i]) + area(boxes[m]) - iw * ih)
            if iou > thr:
                remaining[i] *= math.exp(-iou * iou / sigma) if method == "gaussian" else 1 - iou
            if remaining[i] < min_score:
                del remaining[i]
    return kept


@pytest.mark.parametrize("method", ["gaussian", "linear"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_the_reference_loop(method, seed):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 80, (200, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (200, 2))], axis=1)
    scores, labels = rng.uniform(0, 1, 200), rng.integers(0, 3, 200)
    thr = 0.0 if method == "gaussian" else 0.3
    expected = reference(boxes, scores, labels, method, 0.5, thr, 0.05)
    keep, kept = soft_nms(boxes, scores, method, 0.5, thr, 0.05, labels=labels)
    assert keep.tolist() == [i for i, _ in expected] and len(keep) < 200  # some were dropped
    np.testing.assert_allclose(kept, [s for _, s in expected], rtol=1e-12)
    assert (np.diff(kept) <= 0).all()


def test_multiclass_candidates_and_per_class_boxes():
    scores = np.array([[0.9, 0.02], [0.8, 0.6], [0.7, 0.0]], dtype=np.float32)
    boxes, out_scores, labels = multiclass_soft_nms(BOXES, scores, 0.05, "linear", 0.5, 0.3, 0.001, max_per_img=10)
    # class 0: A, C, B decayed; class 1: B alone (A's 0.02 is below score_thr)
    assert labels.tolist() == [0, 0, 1, 0]
    np.testing.assert_allclose(out_scores, [0.9, 0.7, 0.6, 0.8 * (1 - IOU_AB)], rtol=1e-6)
    per_class = np.stack([BOXES, BOXES + 100], axis=1)  # [N, C, 4]: class 1's boxes shifted
    b, _, lab = multiclass_soft_nms(per_class, scores, 0.05, "linear", 0.5, 0.3, 0.001)
    np.testing.assert_allclose(b[lab == 1], [[101, 100, 111, 110]])
    with pytest.raises(ValueError, match="method='hard' is not supported"):
        soft_nms(BOXES, SCORES, "hard")
    with pytest.raises(ValueError, match=r"\[N, 2\] \(start, end\) or \[N, 4\]"):
        soft_nms(np.zeros((3, 3)), SCORES)


def test_nms_option_checked_with_the_key_named():
    assert check_nms_cfg("Head", {"iou_threshold": 0.5}) == {"iou_threshold": 0.5}
    assert check_nms_cfg("Head", SOFT) == SOFT
    with pytest.raises(ValueError, match=r"Head: test_cfg.nms.type='matrix' is not supported; accepted: \['nms', "):
        check_nms_cfg("Head", {"type": "matrix", "iou_threshold": 0.5})
    with pytest.raises(ValueError, match=r"lacks \['min_score'\]"):
        check_nms_cfg("Head", {k: v for k, v in SOFT.items() if k != "min_score"})
    with pytest.raises(ValueError, match="test_cfg.nms.method='box' is not supported"):
        check_nms_cfg("Head", dict(SOFT, method="box"))
    with pytest.raises(ValueError, match="test_cfg.nms.sigma must be > 0"):
        check_nms_cfg("Head", dict(SOFT, sigma=0))
    with pytest.raises(ValueError, match=r"unknown keys \['sigmaa'\]"):
        check_nms_cfg("Head", dict(SOFT, sigmaa=1))
    with pytest.raises(ValueError, match=r"Head: test_cfg.nms=.* is invalid; expected \{iou_threshold: 0.5\}"):
        check_nms_cfg("Head", {"iou_threshold": 0.5, "sigma": 0.5})  # a soft-NMS key on hard NMS


def test_dense_eager_path_runs_the_runtime_op():
    boxes = torch.tensor(BOXES, dtype=torch.float32)[None]
    scores = torch.tensor([[0.9, 0.0], [0.8, 0.6], [0.7, 0.0]])[None]  # 0: not a candidate
    out = nms_predict(boxes, scores, [{}], SOFT, max_per_img=0, rescale=False)[0]
    b, s, lab = multiclass_soft_nms(BOXES, scores[0].numpy(), 0.0, "gaussian", 0.5, 0.0, 0.001, 0, 0)
    torch.testing.assert_close(out.scores, torch.from_numpy(s))
    torch.testing.assert_close(out.bboxes, torch.from_numpy(b))
    assert out.labels.tolist() == lab.tolist() == [0, 0, 1, 0]
    hard = nms_predict(boxes, scores, [{}], 0.5, max_per_img=0, rescale=False)[0]
    assert hard.labels.tolist() == [0, 0, 1] and hard.scores.tolist() == pytest.approx([0.9, 0.7, 0.6])
    t_boxes, t_scores, t_labels = soft_nms_image(boxes[0], scores[0], SOFT, 0.0, 2, 0)
    assert t_labels.tolist() == [0, 0] and t_scores.dtype == torch.float32


def _retinanet(nms: dict, postprocess: bool):
    cfg = load_config(os.path.join(ROOT, "configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml"))
    apply_overrides(cfg, ["model.num_classes=3"])
    cfg.model = shrink_model(cfg.model)
    cfg.model.test_cfg.nms = nms
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    options = ExportOptions(input_shape=(1, 3, 64, 64), extra=dict(postprocess=postprocess))
    return build_export_spec(model, cfg, options)


def test_raw_export_carries_soft_nms_to_the_predictor():
    spec = _retinanet(dict(SOFT), postprocess=False)
    assert spec.postprocess["nms"] == SOFT and spec.postprocess["inside_graph"] == ["decode", "candidates"]
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (1, 40, 2))
    outputs = {"boxes": np.concatenate([xy, xy + 12], axis=2).astype(np.float32),
               "scores": rng.uniform(0, 1, (1, 40, 3)).astype(np.float32)}
    meta = {"img_shape": (64, 64), "ori_shape": (64, 64), "scale_factor": (1.0, 1.0)}
    result = detection(outputs, [meta], spec.postprocess)[0]
    b, s, lab = multiclass_soft_nms(outputs["boxes"][0], outputs["scores"][0], spec.postprocess["score_thr"],
                                    "gaussian", 0.5, 0.0, 0.001, spec.postprocess["max_per_img"],
                                    spec.postprocess["nms_pre"])
    np.testing.assert_array_equal(result["scores"], s)
    np.testing.assert_array_equal(result["labels"], lab)
    hard = detection(outputs, [meta], {k: v for k, v in spec.postprocess.items() if k != "nms"})[0]
    assert len(hard["scores"]) < len(result["scores"])  # hard NMS removes what soft-NMS only decays
    with pytest.raises(DeployError, match="deploy.yaml postprocess.nms must be"):
        detection(outputs, [meta], dict(spec.postprocess, nms={"type": "soft_nms", "method": "gaussian"}))


def test_in_graph_export_refuses_soft_nms_naming_the_key():
    with pytest.raises(ConfigError, match=r"model.test_cfg.nms.type=soft_nms cannot be exported with the NMS inside "
                                          r"the graph .* export.postprocess: false"):
        _retinanet(dict(SOFT), postprocess=True)
    assert "nms" not in _retinanet({"iou_threshold": 0.5}, postprocess=False).postprocess


@pytest.mark.parametrize("config", ["yolov3/yolov3_darknet53_demo_shapes.yaml",
                                    "ssd/ssdlite_mobilenetv3_320_coco.yaml"])
def test_yolov3_and_ssd_heads_run_soft_nms(config):
    """YOLOv3 and SSD heads take the same soft-NMS setting as the others: their eager predict then keeps
    overlapping boxes with decayed scores (plain NMS would drop them), each score at most the plain one."""
    cfg = load_config(os.path.join(ROOT, "configs/detection", config))
    apply_overrides(cfg, ["model.num_classes=3"])
    cfg.model = shrink_model(cfg.model)
    results = {}
    for name, nms in (("hard", {"type": "nms", "iou_threshold": 0.3}), ("soft", SOFT)):
        cfg.model.test_cfg.nms = nms
        cfg.model.test_cfg.score_thr = 0.0
        torch.manual_seed(0)
        with DefaultScope.overwrite_default_scope("detection"):
            model = MODELS.build(copy.deepcopy(cfg.model)).eval()
        assert model.bbox_head.test_cfg["nms"]["type"] == nms["type"]
        sample = DetDataSample(metainfo={"img_shape": (64, 64), "ori_shape": (64, 64), "scale_factor": (1.0, 1.0),
                                         "batch_input_shape": (64, 64)})
        with torch.no_grad():
            results[name] = model.predict(torch.rand(1, 3, 64, 64) * 255, [sample])[0].pred_instances
    from torchvision.ops import box_iou

    def max_same_class_iou(inst) -> float:
        iou = box_iou(inst.bboxes, inst.bboxes).nan_to_num(0.0).fill_diagonal_(0)  # degenerate boxes: 0
        same = inst.labels[:, None] == inst.labels[None, :]
        return float((iou * same).max()) if len(inst.bboxes) > 1 else 0.0

    hard, soft = results["hard"], results["soft"]
    assert len(hard.scores) > 0 and len(soft.scores) > 0
    assert max_same_class_iou(hard) <= 0.3 + 1e-6  # plain NMS: no two kept boxes of a class overlap more
    assert max_same_class_iou(soft) > 0.3  # soft-NMS keeps overlapping boxes, their scores decayed
    assert torch.all(soft.scores[:-1] >= soft.scores[1:]) and float(soft.scores.min()) >= SOFT["min_score"]
    bad = dict(SOFT, method="matrix")
    cfg.model.test_cfg.nms = bad
    with DefaultScope.overwrite_default_scope("detection"), pytest.raises(ValueError, match="method='matrix'"):
        MODELS.build(copy.deepcopy(cfg.model))
