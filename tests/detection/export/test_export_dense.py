"""RetinaNet and FCOS through the one-stage export seam (``head.export_decode`` + ``DenseWithNMS`` /
``DenseDecode``): ONNX Runtime vs the traced module vs the eager ``predict`` (same detections), the raw export
with the torch-free predictor's NMS, and an INT8 export run by the Python predictor.

Models are the real configs shrunk (ResNet-18 at 1/8 width, 16-channel FPN and towers), 3 classes, with the head
convs redrawn so that random weights detect; small ``nms_pre`` / ``max_per_img`` so that the per-level top-k and
the top-M cut are exercised.
"""

from __future__ import annotations

import copy
import os

import cv2
import numpy as np
import onnxruntime as ort
import pytest
import torch
from config_checks_detection import shrink_model
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from torch import nn

from detection.export import LABEL_PAD, MatchSettings, build_export_spec, compare_detections, pad_detections
from oars.config import apply_overrides, load_config
from oars.export.spec import ExportOptions

CONFIGS = {
    "retinanet": os.path.join(ROOT, "configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml"),
    "fcos": os.path.join(ROOT, "configs/detection/fcos/fcos_r50_fpn_1x_coco.yaml"),
}
HW = 64
TEST_CFG = ["model.num_classes=3", "model.test_cfg.score_thr=0.3", "model.test_cfg.nms_pre=20",
            "model.test_cfg.max_per_img=40", "model.test_cfg.nms.iou_threshold=0.5"]


def _detecting(model: nn.Module) -> nn.Module:
    """Redraw the head convs (Kaiming) and lower the class prior so that a random head gives varied scores."""
    g = torch.Generator().manual_seed(3)
    head = model.bbox_head
    with torch.no_grad():
        for m in head.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, generator=g)
        head.classification_head["cls_logits"].weight.mul_(0.1)  # scores spread in (0.3, 0.7), no ties at 1
        head.classification_head["cls_logits"].bias.fill_(-1.0)
        head.regression_head["bbox_reg"].weight.mul_(0.1)
        if "bbox_ctrness" in head.regression_head:
            head.regression_head["bbox_reg"].bias.fill_(1.0)
    return model.eval()


def _cfg(kind: str, overrides: list[str] = ()):
    cfg = load_config(CONFIGS[kind])
    apply_overrides(cfg, [*TEST_CFG, *overrides])
    cfg.model = shrink_model(cfg.model)
    cfg.model.test_cfg.nms_pre = 20  # shrink_model's 100 would not cut at 64 px
    return cfg


def _model(kind: str) -> nn.Module:
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("detection"):
        return _detecting(MODELS.build(copy.deepcopy(_cfg(kind).model)))


def _images(batch: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, HW, HW, generator=torch.Generator().manual_seed(seed))


def _export(spec, path: str) -> ort.InferenceSession:
    torch.onnx.export(spec.module, (_images(1, 0),), path, dynamo=True, input_names=["image"],
                      output_names=spec.output_names, dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},),
                      custom_translation_table=spec.custom_translation_table, opset_version=17, verbose=False)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("kind", ["retinanet", "fcos"])
def test_onnx_matches_module_and_eager_predict(kind, tmp_path):
    model = _model(kind)
    spec = build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), dynamic=True))
    pp = spec.postprocess
    assert pp["inside_graph"] == ["decode", "candidates", "nms"] and spec.output_names[0] == "num_dets"
    assert (pp["score_thr"], pp["iou_threshold"], pp["max_per_img"], pp["nms_pre"]) == (0.3, 0.5, 40, 20)
    assert spec.outputs[1]["shape"] == [-1, 40, 4]
    session = _export(spec, str(tmp_path / "model.onnx"))
    images = _images(2, seed=1)
    with torch.no_grad():
        expected = [t.numpy() for t in spec.module(images)]
        samples = model.predict(images, rescale=False)
        raw = model(images)
        dense = torch.sqrt(torch.sigmoid(torch.cat([r.flatten(2) for r in raw[0]], 2))) if kind == "fcos" else None
    actual = session.run(None, {"image": images.numpy()})
    assert [a.shape for a in actual] == [(2,), (2, 40, 4), (2, 40), (2, 40)]
    strict = MatchSettings(score_thr=0.3, iou_threshold=0.5, explain_borderline=False)
    result = compare_detections(expected, actual, strict)
    assert result.ok, result.message
    assert result.max_box_diff < 1e-3 and result.max_score_diff < 1e-5
    eager = pad_detections([(s.pred_instances.bboxes, s.pred_instances.scores, s.pred_instances.labels)
                            for s in samples], 40)
    result = compare_detections(eager, actual, strict)
    assert result.ok, result.message
    n = int(actual[0][0])
    assert 5 < n and (actual[3][0, n:] == LABEL_PAD).all()
    # the per-level top-k really cut: more pairs than nms_pre above score_thr on the finest level
    above = (torch.sigmoid(raw[0][0]) > 0.3).sum(dim=(1, 2, 3)) if dense is None else (dense > 0).sum()
    assert int(above.max() if dense is None else above) > 20


