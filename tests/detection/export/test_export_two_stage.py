"""Two-stage detector export (Faster / Mask / Cascade R-CNN): the export module is ``model.predict``'s own
implementation (row for row; its static RoI pooling equals the extractor to the bit), ONNX Runtime equals the graph
in PyTorch (batch 1 and a dynamic batch of 2, detections matched as sets, masks too), and the deploy predictor on
an exported Mask R-CNN folder gives ``test_step``'s boxes and masks.

The models are the configs' architectures shrunk (tests/config_checks_detection.py ``shrink_model``) at 128x128
with decisive random weights (two_stage_cases.py). Exports take 10-40 s each (torch.onnx dynamo), so the ONNX
tests are ``slow`` (Faster, Mask and box-only Cascade R-CNN; Cascade Mask R-CNN's graph is Cascade R-CNN's plus
Mask R-CNN's mask branch averaged over the stages, checked eagerly against predict); the graph's logic is checked
eagerly in the fast tests.
"""

from __future__ import annotations

import copy
import json
import os

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from mmengine.dataset import pseudo_collate
from two_stage_cases import SIZE, build_case, save_checkpoint

from detection.export import (
    LABEL_PAD,
    MatchSettings,
    TwoStageExport,
    build_export_spec,
    compare_detections,
    compare_masks,
    pad_detections,
)
from detection.export.nms_op import ONNX_TRANSLATIONS
from detection.models.roi_heads import SingleRoIExtractor, paste_masks
from detection.models.roi_heads.two_stage_infer import pool_rois
from detection.structures import DetDataSample
from oars.config import ConfigError
from oars.export.errors import ExportCheckError
from oars.export.spec import ExportOptions

CASES = ("faster", "mask", "cascade", "cascade_mask", "mask_torchvision")


def _images(batch: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(seed))


def _samples(batch: int) -> list[DetDataSample]:
    meta = dict(img_shape=(SIZE, SIZE), batch_input_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE), scale_factor=(1, 1))
    return [DetDataSample(metainfo=dict(meta)) for _ in range(batch)]


def _strict(module: TwoStageExport) -> MatchSettings:
    return MatchSettings(score_thr=module.score_thr, iou_threshold=module.iou_threshold, explain_borderline=False)


@pytest.fixture(scope="module", params=CASES)
def case(request):
    cfg, model = build_case(request.param)
    return request.param, cfg, model, TwoStageExport(model, (SIZE, SIZE)).eval()


# ----------------------------------------------------------------------------- the graph, eagerly
def test_export_module_is_eager_predict(case):
    """One implementation: the export module (static=True) gives model.predict's detections row for row (the
    eager pooling and mask-row savings change no number), padded to fixed shapes."""
    name, _, model, module = case
    images = _images(2, seed=1)
    with torch.no_grad():
        outs = module(images)
        preds = [s.pred_instances for s in model.predict(images, _samples(2), rescale=False)]
    m = module.max_per_img
    assert outs[1].shape == (2, m, 4) and outs[0].dtype == torch.int64 and outs[3].dtype == torch.int64
    assert (outs[0] < m).any(), "every image filled all rows: the NMS / padding path is not exercised"
    assert int(outs[0].sum()) > 10
    for img, pred in enumerate(preds):
        n = int(outs[0][img])
        assert torch.equal(pred.bboxes, outs[1][img, :n]) and torch.equal(pred.scores, outs[2][img, :n])
        assert torch.equal(pred.labels, outs[3][img, :n]) and (outs[3][img, n:] == LABEL_PAD).all()
        assert (outs[2][img, n:] == 0).all() and (outs[1][img, n:] == 0).all()
        assert (pred.scores[:-1] >= pred.scores[1:]).all()
    if name in ("faster", "cascade"):
        assert len(outs) == 4
        return
    probs = outs[4]
    assert probs.shape == (2, m, 28, 28) and (probs[0, int(outs[0][0]):] == 0).all()
    mode = module.mask_heads[-1].paste_mode
    for img, pred in enumerate(preds):  # the graph's probabilities pasted as predict pastes them = its masks
        n = int(outs[0][img])
        assert torch.equal(paste_masks(probs[img, :n], outs[1][img, :n], (SIZE, SIZE), mode=mode), pred.masks)


