"""YOLOv3 export: decode + NMS (ONNX NonMaxSuppression) + fixed-size top-M in the graph, dynamic batch, parity
with the PyTorch module and with ``model.predict``; the raw (decode-only) export; the set comparison can fail."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from detection.export import (
    LABEL_PAD,
    DetectionCompare,
    MatchSettings,
    YOLOv3WithNMS,
    build_export_spec,
    compare_detections,
    pad_detections,
)
from detection.export.nms_op import onnx_nms
from detection.registry import MODELS
from oars.config import ConfigError
from oars.export.errors import ExportCheckError
from oars.export.spec import ExportOptions

HW = 64
TEST_CFG = dict(score_thr=0.2, conf_thr=0.2, nms=dict(iou_threshold=0.3), max_per_img=60, nms_pre=60)
CFG = dict(
    type="YOLOv3",
    num_classes=3,
    backbone=dict(type="ResNet", depth=18, base_channels=8, out_indices=(1, 2, 3)),
    neck=dict(type="YOLOv3Neck"),
    bbox_head=dict(
        type="YOLOv3Head",
        anchors=[[8, 8], [12, 16], [16, 12], [20, 24], [24, 20], [28, 32], [32, 40], [40, 32], [48, 48]],
    ),
)


def _model(test_cfg: dict = TEST_CFG) -> torch.nn.Module:
    """A shrunk YOLOv3 whose prediction convs are perturbed so that it detects: varied objectness and class
    logits, small box offsets (boxes near the anchors), ~100 candidates per image above score_thr."""
    torch.manual_seed(0)
    model = MODELS.build({**copy.deepcopy(CFG), "test_cfg": copy.deepcopy(test_cfg)}).eval()
    g = torch.Generator().manual_seed(0)
    for conv in model.bbox_head.convs_pred:
        w = torch.randn(conv.weight.shape, generator=g).view(3, 8, -1)
        w[:, :2] *= 0.5
        w[:, 2:4] *= 0.05
        w[:, 4:] *= 10.0
        conv.weight.data = w.view(conv.weight.shape)
        conv.bias.data.view(3, 8)[:, 4] = -1.0
    return model


def _images(batch: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, HW, HW, generator=torch.Generator().manual_seed(seed))


def _export(module: torch.nn.Module, spec, path: str) -> ort.InferenceSession:
    torch.onnx.export(
        module,
        (_images(1, 0),),
        path,
        dynamo=True,
        input_names=["image"],
        output_names=spec.output_names,
        dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},),
        custom_translation_table=spec.custom_translation_table,
        opset_version=17,
        verbose=False,
    )
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _predict(model: torch.nn.Module, images: torch.Tensor, m: int) -> tuple[np.ndarray, ...]:
    with torch.no_grad():
        samples = model.predict(images, rescale=False)
    inst = [(s.pred_instances.bboxes, s.pred_instances.scores, s.pred_instances.labels) for s in samples]
    return pad_detections(inst, m)


@pytest.fixture(scope="module")
def nms_export(tmp_path_factory):
    model = _model()
    spec = build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), dynamic=True))
    path = str(tmp_path_factory.mktemp("yolo") / "model.onnx")
    return model, spec, path, _export(spec.module, spec, path)


def test_spec_describes_fixed_outputs_and_postprocess():
    model = _model()
    spec = build_export_spec(model, None, ExportOptions(input_shape=(2, 3, HW, HW)))
    assert spec.input_name == "image" and spec.output_names == ["num_dets", "boxes", "scores", "labels"]
    assert [(o["name"], o["shape"], o["dtype"]) for o in spec.outputs] == [
        ("num_dets", [2], "int64"),
        ("boxes", [2, 60, 4], "float32"),
        ("scores", [2, 60], "float32"),
        ("labels", [2, 60], "int64"),
    ]
    pp = spec.postprocess
    assert pp["type"] == "detection" and pp["inside_graph"] == ["decode", "nms"] and pp["boxes_in"] == "input_pixels"
    assert (pp["score_thr"], pp["iou_threshold"], pp["max_per_img"], pp["label_pad"]) == (0.2, 0.3, 60, LABEL_PAD)
    dyn = build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), dynamic=True))
    assert dyn.outputs[1]["shape"] == [-1, 60, 4]

    raw = build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), extra={"postprocess": False}))
    n = (2 * 2 + 4 * 4 + 8 * 8) * 3
    assert [(o["name"], o["shape"]) for o in raw.outputs] == [("boxes", [1, n, 4]), ("scores", [1, n, 3])]
    assert raw.postprocess["inside_graph"] == ["decode"] and raw.postprocess["nms_pre"] == 60
    assert raw.compare is None


def test_onnx_graph_has_one_nms_op_and_static_shapes(nms_export):
    _, _, path, _ = nms_export
    graph = onnx.load(path).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("NonMaxSuppression") == 1 and not {"Loop", "If", "Scan"} & set(ops)
    dims = {o.name: [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim] for o in graph.output}
    assert dims["boxes"][1:] == [60, 4] and dims["scores"][1:] == [60] and dims["labels"][1:] == [60]
    assert all(isinstance(dims[n][0], str) for n in dims)  # the batch axis is dynamic


@pytest.mark.parametrize("batch", [1, 3])
def test_onnx_matches_module_and_predict(nms_export, batch):
    model, spec, _, session = nms_export
    images = _images(batch, seed=batch)
    with torch.no_grad():
        expected = [t.numpy() for t in spec.module(images)]
    actual = session.run(None, {"image": images.numpy()})
    assert [a.dtype for a in actual] == [np.int64, np.float32, np.float32, np.int64]
    assert [a.shape for a in actual] == [(batch,), (batch, 60, 4), (batch, 60), (batch, 60)]
    strict = MatchSettings(score_thr=0.2, iou_threshold=0.3, explain_borderline=False)
    result = compare_detections(expected, actual, strict)
    assert result.ok, result.message
    assert result.matched == int(actual[0].sum()) and result.max_box_diff < 1e-3
    # NMS and nms_pre are active: fewer detections than rows, padding as documented.
    assert (0 < actual[0]).all() and (actual[0] < 60).all()
    n = int(actual[0][0])
    assert (actual[3][0, n:] == LABEL_PAD).all() and (actual[2][0, n:] == 0).all()
    # The detector's own eager path (multiclass_nms with torchvision batched_nms) gives the same sets.
    result = compare_detections(_predict(model, images, 60), actual, strict)
    assert result.ok, result.message
    diffs = spec.compare(dict(zip(spec.output_names, expected)), dict(zip(spec.output_names, actual)), None)
    assert set(diffs) == set(spec.output_names) and max(diffs.values()) < 1e-3


@pytest.mark.parametrize(
    "test_cfg",
    [
        dict(TEST_CFG, max_per_img=40, nms_pre=80),  # top-M cut
        dict(TEST_CFG, nms_pre=0, max_per_img=0, score_thr=0.25),  # no pre-selection, keep all
        dict(TEST_CFG, nms=dict(iou_threshold=0.45), conf_thr=0.6),  # conf_thr filters objectness
    ],
)
def test_module_matches_predict_for_other_thresholds(test_cfg):
    model = _model(test_cfg)
    module = YOLOv3WithNMS(model, num_priors=(2 * 2 + 4 * 4 + 8 * 8) * 3).eval()
    images = _images(2, seed=7)
    with torch.no_grad():
        out = [t.numpy() for t in module(images)]
    m = module.max_per_img
    settings = MatchSettings(score_thr=test_cfg["score_thr"], explain_borderline=False)
    result = compare_detections(_predict(model, images, m), out, settings)
    assert result.ok, result.message
    assert out[0].min() > 0


def test_raw_export_parity(tmp_path):
    model = _model()
    spec = build_export_spec(
        model, None, ExportOptions(input_shape=(1, 3, HW, HW), dynamic=True, extra={"postprocess": False})
    )
    session = _export(spec.module, spec, str(tmp_path / "raw.onnx"))
    images = _images(3, seed=3)
    with torch.no_grad():
        boxes, scores = spec.module(images)
        decoded_boxes, decoded_scores = model.bbox_head.decode(model(images))
    ort_boxes, ort_scores = session.run(None, {"image": images.numpy()})
    np.testing.assert_allclose(ort_boxes, boxes.numpy(), atol=1e-3, rtol=1e-5)
    np.testing.assert_allclose(ort_scores, scores.numpy(), atol=1e-5, rtol=1e-5)
    # = head.decode with the boxes clipped to the input and scores zeroed below conf_thr, as predict does.
    torch.testing.assert_close(boxes, decoded_boxes.clamp(0, HW))
    assert torch.equal(scores == 0, (decoded_scores == 0) | (scores == 0)) and (scores == 0).any()
    kept = scores > 0
    torch.testing.assert_close(scores[kept], decoded_scores[kept])


def _perturbed(outs, how: str):
    num, boxes, scores, labels = (o.copy() for o in outs)
    if how == "shift":
        boxes[0, 0] += 3.0
    elif how == "label":
        labels[0, 0] = (labels[0, 0] + 1) % 3
    elif how == "score":
        scores[0, 1] += 0.01
    elif how == "drop":  # lose the best detection: shift the rest up, one more padding row
        n = num[0]
        for a, pad in ((boxes, 0), (scores, 0), (labels, LABEL_PAD)):
            a[0, : n - 1] = a[0, 1:n]
            a[0, n - 1] = pad
        num[0] -= 1
    elif how == "padding":
        labels[0, -1] = 0
    return num, boxes, scores, labels


@pytest.mark.parametrize("how", ["shift", "label", "score", "drop", "padding"])
def test_compare_fails_on_a_wrong_output(nms_export, how):
    _, spec, _, session = nms_export
    images = _images(1, seed=1)
    actual = session.run(None, {"image": images.numpy()})
    assert compare_detections(actual, actual, spec.compare.settings).ok
    result = compare_detections(actual, _perturbed(actual, how), spec.compare.settings)
    assert not result.ok
    assert ("padding" in result.message) if how == "padding" else ("no partner" in result.message)
    names = spec.output_names
    with pytest.raises(ExportCheckError, match="detections differ"):
        spec.compare(dict(zip(names, actual)), dict(zip(names, _perturbed(actual, how))), None)


def test_compare_tolerates_only_borderline_misses():
    settings = MatchSettings(score_thr=0.2, iou_threshold=0.5)
    boxes = np.array([[[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50], [0, 0, 0, 0]]], dtype=np.float32)
    full = (np.array([3]), boxes, np.array([[0.9, 0.5, 0.2000005, 0]], np.float32), np.array([[0, 1, 2, -1]]))
    # The last detection sits on score_thr: ORT may drop it where PyTorch keeps it.
    fewer = (np.array([2]), boxes.copy(), full[2].copy(), full[3].copy())
    fewer[1][0, 2], fewer[2][0, 2], fewer[3][0, 2] = 0, 0, -1
    assert compare_detections(full, fewer, settings).ok
    # The same miss well above the threshold is an error.
    high = (full[0], full[1], np.array([[0.9, 0.5, 0.3, 0]], np.float32), full[3])
    high_fewer = (fewer[0], fewer[1], np.array([[0.9, 0.5, 0, 0]], np.float32), fewer[3])
    result = compare_detections(high, high_fewer, settings)
    assert not result.ok and "label 2 score 0.300000" in result.message


def test_eager_nms_op_has_onnx_semantics():
    """oars::nms eagerly == ONNX Runtime's NonMaxSuppression (per class, score > thr, IoU > thr, per-class cap)."""
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(2, 50, 2, generator=g) * 40
    boxes = torch.cat([xy, xy + 5 + torch.rand(2, 50, 2, generator=g) * 20], -1)
    scores = torch.rand(2, 3, 50, generator=g)
    node = onnx.helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr"], ["selected"])
    inputs = [
        onnx.helper.make_tensor_value_info("boxes", onnx.TensorProto.FLOAT, [2, 50, 4]),
        onnx.helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [2, 3, 50]),
    ]
    for cap, iou, thr in ((5, 0.3, 0.2), (100, 0.5, 0.0), (100, 0.7, 0.9)):
        inits = [
            onnx.helper.make_tensor("max", onnx.TensorProto.INT64, [1], [cap]),
            onnx.helper.make_tensor("iou", onnx.TensorProto.FLOAT, [1], [iou]),
            onnx.helper.make_tensor("thr", onnx.TensorProto.FLOAT, [1], [thr]),
        ]
        out = onnx.helper.make_tensor_value_info("selected", onnx.TensorProto.INT64, [None, 3])
        graph = onnx.helper.make_graph([node], "nms", inputs, [out], initializer=inits)
        proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = session.run(None, {"boxes": boxes.numpy(), "scores": scores.numpy()})[0]
        got = onnx_nms(boxes, scores, cap, iou, thr).numpy()
        assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, ref.tolist()))
        assert len(got) > 0


