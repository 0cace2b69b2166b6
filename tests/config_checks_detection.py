"""Config checks of detection configs (used by tests/test_configs.py): shrink the model, run it in all
modes on a synthetic batch, run the pipelines on a synthetic image with boxes (one of them ignored)."""

from __future__ import annotations

import copy

import cv2
import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData
from model_modes import loss_then_predict

SIZE = 64


def shrink_model(model_cfg: dict) -> dict:
    """Depth 18 / narrow backbones, one 64-px training scale: same architecture, test-sized."""
    cfg = copy.deepcopy(model_cfg)
    backbone = cfg["backbone"]
    if backbone["type"] == "ResNet":
        backbone.update(depth=18, base_channels=8)
    elif backbone["type"] == "SENet":  # 2 groups x 4 channels: widths 8 .. 64, DCN stages kept
        backbone.update(depth=50, groups=2, group_width=4)
    elif backbone["type"] == "DarkNet":
        backbone.update(base_channels=4)
    elif backbone["type"] in ("MobileNetV3", "MobileNetV1"):
        backbone.update(widen_factor=0.25)
    elif backbone["type"] in ("SSDVGG", "SSDLiteMobileNetV3"):
        _shrink_ssd(cfg)
    for aug in cfg.get("data_preprocessor", {}).get("batch_augments") or []:
        if aug.get("type") == "BatchRandomResize":
            aug["sizes"] = [SIZE]
    if "roi_head" in cfg:
        _shrink_two_stage(cfg)
    if cfg.get("bbox_head", {}).get("type") in DENSE_FPN_HEADS:
        _shrink_dense_fpn(cfg)
    return cfg


DENSE_FPN_HEADS = ("RetinaHead", "FCOSHead")


def _shrink_dense_fpn(cfg: dict) -> None:
    """RetinaNet / FCOS: a 16-channel FPN and towers (GN with 4 groups), few candidates per level."""
    cfg["neck"]["out_channels"] = 16
    head = cfg["bbox_head"]
    if isinstance(head.get("norm"), dict) and head["norm"].get("type") == "GN":
        head["norm"] = {**head["norm"], "num_groups": 4}
    if cfg.get("test_cfg", {}).get("nms_pre"):
        cfg["test_cfg"]["nms_pre"] = 100


