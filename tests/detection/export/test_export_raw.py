"""``export.postprocess: raw``: the one-stage detectors' graphs end at the heads' raw maps (convolutions and
elementwise ops only) and the runtime's NumPy decoder (``oars_deploy.predictors.detection_boxes.decode``, driven by
deploy.yaml's ``postprocess.decode``) + its NMS give the detections of the default graph (decode + NMS inside) run
in ONNX Runtime, for each head type: YOLOv3 (objectness, YOLO box coder, anchor-major priors), RetinaNet (delta
coder, per-level top-k), FCOS (distances, centerness) and SSD300 (softmax with background, per-class top-k).

Models: the shrunk random-weight cases of the neighbouring tests (heads redrawn so that they detect).
"""

from __future__ import annotations

import copy
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope

from detection.export import (
    MatchSettings,
    build_export_spec,
    compare_detections,
    detection_agreement,
    pad_detections,
    raw_layout,
)
from oars.config import ConfigError, load_config
from oars.export.formats.operators import lacking_operators
from oars.export.spec import ExportOptions
from oars_deploy.errors import DeployError
from oars_deploy.predictors.detection_boxes.postprocess import detection

HW = 64
SSD300 = os.path.join(ROOT, "configs/detection/ssd/ssd300_vgg16_coco.yaml")


def _yolov3() -> torch.nn.Module:
    from test_export_yolov3 import _model

    return _model()


def _dense(kind: str):
    def build() -> torch.nn.Module:
        from test_export_dense import _model

        return _model(kind)
    return build


def _ssd300() -> torch.nn.Module:
    import config_checks_detection

    cfg = load_config(SSD300, ["model.test_cfg.score_thr=0.02", "model.test_cfg.max_per_img=50",
                               "model.test_cfg.topk_candidates=20"])
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("detection"):
        return MODELS.build(copy.deepcopy(config_checks_detection.shrink_model(cfg.model))).eval()


CASES = {"yolov3": _yolov3, "retinanet": _dense("retinanet"), "fcos": _dense("fcos"), "ssd300": _ssd300}


def _export(spec, path: str) -> ort.InferenceSession:
    example = torch.zeros(1, 3, HW, HW)
    torch.onnx.export(spec.module, (example,), path, dynamo=True, input_names=["image"],
                      output_names=spec.output_names, dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},),
                      custom_translation_table=spec.custom_translation_table, opset_version=17, verbose=False)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _images(batch: int, seed: int, scale: float) -> np.ndarray:
    return (torch.randn(batch, 3, HW, HW, generator=torch.Generator().manual_seed(seed)) * scale).numpy()


@pytest.mark.slow  # ~30-60 s per head: two dynamo exports
@pytest.mark.parametrize("kind", list(CASES))
def test_raw_maps_decoded_by_the_runtime_equal_the_graph_with_nms(kind, tmp_path):
    model = CASES[kind]()
    options = dict(input_shape=(1, 3, HW, HW), dynamic=True)
    full = build_export_spec(model, None, ExportOptions(**options))
    raw = build_export_spec(model, None, ExportOptions(**options, extra={"postprocess": "raw"}))
    post = raw.postprocess
    assert post["inside_graph"] == [] and "decode" in post and raw.predictor == "detection_boxes"
    assert [o["name"] for o in raw.outputs] == raw.output_names and all(len(o["shape"]) == 4 for o in raw.outputs)
    full_session = _export(full, str(tmp_path / "full.onnx"))
    raw_session = _export(raw, str(tmp_path / "raw.onnx"))
    ops = {n.op_type for n in onnx.load(str(tmp_path / "raw.onnx")).graph.node}
    assert lacking_operators("ncnn", ops) == [] and not ops & {"TopK", "Where", "Greater", "NonMaxSuppression"}
    images = _images(3, seed=5, scale=60.0 if kind == "ssd300" else 1.0)
    expected = full_session.run(None, {"image": images})
    maps = dict(zip(raw.output_names, raw_session.run(None, {"image": images})))
    metas = [dict(scale_factor=(1.0, 1.0), ori_shape=(HW, HW), img_shape=(HW, HW))] * len(images)
    found = detection(maps, metas, post)
    actual = pad_detections([(d["bboxes"], d["scores"], d["labels"]) for d in found], expected[1].shape[1])
    settings = MatchSettings(score_thr=post["score_thr"], iou_threshold=post["iou_threshold"])
    result = compare_detections(expected, actual, settings)  # the export's parity rule
    assert result.ok, result.message
    assert int(expected[0].min()) > 3 and result.matched >= 0.95 * int(expected[0].sum())
    assert result.max_box_diff < 1e-2 and result.max_score_diff < 1e-4
    names = ("num_dets", "boxes", "scores", "labels")
    agreement = detection_agreement(dict(zip(names, expected)), dict(zip(names, actual)))
    assert min(agreement.values()) >= 0.99, agreement


def test_raw_layout_describes_priors_and_refuses_what_it_cannot_hold():
    model = _dense("fcos")()
    layout = raw_layout(model, (HW, HW))
    dec = layout.decode
    assert dec["box_coder"] == {"type": "distance"} and dec["score"]["combine"] == "centerness"
    assert dec["candidates"] == {"per_level_top_k": 20} and dec["input_hw"] == [HW, HW]
    assert [lv["stride"] for lv in dec["levels"]][:2] == [[8.0, 8.0], [16.0, 16.0]]
    assert layout.names[:2] == ["cls_0", "cls_1"] and "ctr_0" in layout.names
    # a wrong postprocess value: one message naming the key and the accepted values
    with pytest.raises(ConfigError, match=r"export.postprocess must be true, false or raw.*'decoded'"):
        build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), extra={"postprocess": "decoded"}))


def test_decoder_names_what_deploy_yaml_lacks():
    post = {"num_classes": 3, "score_thr": 0.3, "iou_threshold": 0.5, "inside_graph": [],
            "decode": {"prior_order": "position_major", "levels": [{"stride": [8, 8], "base_anchors": [[0, 0, 8, 8]]}],
                       "fields": {"scores": {"outputs": ["cls_0"], "channels": 3},
                                  "boxes": {"outputs": ["reg_0"], "channels": 4}},
                       "input_hw": [16, 16], "box_coder": {"type": "distance"}, "score": {"activation": "sigmoid"}}}
    maps = {"cls_0": np.zeros((1, 3, 2, 2), np.float32), "reg_0": np.full((1, 4, 2, 2), 0.25, np.float32)}
    meta = [dict(scale_factor=(1.0, 1.0), ori_shape=(16, 16), img_shape=(16, 16))]
    assert len(detection(maps, meta, post)[0]["scores"]) == 12  # sigmoid(0) = 0.5 > 0.3: 4 points x 3 classes
    for broken, match in ((dict(box_coder={"type": "ltrb"}), r"box_coder.type='ltrb' is not supported"),
                          (dict(fields={"boxes": {"outputs": ["reg_0"], "channels": 4}}), r"fields lacks 'scores'"),
                          (dict(levels=[{"stride": [8, 8], "base_anchors": [[0, 0, 8, 8]] * 2}]), "holds 4 priors")):
        bad = copy.deepcopy(post)
        bad["decode"].update(broken)
        with pytest.raises(DeployError, match=match):
            detection(maps, meta, bad)
    with pytest.raises(DeployError, match="names output 'reg_0'"):
        detection({"cls_0": maps["cls_0"]}, meta, post)