def test_raw_export_and_the_predictors_nms():
    """postprocess: false: the graph ends after export_decode (per-level candidates included); the torch-free
    predictor's NMS on its outputs (nms_pre 0 in deploy.yaml: nothing more to select) gives the eager
    detections."""
    from oars_deploy.nms import multiclass_nms

    model = _model("retinanet")
    spec = build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), dynamic=True,
                                                        extra={"postprocess": False}))
    assert spec.output_names == ["boxes", "scores"] and spec.postprocess["inside_graph"] == ["decode", "candidates"]
    assert spec.postprocess["nms_pre"] == 0 and spec.outputs[1]["shape"][-1] == 3
    images = _images(2, seed=2)
    with torch.no_grad():  # the graph's ONNX form is the decode part of the NMS graph exported above
        ort_boxes, ort_scores = (t.numpy() for t in spec.module(images))
        samples = model.predict(images, rescale=False)
    pp = spec.postprocess
    per_image = [multiclass_nms(ort_boxes[i], ort_scores[i], pp["score_thr"], pp["iou_threshold"], pp["max_per_img"],
                                pp["nms_pre"]) for i in range(len(samples))]
    def proper(b, s, lab):  # OpenCV's NMS drops boxes clipped to zero area (outside the image); torchvision keeps
        keep = (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
        return b[keep], s[keep], lab[keep]

    eager = pad_detections([proper(*(np.asarray(x) for x in (s.pred_instances.bboxes, s.pred_instances.scores,
                                                              s.pred_instances.labels))) for s in samples], 40)
    per_image = [proper(*d) for d in per_image]
    # OpenCV's NMS may also decide a pair at IoU ~ iou_threshold differently from torchvision's (borderline)
    result = compare_detections(eager, pad_detections(per_image, 40), MatchSettings(score_thr=0.3))
    assert result.ok, result.message
    assert result.matched >= 0.9 * int(eager[0].sum()) and int(eager[0].min()) > 5


@pytest.mark.slow  # ~20 s: export, ONNX Runtime self-check, INT8 calibration and its check
def test_int8_export_runs_in_the_python_predictor(tmp_path):
    from export_cases import shrunk_export_case

    from oars.pipelines.export import export_model
    from oars_deploy.predictor import Predictor

    cfg, ckpt = shrunk_export_case(CONFIGS["fcos"], str(tmp_path / "case"), overrides=TEST_CFG)
    cfg.model.test_cfg.nms_pre = 20
    state = torch.load(ckpt, weights_only=True)
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    model.load_state_dict(state["state_dict"])
    state["state_dict"] = _detecting(model).state_dict()
    torch.save(state, ckpt)
    rng = np.random.default_rng(0)
    calib = tmp_path / "calib"
    calib.mkdir()
    images = []
    for i in range(6):
        img = np.full((96, 128, 3), 40 * i, np.uint8) + rng.integers(0, 60, (96, 128, 3), dtype=np.uint8)
        cv2.rectangle(img, (20 + 5 * i, 20), (90, 70), (230, 60, 60), -1)
        cv2.imwrite(str(calib / f"img{i}.png"), img)
        images.append(img)
    out = str(tmp_path / "export")
    result = export_model(cfg, ckpt, out, int8=True, calib_dir=str(calib), overrides=["export.min_agreement=0.5"])
    agreement = result["check"]["precision"]["agreement"]
    print(f"FCOS INT8 vs FP32 graph agreement: {agreement}")
    assert set(agreement) == {"detections_recall", "detections_precision"}
    assert all(v is None or 0.5 <= v <= 1.0 for v in agreement.values())
    predictor = Predictor(out)
    assert predictor.post["inside_graph"] == ["decode", "candidates", "nms"]
    results = predictor.predict(images[:2])
    assert len(results) == 2 and all(set(r) >= {"bboxes", "scores", "labels"} for r in results)
    assert all(len(r["bboxes"]) == len(r["scores"]) for r in results)