def test_errors_name_the_bad_setting():
    model = _model()
    with pytest.raises(ConfigError, match="export.postprocess"):
        build_export_spec(model, None, ExportOptions(input_shape=(1, 3, HW, HW), extra={"postprocess": "yes"}))
    with pytest.raises(ConfigError, match=r"export.input_shape=\[1, 3, 60, 64\].*stride 32"):
        build_export_spec(model, None, ExportOptions(input_shape=(1, 3, 60, 64)))
    assert isinstance(build_export_spec(model, None, ExportOptions((1, 3, HW, HW))).compare, DetectionCompare)


def test_predict_clips_like_the_graph_on_a_letterboxed_input():
    """Image content 40 px high in a 64 px input (keep-ratio resize + pad): model.predict and the exported module
    clip boxes to the same region (the input) before NMS, so they give the same detections."""
    from detection.structures import DetDataSample

    model = _model()
    module = YOLOv3WithNMS(model, num_priors=(2 * 2 + 4 * 4 + 8 * 8) * 3).eval()
    images = _images(2, seed=3)
    meta = dict(ori_shape=(40, HW), img_shape=(40, HW), batch_input_shape=(HW, HW), scale_factor=(1.0, 1.0))
    with torch.no_grad():
        out = [t.numpy() for t in module(images)]
        samples = model.predict(images, [DetDataSample(metainfo=dict(meta)) for _ in range(2)], rescale=False)
    inst = [(s.pred_instances.bboxes, s.pred_instances.scores, s.pred_instances.labels) for s in samples]
    settings = MatchSettings(score_thr=TEST_CFG["score_thr"], explain_borderline=False)
    result = compare_detections(pad_detections(inst, module.max_per_img), out, settings)
    assert result.ok, result.message
    assert (out[1][..., 3] > 41).any()  # boxes do reach into the padding: the case that used to differ
