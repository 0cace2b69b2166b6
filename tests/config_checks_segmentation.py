"""Config checks of segmentation configs (used by tests/test_configs.py): shrink the model, run it in all
modes on a synthetic batch, run the pipelines on a synthetic image + label map."""

from __future__ import annotations

import copy

import cv2
import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope
from model_modes import loss_then_predict
from PIL import Image


def shrink_model(model_cfg: dict) -> dict:
    """Depth 18, narrow widths: same architecture, test-sized."""
    cfg = copy.deepcopy(model_cfg)
    backbone = cfg["backbone"]
    if backbone["type"] == "ResNet":
        backbone.update(depth=18, base_channels=8)
    elif backbone["type"] == "UNet":
        backbone.update(base_channels=4)
    elif backbone["type"] == "MobileNetV2":
        backbone.update(widen_factor=0.25)  # 8..80 channels, same groups, strides and dilations
    elif backbone["type"] == "ICNet":
        backbone["backbone_cfg"].update(depth=18, base_channels=8)
        backbone.update(light_branch_middle_channels=8, psp_out_channels=16, out_channels=[8, 16, 16])
        cfg["neck"]["out_channels"] = 8
    elif backbone["type"] == "BiSeNetV2":
        backbone.update(detail_channels=[8, 8, 16], semantic_channels=[4, 8, 8, 16], bga_channels=16)
    heads = [cfg["decode_head"]] + ([] if not cfg.get("auxiliary_head") else
                                    cfg["auxiliary_head"] if isinstance(cfg["auxiliary_head"], list)
                                    else [cfg["auxiliary_head"]])
    for head in heads:
        head["channels"] = 8
        if "c1_channels" in head:
            head["c1_channels"] = 4
    if cfg.get("test_cfg", {}).get("mode") == "slide":
        cfg["test_cfg"].update(crop_size=[48, 48], stride=[32, 32])
    return cfg


def _batch(num_classes: int, size=(64, 64), n=2):
    from mmengine.structures import PixelData

    from segmentation.structures import SegDataSample

    g = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 256, (3, *size), dtype=torch.uint8, generator=g) for _ in range(n)]
    samples = []
    for _ in range(n):
        s = SegDataSample(metainfo={"img_shape": size, "ori_shape": size})
        s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, *size), generator=g))
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def run_all_modes(model, num_classes):
    preds, logits = loss_then_predict(model, lambda: _batch(num_classes))
    assert preds[0].pred_sem_seg.data.shape == (1, 64, 64)
    assert logits.shape == (2, num_classes, 64, 64)


def run_pipelines(cfg, tmp_path):
    """Each train/test pipeline runs on a synthetic image + label and packs consistent shapes."""
    rng = np.random.default_rng(0)
    img_path, seg_path = tmp_path / "img.png", tmp_path / "seg.png"
    cv2.imwrite(str(img_path), rng.integers(0, 256, (96, 128, 3), dtype=np.uint8))
    Image.fromarray(rng.integers(0, cfg.model.num_classes, (96, 128), dtype=np.uint8)).save(seg_path)
    for split in ("train_dataloader", "test_dataloader"):
        ds = cfg[split]["dataset"]
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(copy.deepcopy(ds["pipeline"]))
        np.random.seed(0)
        out = pipeline({"img_path": str(img_path), "seg_map_path": str(seg_path), "reduce_zero_label":
                        ds.get("reduce_zero_label", False), "num_classes": cfg.model.num_classes,
                        "ignore_index": 255})
        packed = pseudo_collate([out])
        sample = packed["data_samples"][0]
        assert packed["inputs"][0].dtype == torch.uint8
        if split == "train_dataloader":
            assert sample.gt_sem_seg.data.shape[-2:] == packed["inputs"][0].shape[-2:]
        else:
            assert sample.gt_sem_seg.data.shape[-2:] == (96, 128)  # the metric runs at original size
