"""The ``torchvision`` presets: our FasterRCNN / MaskRCNN R50-FPN with a converted torchvision state dict give
torchvision's boxes, scores, labels and masks on the same images; and the pieces that make it so
(TorchvisionRCNNPreprocessor, TorchvisionBoxCoder, torchvision mask pasting, the converter, the preset values).

torchvision's weights cannot be downloaded here, so the models are torchvision's own constructors with
``weights=None, weights_backbone=None`` and a fixed seed; the batch norms are set to the statistics of the test
images (realistic activations instead of exploding ones) and turned into ``FrozenBatchNorm2d(eps=0)``, which is
what torchvision builds for its COCO_V1 checkpoints; the classifier weights are scaled so that random heads make
confident detections above the 0.05 threshold.
"""

from __future__ import annotations

import copy
import os
import runpy
import sys

import pytest
import torch
import torchvision
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from mmengine.structures import InstanceData
from roi_head_cases import bbox_head_args, mask_head_args
from torch import nn
from torchvision.models.detection._utils import BoxCoder
from torchvision.models.detection.roi_heads import paste_masks_in_image
from torchvision.ops import box_iou
from torchvision.ops.misc import FrozenBatchNorm2d

from detection.models.convert_torchvision import (
    COCO80_CATEGORY_IDS,
    COCO_UNUSED_IDS,
    ConversionError,
    coco_category_ids,
    rcnn_from_torchvision,
    resolve_class_ids,
)
from detection.models.roi_heads import FCNMaskHead
from detection.models.roi_heads.mask_paste import paste_masks
from detection.models.roi_heads.standard_roi_head import check_test_cfg
from detection.models.roi_heads.two_stage_infer import detect_padded
from detection.models.torchvision_box_coder import TorchvisionBoxCoder
from detection.models.torchvision_preprocessor import TorchvisionRCNNPreprocessor
from detection.structures import DetDataSample
from oars.config import load_config

PRESETS = {
    "faster": os.path.join(ROOT, "configs/_base_/models/faster_rcnn_r50_fpn_torchvision.yaml"),
    "mask": os.path.join(ROOT, "configs/_base_/models/mask_rcnn_r50_fpn_torchvision.yaml"),
}
MIN_SIZE = 256  # torchvision's 800 at test size; both sides get the same value
SHAPES = [(240, 317), (200, 290)]  # resized to 256x338 and 256x371, padded together to 256x384


def _images(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in SHAPES[:n]]  # RGB


def _to_frozen(module: nn.Module) -> None:
    """Every BatchNorm2d -> FrozenBatchNorm2d(eps=0) with its statistics (torchvision's COCO_V1 models)."""
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            frozen = FrozenBatchNorm2d(child.num_features, eps=0.0)
            frozen.weight.copy_(child.weight.detach())
            frozen.bias.copy_(child.bias.detach())
            frozen.running_mean.copy_(child.running_mean)
            frozen.running_var.copy_(child.running_var + 1e-5)
            setattr(module, name, frozen)
        else:
            _to_frozen(child)


def _torchvision_model(kind: str, images: list[torch.Tensor], **kwargs) -> nn.Module:
    torch.manual_seed(0)
    build = (torchvision.models.detection.maskrcnn_resnet50_fpn if kind == "mask"
             else torchvision.models.detection.fasterrcnn_resnet50_fpn)
    tv = build(weights=None, weights_backbone=None, min_size=MIN_SIZE, **kwargs)
    for m in tv.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = 1.0  # running statistics := those of the images
    tv.eval()
    tv.backbone.body.train()
    with torch.no_grad():
        batch, _ = tv.transform([img.float() / 255 for img in images])
        tv.backbone.body(batch.tensors)
    tv.eval()
    _to_frozen(tv)
    with torch.no_grad():
        tv.roi_heads.box_predictor.cls_score.weight.mul_(20.0)
    return tv


def _our_model(kind: str, state: dict, overrides: list[str] = ()) -> nn.Module:
    cfg = load_config(PRESETS[kind], [f"model.data_preprocessor.min_size={MIN_SIZE}", *overrides])
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    model.load_state_dict(state, strict=True)
    return model.eval()


def _predict(model: nn.Module, images: list[torch.Tensor]) -> list[InstanceData]:
    samples = [DetDataSample(metainfo=dict(ori_shape=tuple(i.shape[-2:]), img_shape=tuple(i.shape[-2:])))
               for i in images]
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": [i.flip(0) for i in images], "data_samples": samples})  # BGR
        return [s.pred_instances for s in model(**data, mode="predict")]