def test_static_and_eager_forms_agree(case):
    """``predict_padded`` with static=True (per-level RoiAlign + where, masks of every row) and static=False (the
    extractor's level loop, masks of the detections) on the same proposals."""
    _, _, model, module = case
    images = _images(2, seed=4)
    hw = torch.tensor([[float(SIZE), float(SIZE)]])
    with torch.no_grad():
        feats = model.extract_feat(images)
        proposals, valid = module._proposals(feats, hw)
        valid[:, ::3] = False  # padding rows take no part
        eager = model.roi_head.predict_padded(feats, proposals, valid, hw, static=False)
        static = model.roi_head.predict_padded(feats, proposals, valid, hw, static=True)
    assert int(eager[0].sum()) > 10
    for a, b in zip(eager[:4], static[:4]):
        assert torch.equal(a, b)
    if len(eager) == 5:
        torch.testing.assert_close(eager[4], static[4], rtol=0, atol=1e-6)


@pytest.mark.parametrize("mapping, aligned, sampling", [("mmdet", True, 0), ("torchvision", False, 2)])
def test_static_roi_pooling_equals_extractor(mapping, aligned, sampling):
    """Every level pooled with the others' RoIs emptied, then selected per RoI = the extractor's level loop."""
    extractor = SingleRoIExtractor(8, [4, 8, 16, 32], roi_layer=dict(type="RoIAlign", output_size=7,
                                   sampling_ratio=sampling, aligned=aligned), level_mapping=mapping,
                                   finest_scale=16, canonical_scale=64)  # scales that spread 1-250 px RoIs
    g = torch.Generator().manual_seed(0)
    feats = [torch.randn(2, 8, 256 // s, 256 // s, generator=g) for s in (4, 8, 16, 32)]
    xy = torch.rand(60, 2, generator=g) * 200
    boxes = torch.cat([xy, xy + torch.rand(60, 2, generator=g) ** 2 * 250 + 1], dim=1).clamp(max=256)
    batch_idx = torch.randint(0, 2, (60,), generator=g)
    expected = extractor(feats, torch.cat([batch_idx[:, None].float(), boxes], dim=1))
    assert len(set(extractor.map_roi_levels(boxes).tolist())) == 4  # all levels used
    torch.testing.assert_close(pool_rois(extractor, feats, boxes, batch_idx, static=False), expected, rtol=0, atol=0)
    torch.testing.assert_close(pool_rois(extractor, feats, boxes, batch_idx, static=True), expected, rtol=0, atol=0)


def test_roi_align_op_exports_to_onnx_roialign(tmp_path):
    """oars::roi_align -> ONNX RoiAlign: ONNX Runtime equals torchvision's roi_align (aligned and not, adaptive
    and fixed sampling, empty boxes)."""

    class Pool(torch.nn.Module):
        def forward(self, feat, boxes, idx):
            a = torch.ops.oars.roi_align(feat, boxes, idx, 7, 7, 0.25, 0, True)
            b = torch.ops.oars.roi_align(feat, boxes, idx, 5, 4, 0.5, 2, False)
            return a, b

    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 4, 32, 32, generator=g)
    xy = torch.rand(20, 2, generator=g) * 80
    boxes = torch.cat([xy, xy + torch.rand(20, 2, generator=g) * 50], dim=1)
    boxes[:3] = 0  # the empty boxes static pooling gives other levels' RoIs
    idx = torch.randint(0, 2, (20,), generator=g)
    path = str(tmp_path / "roi.onnx")
    torch.onnx.export(Pool().eval(), (feat, boxes, idx), path, dynamo=True, custom_translation_table=ONNX_TRANSLATIONS,
                      opset_version=17, verbose=False)
    assert [n.op_type for n in onnx.load(path).graph.node].count("RoiAlign") == 2
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, dict(zip(names, (feat.numpy(), boxes.numpy(), idx.numpy()))))
    for a, b in zip(got, Pool()(feat, boxes, idx)):
        np.testing.assert_allclose(a, b.numpy(), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- spec
def test_spec_outputs_and_postprocess():
    cfg, model = build_case("mask")
    spec = build_export_spec(model, cfg, ExportOptions(input_shape=(1, 3, SIZE, SIZE), dynamic=True))
    m = spec.module.max_per_img
    assert spec.output_names == ["num_dets", "boxes", "scores", "labels", "masks"]
    assert [(o["name"], o["shape"], o["dtype"]) for o in spec.outputs] == [
        ("num_dets", [-1], "int64"), ("boxes", [-1, m, 4], "float32"), ("scores", [-1, m], "float32"),
        ("labels", [-1, m], "int64"), ("masks", [-1, m, 28, 28], "float32")]
    pp = spec.postprocess
    assert pp["inside_graph"] == ["rpn", "roi_head", "nms", "mask_head"] and pp["boxes_in"] == "input_pixels"
    assert pp["masks"] == {"output": "masks", "size": [28, 28], "threshold": 0.5, "paste": "mmdet"}
    assert (pp["score_thr"], pp["max_per_img"], pp["label_pad"]) == (0.1, 40, LABEL_PAD)
    assert spec.output_atol == {"masks": 1e-3} and set(spec.custom_translation_table) == set(ONNX_TRANSLATIONS)


@pytest.mark.parametrize("change, message", [
    (dict(opset=15), "opset >= 16"),
    (dict(extra={"postprocess": False}), "postprocess: false"),
    (dict(input_shape=(1, 3, SIZE + 8, SIZE)), "pad_size_divisor 32"),
    ("roipool", "RoIPool"),
])
def test_spec_errors(change, message):
    cfg, model = build_case("faster")
    if change == "roipool":  # an extractor whose layer has no static ONNX form here
        model.roi_head.bbox_roi_extractor.roi_layer["type"] = "RoIPool"
    options = ExportOptions(input_shape=(1, 3, SIZE, SIZE))
    for key, value in (change.items() if isinstance(change, dict) else ()):
        setattr(options, key, value)
    with pytest.raises(ConfigError, match=message):
        build_export_spec(model, cfg, options)


def test_compare_checks_masks_of_matched_detections():
    """The self-check's comparison pairs detections first (rows may be permuted), then compares their masks."""
    cfg, model = build_case("mask")
    spec = build_export_spec(model, cfg, ExportOptions(input_shape=(1, 3, SIZE, SIZE)))
    with torch.no_grad():
        outs = dict(zip(spec.output_names, [o.numpy() for o in spec.module(_images(1, seed=2))]))
    n = int(outs["num_dets"][0])
    swapped = copy.deepcopy(outs)  # two rows exchanged, masks with them: still the same detections
    for key in ("boxes", "scores", "labels", "masks"):
        swapped[key][0, [0, 1]] = swapped[key][0, [1, 0]]
    swapped["scores"][0, 0] = swapped["scores"][0, 1]  # keep the rows sorted (equal scores may swap)
    diffs = spec.compare(outs, swapped, None)
    assert diffs["masks"] == compare_masks(outs["masks"], swapped["masks"], [(0, 1, 0)]).max_abs_diff
    wrong = copy.deepcopy(outs)
    wrong["masks"][0, n - 1] = 1.0 - wrong["masks"][0, n - 1]
    with pytest.raises(ExportCheckError, match="masks of matched detections"):
        spec.compare(outs, wrong, None)


# ----------------------------------------------------------------------------- ONNX (slow)
def _export(case_name: str, folder: str):
    """export_model (the tools/export.py path, with its self-check incl. a dynamic batch) of a case; returns
    (cfg, model, spec, session, export dir)."""
    from oars.pipelines.export import export_model

    cfg, model = build_case(case_name)
    ckpt = save_checkpoint(model, folder)
    out = os.path.join(folder, "export")
    result = export_model(cfg, ckpt, out, dynamic=True)
    assert result["check"]["dynamic_batch"]["batch"] == 3
    spec = build_export_spec(model, cfg, ExportOptions(input_shape=(1, 3, SIZE, SIZE), dynamic=True))
    session = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    return cfg, model, spec, session, out


def _check_onnx(spec, session, batches=(1, 2)) -> None:
    for batch in batches:
        images = _images(batch, seed=10 + batch)
        with torch.no_grad():
            expected = dict(zip(spec.output_names, [o.numpy() for o in spec.module(images)]))
        actual = dict(zip(spec.output_names, session.run(None, {"image": images.numpy()})))
        assert [actual[n].shape for n in spec.output_names] == [expected[n].shape for n in spec.output_names]
        result = compare_detections(expected, actual, _strict(spec.module))
        assert result.ok, result.message
        assert result.matched == int(actual["num_dets"].sum()) > 0 and result.max_box_diff < 1e-3
        if "masks" in expected:
            masks = compare_masks(expected["masks"], actual["masks"], result.pairs)
            assert masks.min_iou > 0.98 and masks.max_abs_diff < 1e-3


@pytest.fixture(scope="module")
def mask_export(tmp_path_factory):
    return _export("mask", str(tmp_path_factory.mktemp("mask_rcnn")))


@pytest.mark.slow
def test_mask_rcnn_onnx_graph_and_parity(mask_export):
    _, _, spec, session, out = mask_export
    graph = onnx.load(os.path.join(out, "model.onnx")).graph
    ops = [n.op_type for n in graph.node]
    # RPN NMS + per-class NMS; 4 levels x (box + mask extractor) RoiAligns; no control flow.
    assert ops.count("NonMaxSuppression") == 2 and ops.count("RoiAlign") == 8
    assert not {"Loop", "If", "Scan"} & set(ops)
    dims = {o.name: [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim] for o in graph.output}
    m = spec.module.max_per_img
    assert dims["masks"][1:] == [m, 28, 28] and dims["boxes"][1:] == [m, 4]
    assert all(isinstance(d[0], str) for d in dims.values())  # dynamic batch
    _check_onnx(spec, session)


@pytest.mark.slow
def test_predictor_on_exported_mask_rcnn(mask_export, tmp_path):
    """oars_deploy's Predictor and CLI on the folder: test_step's boxes and masks in original pixels (an image
    the test Resize halves, so no letterbox padding), masks drawn and written as RLE."""
    from pycocotools import mask as mask_utils

    from oars.inference import build_test_pipeline
    from oars_deploy.cli import run
    from oars_deploy.predictor import Predictor

    cfg, model, _, _, out = mask_export
    img = cv2.resize(cv2.imread(_demo_image(tmp_path)), (2 * SIZE, 2 * SIZE))
    path = str(tmp_path / "images" / "a.png")
    os.makedirs(os.path.dirname(path))
    cv2.imwrite(path, img)
    predictor = Predictor(out)
    got = predictor.predict([img])[0]
    pipeline = build_test_pipeline(cfg, drop=["LoadAnnotations"])
    with torch.no_grad():
        ref = model.test_step(pseudo_collate([pipeline({"img_path": path})]))[0].pred_instances
    assert got["masks"].shape == (len(got["scores"]), 2 * SIZE, 2 * SIZE) and got["masks"].dtype == bool
    ref_t = pad_detections([(ref.bboxes, ref.scores, ref.labels)], len(ref.scores) + 1)
    got_t = pad_detections([(got["bboxes"], got["scores"], got["labels"])], len(ref.scores) + 1)
    result = compare_detections(ref_t, got_t, MatchSettings(score_thr=0.1, iou_threshold=0.5, box_atol=2e-3))
    assert result.ok and result.matched == len(ref.scores) > 0, result.message
    ref_masks = ref.masks.numpy()[np.argsort(-ref.scores.numpy(), kind="stable")]
    got_masks = got["masks"][np.argsort(-got["scores"], kind="stable")]
    for _, i, j in result.pairs:
        union = (ref_masks[i] | got_masks[j]).sum()
        assert union == 0 or (ref_masks[i] & got_masks[j]).sum() / union > 0.98

    run(["--model-dir", out, "-i", os.path.dirname(path), "-o", str(tmp_path / "vis")])
    records = json.load(open(tmp_path / "vis" / "detections.json"))
    dets = records[0]["detections"]
    assert len(dets) == len(got["scores"]) and os.path.isfile(tmp_path / "vis" / "a_vis.png")
    for det, mask in zip(dets, got["masks"]):
        rle = mask_utils.frPyObjects(det["segmentation"], *det["segmentation"]["size"])
        assert np.array_equal(mask_utils.decode(rle).astype(bool), mask)
    from oars_deploy.records import read_results

    lines = read_results(str(tmp_path / "vis"))  # results.jsonl: the instance_masks record, the same detections
    assert [(r["predictor"], r["input"], r["image_size"]) for r in lines] == [("instance_masks", path,
                                                                              [2 * SIZE, 2 * SIZE])]
    assert lines[0]["detections"] == dets


def _demo_image(tmp_path) -> str:
    """A picture with shapes (the demo data's kind of image)."""
    from oars.export.check import synthetic_image

    path = str(tmp_path / "demo.png")
    cv2.imwrite(path, synthetic_image(SIZE, SIZE, seed=3))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["faster", "cascade"])
def test_faster_and_cascade_onnx_parity(name, tmp_path):
    _, _, spec, session, out = _export(name, str(tmp_path))
    ops = [n.op_type for n in onnx.load(os.path.join(out, "model.onnx")).graph.node]
    stages = 3 if name == "cascade" else 1
    assert ops.count("NonMaxSuppression") == 2 and ops.count("RoiAlign") == 4 * stages
    assert "masks" not in spec.output_names
    _check_onnx(spec, session)
