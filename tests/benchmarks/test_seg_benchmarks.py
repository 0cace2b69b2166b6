"""The segmentation benchmark scripts: the model table measures a real (small) export, counts parameters as a hand
count does and skips families that are missing; train_step's label batch and infer_latency's ICNet ratio."""

from __future__ import annotations

import argparse
import os
import statistics

import pytest
import torch
from torch import nn

from benchmarks import infer_latency, seg_model_table, train_step
from benchmarks.common import ROOT

DEMO_CFG = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")


@pytest.mark.slow
def test_seg_model_table_measures_an_export(tmp_path):
    # every family the table lists is on main
    missing = [cfg for _, cfg in seg_model_table.FAMILIES.values() if not os.path.isfile(os.path.join(ROOT, cfg))]
    assert not missing
    # the demo U-Net (no auxiliary head) exported at 32x64 (the export self-check is tested in tests/export)
    cfg = seg_model_table.load_sized_config(DEMO_CFG, (32, 64))
    assert list(cfg.export.input_shape) == [1, 3, 32, 64]
    resizes = [s for s in cfg.test_dataloader.dataset.pipeline if s["type"] == "Resize"]
    assert resizes and all(list(s["scale"]) == [64, 32] for s in resizes)  # (W, H)
    r = seg_model_table.measure(DEMO_CFG, (32, 64), str(tmp_path), warmup=0, repeats=2, check=False)
    model = seg_model_table.build_model(cfg)
    assert r["params"] == r["params_train"] == sum(p.numel() for p in model.parameters())
    assert len(r["times"]) == 2 and min(r["times"]) > 0
    assert r["median_ms"] == pytest.approx(statistics.median(r["times"]) * 1e3)
    assert r["input"] == "1x3x32x64" and r["onnx_mb"] > 0
    table = seg_model_table.markdown([("U-Net demo", DEMO_CFG, r)]).splitlines()
    assert len(table) == 3 and table[2].startswith("| U-Net demo | unet_demo_shapes.yaml |")

    # a family whose classes are not registered (yet) is skipped with its name, as is a missing config
    cfg.model.backbone.type = "NoSuchBackbone"
    with pytest.raises(seg_model_table.Skipped, match="NoSuchBackbone"):
        seg_model_table.build_model(cfg)
    with pytest.raises(seg_model_table.Skipped, match="not in this checkout"):
        seg_model_table.load_sized_config(str(tmp_path / "nope.yaml"), (32, 64))


def test_seg_benchmark_helpers():
    # parameter counts: deployed vs with the auxiliary head, against a hand count
    model = nn.Module()
    model.backbone = nn.Conv2d(3, 4, 3)  # 3*4*9 + 4 = 112
    model.auxiliary_head = nn.Linear(4, 2)  # 4*2 + 2 = 10
    assert seg_model_table.parameter_counts(model) == (112, 122)
    assert seg_model_table.parse_models("icnet_r18, bisenetv2") == ["icnet_r18", "bisenetv2"]
    with pytest.raises(argparse.ArgumentTypeError, match="icnet_r34.*expected.*icnet_r18"):
        seg_model_table.parse_models("icnet_r34")
    with pytest.raises(argparse.ArgumentTypeError, match="HxW"):
        seg_model_table.parse_size("512")
    assert train_step.parse_size("1024x512") == (1024, 512) and train_step.parse_size("320") == (320, 320)
    with pytest.raises(argparse.ArgumentTypeError):
        train_step.parse_size("axb")

    # train_step's segmentation batch: uint8 images and label maps of the asked size, classes or ignore only
    batch = train_step.make_seg_batch(24, 40, 2, num_classes=5)
    assert [tuple(x.shape) for x in batch["inputs"]] == [(3, 24, 40)] * 2
    labels = torch.stack([s.gt_sem_seg.data for s in batch["data_samples"]])
    assert labels.dtype == torch.uint8 and labels.shape == (2, 1, 24, 40)
    values = set(labels.unique().tolist())
    assert values <= {0, 1, 2, 3, 4, 255} and 255 in values and len(values) > 3

    # infer_latency: ICNet / DeepLabV3-R50 per (input, batch, engine) both ran at, nothing when one is missing
    rows = [("ICNet", "512x1024", 1, "onnxruntime fp32", 30.0, 0, 0, 0, "icnet"),
            ("DeepLabV3", "512x1024", 1, "onnxruntime fp32", 120.0, 0, 0, 0, "deeplabv3_city"),
            ("ICNet", "512x1024", 1, "pytorch eager", 50.0, 0, 0, 0, "icnet")]
    lines = []
    infer_latency.print_ratio(rows, out=lines.append)
    assert len(lines) == 2 and "0.250 (30.0 / 120.0 ms)" in lines[1]
    lines.clear()
    infer_latency.print_ratio(rows[:1], out=lines.append)
    assert lines == []