def _matched(ref: dict, pred: InstanceData, label_offset: int = 1) -> torch.Tensor:
    """Index of our detection for each of torchvision's (same label, highest IoU); checks counts, labels,
    boxes (1e-3 px) and scores."""
    assert len(ref["boxes"]) == len(pred.bboxes) > 10
    iou = box_iou(ref["boxes"], pred.bboxes)
    iou[ref["labels"][:, None] != (pred.labels + label_offset)[None, :]] = -1
    best, idx = iou.max(dim=1)
    assert best.min() > 0.999 and len(set(idx.tolist())) == len(idx)
    assert (ref["labels"] == pred.labels[idx] + label_offset).all()
    torch.testing.assert_close(pred.bboxes[idx], ref["boxes"], atol=1e-3, rtol=0)
    torch.testing.assert_close(pred.scores[idx], ref["scores"], atol=1e-5, rtol=0)
    return idx


@pytest.fixture(scope="module")
def faster_pair():
    images = _images(2)
    tv = _torchvision_model("faster", images)
    ours = _our_model("faster", rcnn_from_torchvision(tv.state_dict(), "all"), ["model.num_classes=90"])
    return tv, ours, images


# ----------------------------------------------------------------------------- whole models
@pytest.mark.slow  # ~5 s of CPU (two R50-FPN forwards of two images), more on a shared machine
def test_faster_rcnn_gives_torchvision_detections(faster_pair):
    tv, ours, images = faster_pair
    with torch.no_grad():
        ref = tv([img.float() / 255 for img in images])
    preds = _predict(ours, images)
    for r, p in zip(ref, preds):
        _matched(r, p)


@pytest.mark.slow  # ~7 s of CPU: two models built and run
def test_mask_rcnn_gives_torchvision_masks():
    images = _images(1)
    # 20 detections (both sides) keep the mask head's cost small; the preset's 100 are checked below
    tv = _torchvision_model("mask", images, box_detections_per_img=20)
    state = rcnn_from_torchvision(tv.state_dict(), "all")
    ours = _our_model("mask", state, ["model.num_classes=90", "model.test_cfg.rcnn.max_per_img=20"])
    with torch.no_grad():
        ref = tv([img.float() / 255 for img in images])[0]
    pred = _predict(ours, images)[0]
    idx = _matched(ref, pred)
    ref_masks = ref["masks"][:, 0] >= 0.5  # torchvision returns probabilities; 0.5 is its documented threshold
    assert pred.masks.dtype == torch.bool and pred.masks.shape == ref_masks.shape
    assert ref_masks.sum() > 1000
    mismatch = (pred.masks[idx] != ref_masks).sum(dim=(1, 2)).float()
    assert (mismatch / ref_masks.sum(dim=(1, 2)).clamp(min=1)).max() < 1e-3


def test_preset_values_are_torchvision_defaults(faster_pair):
    tv, ours, _ = faster_pair
    pre = ours.data_preprocessor
    assert pre.min_sizes == [MIN_SIZE] and list(tv.transform.min_size) == [MIN_SIZE]
    assert pre.max_size == tv.transform.max_size == 1333 and pre.size_divisor == tv.transform.size_divisible
    torch.testing.assert_close(pre.mean.flatten(), torch.tensor(tv.transform.image_mean))
    torch.testing.assert_close(pre.std.flatten(), torch.tensor(tv.transform.image_std))
    assert load_config(PRESETS["faster"]).model.data_preprocessor.min_size == 800
    rpn = ours.rpn_head.test_cfg
    assert rpn["nms_pre"] == tv.rpn._pre_nms_top_n["testing"] and rpn["max_per_img"] == tv.rpn.post_nms_top_n()
    assert rpn["nms"]["iou_threshold"] == tv.rpn.nms_thresh and rpn["min_bbox_size"] == tv.rpn.min_size
    assert tv.rpn.score_thresh == 0.0  # ours has no RPN score threshold
    train = load_config(PRESETS["faster"]).model.train_cfg.rpn_proposal
    assert (train.nms_pre, train.max_per_img) == (tv.rpn._pre_nms_top_n["training"], tv.rpn._post_nms_top_n["training"])
    rcnn = ours.roi_head.test_cfg
    assert rcnn["score_thr"] == tv.roi_heads.score_thresh and rcnn["nms"]["iou_threshold"] == tv.roi_heads.nms_thresh
    assert rcnn["max_per_img"] == tv.roi_heads.detections_per_img and rcnn["min_bbox_size"] == 1e-2
    assert ours.rpn_head.bbox_coder.weights == tv.rpn.box_coder.weights
    assert ours.roi_head.bbox_head.bbox_coder.weights == tv.roi_heads.box_coder.weights
    pool, ext = tv.roi_heads.box_roi_pool, ours.roi_head.bbox_roi_extractor
    assert ext.roi_layer["sampling_ratio"] == pool.sampling_ratio and not ext.roi_layer["aligned"]
    assert ext.output_size == tuple(pool.output_size) and ext.level_mapping == "torchvision"
    gen = ours.rpn_head.prior_generator
    assert [s * b for s, b in zip(gen.scales * 5, gen.base_sizes)] == [s[0] for s in tv.rpn.anchor_generator.sizes]
    assert tuple(gen.ratios) == tv.rpn.anchor_generator.aspect_ratios[0]
    assert gen.round_base_anchors and gen.strides_from_image
    frozen = [m for m in ours.backbone.modules() if isinstance(m, FrozenBatchNorm2d)]
    assert len(frozen) == 53 and all(m.eps == 0.0 for m in frozen)