def _shrink_ssd(cfg: dict) -> None:
    """SSD / SSDLite at 1/8 / 1/4 width. SSD300's unpadded 3x3 extra convs need a ~300-px input: padded here, so the
    shrunk model runs (and exports) at 64 px (the full-size layout is checked against torchvision's)."""
    backbone = cfg["backbone"]
    backbone.update(widen_factor=0.125 if backbone["type"] == "SSDVGG" else 0.25)
    if backbone["type"] == "SSDVGG":
        # [mid, out, kernel, stride, padding]: padding k // 2 keeps a 1x1 map alive through a k x k conv
        backbone["extra_settings"] = [[*s[:4], max(s[4], s[2] // 2)] for s in backbone["extra_settings"]]


def _shrink_two_stage(cfg: dict) -> None:
    """Narrow FPN / RoI heads and few proposals, so a two-stage detector runs in a second."""
    if cfg.get("neck"):
        cfg["neck"]["out_channels"] = 16
        _fewer_groups(cfg["neck"])
    roi = cfg["roi_head"]
    shared = roi.get("shared_head")
    if shared:  # C4: res5 of the shrunk backbone (ResNet-18 at 1/8 width)
        shared.update(depth=18, base_channels=8)
    for key in ("bbox_roi_extractor", "mask_roi_extractor"):
        if roi.get(key) and "out_channels" in roi[key]:
            roi[key]["out_channels"] = 16 if cfg.get("neck") else 32
    heads = roi["bbox_head"] if isinstance(roi["bbox_head"], list) else [roi["bbox_head"]]
    for head in heads:
        if "fc_out_channels" in head:
            head["fc_out_channels"] = 32
        if "conv_out_channels" in head:
            head["conv_out_channels"] = 16
        _fewer_groups(head)
    masks = roi.get("mask_head") or []
    for head in masks if isinstance(masks, list) else [masks]:
        head.update(num_convs=1, conv_out_channels=16)
    for section in ("train_cfg", "test_cfg"):
        for key in ("rpn_proposal", "rpn"):
            part = cfg.get(section, {}).get(key)
            if part and "nms_pre" in part:
                part.update(nms_pre=100, max_per_img=50)


def _fewer_groups(part: dict) -> None:
    """GroupNorm at 4 groups, so the 16-channel shrunk layers divide."""
    if isinstance(part.get("norm"), dict) and part["norm"].get("type") == "GN":
        part["norm"] = {**part["norm"], "num_groups": 4}


def _box_masks(boxes: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 [N, size, size] masks filling each box (what a mask head trains on)."""
    ys = torch.arange(size)[None, :, None]
    xs = torch.arange(size)[None, None, :]
    b = boxes[:, :, None, None]
    return ((xs >= b[:, 0]) & (xs < b[:, 2]) & (ys >= b[:, 1]) & (ys < b[:, 3])).to(torch.uint8)


def _batch(num_classes: int, n: int = 2) -> dict:
    from detection.structures import DetDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for i in range(n):
        inputs.append(torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8, generator=g))
        s = DetDataSample(metainfo={"img_shape": (SIZE, SIZE), "ori_shape": (SIZE * 2, SIZE * 2),
                                    "scale_factor": (0.5, 0.5)})
        boxes = torch.tensor([[4.0, 6.0, 30.0, 40.0], [20.0, 10.0, 60.0, 50.0]])[: i + 1]
        s.gt_instances = InstanceData(bboxes=boxes, labels=torch.arange(len(boxes)) % num_classes,
                                      masks=_box_masks(boxes, SIZE))
        s.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long))
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def run_all_modes(model, num_classes: int) -> None:
    preds, raw = loss_then_predict(model, lambda: _batch(num_classes))
    pred = preds[0].pred_instances
    assert pred.bboxes.shape[1] == 4 and len(pred.scores) == len(pred.labels) == len(pred.bboxes)
    if len(pred.bboxes):
        assert pred.bboxes.max() <= SIZE * 2 and int(pred.labels.max()) < num_classes
    if hasattr(model, "roi_head"):  # two-stage: RPN outputs (one per level) then the RoI head's
        assert len(raw) >= 3 and all(torch.isfinite(t).all() for t in raw if isinstance(t, torch.Tensor))
        if getattr(model, "with_mask", False):
            assert pred.masks.dtype == torch.bool and pred.masks.shape[1:] == (SIZE * 2, SIZE * 2)
            assert len(pred.masks) == len(pred.bboxes)
    elif type(model.bbox_head).__name__ in DENSE_FPN_HEADS:  # per output kind (cls, box[, centerness]) per level
        levels = len(model.bbox_head.strides)
        assert len(raw) in (2, 3) and all(len(kind) == levels for kind in raw)
        assert all(torch.isfinite(t).all() for kind in raw for t in kind)
    elif type(model.bbox_head).__name__ == "SSDHead":  # class logits per level, then box deltas per level
        assert len(raw) == 2 * model.bbox_head.num_levels and all(torch.isfinite(t).all() for t in raw)
    else:
        assert len(raw) == len(model.bbox_head.anchor_masks)


def _pipelines(ds: dict) -> list[list[dict]]:
    """The pipelines a dataset config runs (wrappers and concatenations unrolled)."""
    if "datasets" in ds:
        return [p for sub in ds["datasets"] for p in _pipelines(sub)]
    if "dataset" in ds and "pipeline" not in ds:  # RepeatDataset / ClassBalancedDataset: the inner one's
        return _pipelines(ds["dataset"])
    if "dataset" in ds:  # a mixing wrapper: the inner loading pipeline, then the wrapper's
        return [list(ds["dataset"].get("pipeline", [])) + list(ds.get("pipeline", []))]
    return [list(ds["pipeline"])]


def run_pipelines(cfg, tmp_path) -> None:
    """Each train/test pipeline runs on a synthetic 96x128 image with two boxes and one ignored box, and
    packs boxes that lie inside the packed image."""
    rng = np.random.default_rng(0)
    img_path = tmp_path / "img.png"
    cv2.imwrite(str(img_path), rng.integers(0, 256, (96, 128, 3), dtype=np.uint8))
    instances = [{"bbox": [10.0, 12.0, 60.0, 70.0], "bbox_label": 0, "ignore_flag": 0},
                 {"bbox": [70.0, 20.0, 120.0, 90.0], "bbox_label": cfg.model.num_classes - 1, "ignore_flag": 0},
                 {"bbox": [30.0, 30.0, 50.0, 50.0], "bbox_label": 0, "ignore_flag": 1}]
    for inst in instances:  # a polygon per instance: the box's outline (used by pipelines that load masks)
        x1, y1, x2, y2 = inst["bbox"]
        inst["mask"] = [[x1, y1, x2, y1, x2, y2, x1, y2]]
    for split in ("train_dataloader", "test_dataloader"):
        for steps in _pipelines(cfg[split]["dataset"]):
            with DefaultScope.overwrite_default_scope(cfg.default_scope):
                pipeline = Compose(copy.deepcopy(steps))
            np.random.seed(0)
            results = {"img_path": str(img_path), "img_id": 0, "height": 96, "width": 128,
                       "instances": copy.deepcopy(instances)}
            if any(hasattr(t, "get_indexes") for t in pipeline.transforms):
                results["mix_results"] = [
                    Compose([t for t in pipeline.transforms if not hasattr(t, "get_indexes")][:2])(
                        {"img_path": str(img_path), "img_id": 1, "height": 96, "width": 128,
                         "instances": copy.deepcopy(instances)}) for _ in range(3)]
            out = pipeline(results)
            packed = pseudo_collate([out])
            image, sample = packed["inputs"][0], packed["data_samples"][0]
            assert image.dtype == torch.uint8 and image.shape[0] == 3
            boxes = sample.gt_instances.bboxes
            h, w = image.shape[-2:]
            assert boxes.dtype == torch.float32 and sample.gt_instances.labels.dtype == torch.int64
            if len(boxes):
                assert boxes[:, 0].min() >= 0 and boxes[:, 2].max() <= w + 1e-3 and boxes[:, 3].max() <= h + 1e-3
            if split == "test_dataloader":
                assert len(boxes) == 2 and len(sample.ignored_instances.bboxes) == 1
                assert sample.metainfo["ori_shape"] == (96, 128)
