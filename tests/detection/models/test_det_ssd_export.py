"""SSD / SSDLite export: decode + per-class candidates + NMS in the graph (``DenseWithNMS`` over
``SSDHead.export_decode``) gives the eager ``predict``'s detections, in PyTorch and through ONNX Runtime and the
Python predictor (oars-infer's)."""

from __future__ import annotations

import copy
import json
import os

import cv2
import numpy as np
import torch
from demo_utils import ROOT
from export_cases import shrunk_export_case
from mmengine.registry import MODELS, DefaultScope

from detection.export import DenseWithNMS, MatchSettings, compare_detections, pad_detections
from detection.structures import DetDataSample
from oars.config import load_config
from oars.pipelines.export import export_model
from oars_deploy.cli import run as infer_main
from oars_deploy.predictor import Predictor

SSD300 = os.path.join(ROOT, "configs/detection/ssd/ssd300_vgg16_coco.yaml")
SSDLITE = os.path.join(ROOT, "configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml")
TEST_CFG = ["model.test_cfg.score_thr=0.02", "model.test_cfg.max_per_img=50"]


def _eager(model: torch.nn.Module, images: torch.Tensor, m: int) -> tuple[np.ndarray, ...]:
    with torch.no_grad():
        samples = model.predict(images, rescale=False)
    inst = [(s.pred_instances.bboxes, s.pred_instances.scores, s.pred_instances.labels) for s in samples]
    return pad_detections(inst, m)


def test_dense_with_nms_module_equals_predict(tmp_path):
    """The graph's module (per-class candidates zeroed in export_decode, ONNX-style NMS, top-M) in PyTorch equals
    predict (batched_nms over the candidates), for SSD300's layout and three test settings."""
    import config_checks_detection

    for overrides in (TEST_CFG, ["model.test_cfg.topk_candidates=5", "model.test_cfg.nms.iou_threshold=0.3"],
                      ["model.test_cfg.nms_pre=30"]):
        cfg = load_config(SSD300, overrides)
        torch.manual_seed(0)
        with DefaultScope.overwrite_default_scope("detection"):
            model = MODELS.build(copy.deepcopy(config_checks_detection.shrink_model(cfg.model))).eval()
        images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(3)) * 60
        with torch.no_grad():
            priors = sum(t.shape[-2] * t.shape[-1] for t in model(images, mode="tensor")[:6]) * 4  # >= N
            module = DenseWithNMS(model, num_priors=priors).eval()
            out = [t.numpy() for t in module(images)]
        m = module.max_per_img
        result = compare_detections(_eager(model, images, m), out,
                                    MatchSettings(score_thr=cfg.model.test_cfg.score_thr, explain_borderline=False))
        assert result.ok, result.message
        assert out[0].min() > 0


def test_ssdlite_exports_and_the_python_predictor_matches_eager(tmp_path):
    cfg, ckpt = shrunk_export_case(SSDLITE, str(tmp_path), overrides=TEST_CFG)
    saved = torch.load(ckpt, weights_only=True)
    for key, value in saved["state_dict"].items():  # a peaked softmax (random heads give ~1/81 everywhere)
        if key.startswith("bbox_head.cls_convs.") and key.endswith(".1.weight"):
            value.mul_(30.0)
    torch.save(saved, ckpt)
    # no self-check (tests/export/test_export_configs.py runs it on this config): the predictor is compared below
    result = export_model(cfg, ckpt, str(tmp_path / "export"), check=False)
    predictor = Predictor(os.path.dirname(result["deploy"]))
    assert "nms" in predictor.post["inside_graph"]
    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)  # BGR, the exported size
    got = predictor.predict([image])[0]
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    model.load_state_dict(torch.load(ckpt, weights_only=True)["state_dict"])
    sample = DetDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), scale_factor=(1.0, 1.0)))
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": [torch.from_numpy(image).permute(2, 0, 1)], "data_samples": [sample]})
        ref = model(**data, mode="predict")[0].pred_instances
    m = 50
    expected = pad_detections([(ref.bboxes, ref.scores, ref.labels)], m)
    actual = pad_detections([(torch.from_numpy(got["bboxes"]), torch.from_numpy(got["scores"]),
                              torch.from_numpy(got["labels"]))], m)
    outcome = compare_detections(expected, actual, MatchSettings(score_thr=0.02))
    assert outcome.ok, outcome.message
    assert outcome.matched > 10 and outcome.max_box_diff < 1e-3
    # oars-infer (the CLI over the same predictor) writes them
    os.makedirs(tmp_path / "images")
    cv2.imwrite(str(tmp_path / "images" / "img.png"), image)
    infer_main(["--model-dir", os.path.dirname(result["deploy"]), "-i", str(tmp_path / "images"),
                "-o", str(tmp_path / "out")])
    with open(tmp_path / "out" / "detections.json") as f:
        assert len(json.load(f)[0]["detections"]) == len(got["bboxes"])