def test_mask_preset_repeats_the_faster_preset():
    faster, mask = load_config(PRESETS["faster"]).model, load_config(PRESETS["mask"]).model
    for key in ("num_classes", "data_preprocessor", "backbone", "neck", "rpn_head"):
        assert mask[key] == faster[key], key
    for key in ("bbox_roi_extractor", "bbox_head"):
        assert mask.roi_head[key] == faster.roi_head[key], key
    assert mask.train_cfg.rpn == faster.train_cfg.rpn and mask.train_cfg.rpn_proposal == faster.train_cfg.rpn_proposal
    assert mask.test_cfg.rpn == faster.test_cfg.rpn
    assert {k: v for k, v in mask.test_cfg.rcnn.items() if k != "mask_thr_binary"} == faster.test_cfg.rcnn
    assert mask.roi_head.mask_head.paste_mode == "torchvision"
    assert mask.roi_head.mask_roi_extractor.roi_layer == dict(type="RoIAlign", output_size=14, sampling_ratio=2,
                                                              aligned=False)


# ----------------------------------------------------------------------------- labels
def test_coco80_conversion_renormalises_over_the_used_categories(faster_pair):
    tv, _, _ = faster_pair
    state = rcnn_from_torchvision(tv.state_dict(), "coco80")
    cfg = load_config(PRESETS["faster"]).model.roi_head.bbox_head
    with DefaultScope.overwrite_default_scope("detection"):
        head = MODELS.build(dict(cfg, num_classes=80, in_channels=256, roi_feat_size=7)).eval()
    head.load_state_dict({k[len("roi_head.bbox_head."):]: v for k, v in state.items()
                          if k.startswith("roi_head.bbox_head.")})
    feats = torch.randn(6, 256, 7, 7, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cls, reg = head(feats)
        tv_cls, tv_reg = tv.roi_heads.box_predictor(tv.roi_heads.box_head(feats))
    ids = torch.tensor(COCO80_CATEGORY_IDS)
    tv_probs = tv_cls.softmax(-1)
    kept = torch.cat([tv_probs[:, ids], tv_probs[:, :1]], dim=1)  # background last
    torch.testing.assert_close(cls.softmax(-1), kept / kept.sum(dim=1, keepdim=True))
    torch.testing.assert_close(reg.view(6, 80, 4), tv_reg.view(6, 91, 4)[:, ids])


def test_coco80_ids_name_cocodataset_classes_in_torchvision_metadata():
    from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights

    from detection.datasets.coco import COCO_CLASSES

    names = FasterRCNN_ResNet50_FPN_Weights.COCO_V1.meta["categories"]  # torchvision label -> name
    assert [i for i, n in enumerate(names) if n == "N/A"] == list(COCO_UNUSED_IDS)
    assert [names[i] for i in COCO80_CATEGORY_IDS] == list(COCO_CLASSES)  # our class k = CocoDataset's class k


def test_class_ids_and_label_mapping():
    assert len(COCO80_CATEGORY_IDS) == 80 and not set(COCO80_CATEGORY_IDS) & set(COCO_UNUSED_IDS)
    assert resolve_class_ids("all", 91) == list(range(1, 91))
    assert resolve_class_ids("coco80", 91)[:12] == [*range(1, 12), 13]  # id 12 is unused
    assert resolve_class_ids([3, 1], 5) == [3, 1]
    labels = torch.tensor([0, 10, 11, 79])
    assert coco_category_ids(labels, "coco80").tolist() == [1, 11, 13, 90]
    assert coco_category_ids(labels, "all").tolist() == [1, 11, 12, 80]
    with pytest.raises(ConversionError, match="coco80.*91-way"):
        resolve_class_ids("coco80", 21)
    with pytest.raises(ConversionError, match="accepted"):
        resolve_class_ids("voc", 91)
    with pytest.raises(ConversionError, match="0 is the background"):
        resolve_class_ids([0, 2], 91)


def test_converter_refuses_other_architectures(faster_pair):
    tv, _, _ = faster_pair
    state = tv.state_dict()
    with pytest.raises(ConversionError, match=r"belong to no part.*keypoint"):
        rcnn_from_torchvision({**state, "roi_heads.keypoint_head.0.weight": torch.zeros(1)})
    with pytest.raises(ConversionError, match=r"no \['roi_heads'\]"):
        rcnn_from_torchvision({k: v for k, v in state.items() if not k.startswith("roi_heads.")})
    with pytest.raises(ConversionError, match="'model' or 'state_dict'"):
        rcnn_from_torchvision({"epoch": 3})
    converted = rcnn_from_torchvision({"model": state, "epoch": 3})  # torchvision's reference-script checkpoint
    assert not any(k.endswith("num_batches_tracked") for k in converted)
    assert converted["roi_head.bbox_head.fc_cls.weight"].shape == (91, 1024)


def test_cli_converts_and_checks_against_a_config(tmp_path, monkeypatch, capsys):
    # a small torchvision Faster R-CNN of the same layout (ResNet-18, 32-channel FPN, 64-d box head): a R50 file
    # would cost seconds to write and read
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead

    torch.manual_seed(0)
    body = torchvision.models.resnet18(norm_layer=FrozenBatchNorm2d)
    backbone = BackboneWithFPN(body, {f"layer{i}": str(i - 1) for i in range(1, 5)}, [64, 128, 256, 512], 32)
    tv = torchvision.models.detection.FasterRCNN(backbone, box_head=TwoMLPHead(32 * 49, 64),
                                                 box_predictor=FastRCNNPredictor(64, 91))
    src, out = tmp_path / "tv.pth", tmp_path / "out" / "oars.pth"
    torch.save(tv.state_dict(), src)
    script = os.path.join(ROOT, "tools", "convert.py")
    small = ["model.backbone.depth=18", "model.neck.out_channels=32", "model.roi_head.bbox_head.fc_out_channels=64",
             "model.roi_head.bbox_roi_extractor.out_channels=32"]
    monkeypatch.setattr(sys, "argv", [script, "torchvision2oars", "--input", str(src), "--out", str(out),
                                      "-c", PRESETS["faster"], "-o", *small])
    runpy.run_path(script, run_name="__main__")
    assert "num_classes 80 (classes=coco80)" in capsys.readouterr().out
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["meta"]["torchvision_labels"] == list(COCO80_CATEGORY_IDS)
    assert ckpt["state_dict"]["roi_head.bbox_head.fc_cls.weight"].shape == (81, 64)

    monkeypatch.setattr(sys, "argv", [script, "torchvision2oars", "--input", str(src), "--out", str(out),
                                      "--overwrite", "--classes", "all", "-c", PRESETS["faster"], "-o", *small])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(script, run_name="__main__")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "model.num_classes=80 but the converted checkpoint has 90" in err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------- pieces
def test_preprocessor_equals_generalized_rcnn_transform():
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    images = _images(2)
    tv = GeneralizedRCNNTransform(MIN_SIZE, 1333, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    ours = TorchvisionRCNNPreprocessor(min_size=MIN_SIZE)
    masks = [torch.zeros(1, h, w, dtype=torch.uint8) for h, w in SHAPES]
    for m in masks:
        m[0, 20:90, 30:120] = 1
    boxes = [torch.tensor([[30.0, 20.0, 120.0, 90.0]]), torch.tensor([[5.5, 7.25, 200.0, 150.0]])]
    for training in (False, True):
        tv.train(training)
        targets = [dict(boxes=b.clone(), labels=torch.ones(1, dtype=torch.long), masks=m.clone())
                   for b, m in zip(boxes, masks)]
        ref, ref_targets = tv([img.float() / 255 for img in images], targets)
        samples = [DetDataSample(metainfo=dict(img_shape=s)) for s in SHAPES]
        for s, b, m in zip(samples, boxes, masks):
            s.gt_instances = InstanceData(bboxes=b.clone(), labels=torch.zeros(1, dtype=torch.long), masks=m.clone())
        out = ours({"inputs": [img.flip(0) for img in images], "data_samples": samples}, training=training)
        assert torch.equal(out["inputs"], ref.tensors)
        for s, size, t, shape in zip(out["data_samples"], ref.image_sizes, ref_targets, SHAPES):
            assert s.img_shape == tuple(size) and s.ori_shape == shape
            assert s.batch_input_shape == tuple(ref.tensors.shape[-2:])
            assert s.scale_factor == pytest.approx((size[1] / shape[1], size[0] / shape[0]))
            if training:
                assert torch.equal(s.gt_instances.bboxes, t["boxes"])
                assert torch.equal(s.gt_instances.masks, t["masks"])


def test_preprocessor_sizes_and_errors():
    pre = TorchvisionRCNNPreprocessor(min_size=[64, 96], max_size=150)
    img = torch.zeros(3, 50, 100, dtype=torch.uint8)
    assert pre({"inputs": [img]})["inputs"].shape[-2:] == (96, 160)  # eval: the last size; 75x150 by max_size
    torch.manual_seed(0)
    seen = {tuple(pre({"inputs": [img]}, training=True)["inputs"].shape[-2:]) for _ in range(12)}
    assert seen == {(64, 128), (96, 160)}  # training: either size
    with pytest.raises(ValueError, match="min_size"):
        TorchvisionRCNNPreprocessor(min_size=[])
    with pytest.raises(ValueError, match="max_size"):
        TorchvisionRCNNPreprocessor(max_size=0)


def test_box_coder_equals_torchvision_box_coder():
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(50, 2, generator=g) * 300
    priors = torch.cat([xy, xy + torch.rand(50, 2, generator=g) * 200 + 1], dim=1)
    deltas = torch.randn(50, 3 * 4, generator=g) * 3
    deltas[0, 2] = -40.0  # torchvision clamps dw only from above: this box gets zero width
    for weights in ((1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)):
        tv, ours = BoxCoder(weights), TorchvisionBoxCoder(weights)
        ref = tv.decode_single(deltas, priors).view(50, 3, 4)
        got = ours.decode(priors[:, None], deltas.view(50, 3, 4))
        assert torch.equal(got, ref)
        gt = priors.flip(0) + 3
        torch.testing.assert_close(ours.encode(priors, gt), tv.encode_single(gt, priors))
    assert ours.target_stds == (0.1, 0.1, 0.2, 0.2)
    with pytest.raises(ValueError, match="weights"):
        TorchvisionBoxCoder((1.0, 0.0, 1.0, 1.0))


def test_torchvision_paste_mode_equals_paste_masks_in_image():
    g = torch.Generator().manual_seed(0)
    h, w = 120, 170
    probs = torch.rand(40, 28, 28, generator=g)
    xy = torch.rand(40, 2, generator=g) * torch.tensor([w, h]) - 10
    boxes = torch.cat([xy, xy + torch.rand(40, 2, generator=g) * 90 + 0.2], dim=1)
    boxes[0] = torch.tensor([10.0, 10.0, 10.2, 50.0])  # thinner than a pixel
    boxes[1] = torch.tensor([-30.0, -30.0, 5.0, 1.0])  # mostly outside
    ref = paste_masks_in_image(probs[:, None], boxes, (h, w))[:, 0]
    got = paste_masks(probs, boxes, (h, w), threshold=None, mode="torchvision")
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    assert torch.equal(paste_masks(probs, boxes, (h, w), mode="torchvision"), ref >= 0.5)
    with pytest.raises(ValueError, match="mode='detectron'"):
        paste_masks(probs, boxes, (h, w), mode="detectron")
    with pytest.raises(ValueError, match="paste_mode"):
        FCNMaskHead(**mask_head_args(num_classes=2, in_channels=4, paste_mode="cv2"))


def test_min_bbox_size_drops_tiny_detections():
    """test_cfg.rcnn.min_bbox_size (torchvision's remove_small_boxes before NMS), through the one inference path:
    three RoIs, zero deltas, one confident class; the 0.005 px wide box is dropped."""
    head = _hand_roi_head(dict(score_thr=0.05, nms=dict(iou_threshold=0.5), max_per_img=100, nms_pre=-1,
                               min_bbox_size=1e-2))
    rois = torch.tensor([[[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 5.005, 20.0], [30.0, 30.0, 40.0, 40.0]]])
    feats = [torch.zeros(1, 4, 16, 16)]
    with torch.no_grad():
        num, boxes, _, labels = detect_padded(head, feats, rois, torch.ones(1, 3, dtype=torch.bool),
                                              torch.tensor([[64.0, 64.0]]), static=False)
    assert int(num[0]) == 2 and labels[0, :2].tolist() == [0, 0]
    assert boxes[0, :2].tolist() == [[0.0, 0.0, 10.0, 10.0], [30.0, 30.0, 40.0, 40.0]]
    cfg = dict(score_thr=0.05, nms=dict(iou_threshold=0.5), max_per_img=100, nms_pre=-1)
    assert check_test_cfg("x", cfg, with_mask=False)["min_bbox_size"] == 0.0  # absent: off
    with pytest.raises(ValueError, match="min_bbox_size"):
        check_test_cfg("x", {**cfg, "min_bbox_size": -1}, with_mask=False)


def _hand_roi_head(test_cfg: dict) -> nn.Module:
    """A one-class StandardRoIHead on one 4-channel level whose box head ignores its input: class 0 wins, zero
    deltas."""
    with DefaultScope.overwrite_default_scope("detection"):
        head = MODELS.build(dict(
            type="StandardRoIHead", num_classes=1, in_channels=4, strides=[4], test_cfg=test_cfg,
            bbox_roi_extractor=dict(type="SingleRoIExtractor", featmap_strides=[4],
                                    roi_layer=dict(type="RoIAlign", output_size=2, sampling_ratio=0, aligned=True)),
            bbox_head=dict(bbox_head_args(roi_feat_size=2), type="BBoxHead"))).eval()
    with torch.no_grad():
        for layer in (head.bbox_head.fc_cls, head.bbox_head.fc_reg):
            layer.weight.zero_()
            layer.bias.zero_()
        head.bbox_head.fc_cls.bias[0] = 10.0
    return head


def test_rpn_top_k_survives_saturated_scores(faster_pair):
    _, ours, _ = faster_pair
    head = ours.rpn_head
    # logits far above sigmoid's float32 saturation (~17): every score is 1.0, the order must follow the logits
    cls = [torch.linspace(20, 60, 3 * h * h).view(1, 3, h, h) for h in (8, 4, 2, 1, 1)]
    reg = [torch.zeros(1, 12, h, h) for h in (8, 4, 2, 1, 1)]
    boxes, scores, _ = head._topk_decode(cls, reg, 5, torch.tensor([[32.0, 32.0]]), (32, 32))
    assert (scores == 1.0).all()
    sizes = [(h, h) for h in (8, 4, 2, 1, 1)]
    anchors = head.prior_generator.grid_priors(sizes, image_size=(32, 32))[0].clamp(0, 32)
    best = cls[0].permute(0, 2, 3, 1).reshape(-1).topk(5).indices
    torch.testing.assert_close(boxes[0, :5], anchors[best])


def test_preprocessor_leaves_the_callers_annotations_alone():
    pre = TorchvisionRCNNPreprocessor(min_size=100)
    boxes = torch.tensor([[1.0, 2.0, 30.0, 40.0]])
    sample = DetDataSample(metainfo=dict(img_shape=(50, 60)))
    gt = InstanceData(bboxes=boxes.clone(), labels=torch.zeros(1, dtype=torch.long))
    sample.gt_instances = gt
    out = pre({"inputs": [torch.zeros(3, 50, 60, dtype=torch.uint8)], "data_samples": [sample]}, training=True)
    torch.testing.assert_close(out["data_samples"][0].gt_instances.bboxes, boxes * 2)
    assert out["data_samples"][0].gt_instances.labels is gt.labels  # the other fields are kept
    assert torch.equal(gt.bboxes, boxes)  # the InstanceData the caller holds is unchanged
