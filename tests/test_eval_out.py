"""tools/eval.py --out: the raw predictions of a test run written as the task's JSON records (detection: the COCO
results format that pycocotools' loadRes reads, with the dataset's category ids); an existing file is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from demo_utils import DEMO_CFG, DET_DEMO_CFG, ROOT, demo_overrides, det_demo_overrides, random_checkpoint

from oars.engine.entry import evaluate
from oars.errors import OarsError


def test_detection_records_map_labels_to_category_ids_and_xywh():
    from mmengine.structures import InstanceData

    from detection.result_records import result_records
    from detection.structures import DetDataSample

    sample = DetDataSample(metainfo={"img_id": 7, "img_path": "a.png", "ori_shape": (40, 50)})
    sample.pred_instances = InstanceData(bboxes=torch.tensor([[1.0, 2.0, 11.0, 22.0], [0.0, 0.0, 5.0, 5.0]]),
                                         scores=torch.tensor([0.9, 0.25]), labels=torch.tensor([2, 0]))
    recs = result_records(sample, {"classes": ("a", "b", "c"), "cat_ids": [5, 9, 11]})
    assert recs == [{"image_id": 7, "category_id": 11, "bbox": [1.0, 2.0, 10.0, 20.0], "score": 0.9},
                    {"image_id": 7, "category_id": 5, "bbox": [0.0, 0.0, 5.0, 5.0], "score": 0.25}]
    sample.pred_instances.labels = torch.tensor([3, 0])  # a class the dataset does not have
    with pytest.raises(OarsError, match="outside the dataset's 3 categories"):
        result_records(sample, {"classes": ("a", "b", "c"), "cat_ids": [5, 9, 11]})


def test_detection_out_loads_with_pycocotools(demo_data, tmp_path):
    """As a user runs it: relative paths from the work folder, an output folder that exists."""
    from pycocotools.coco import COCO

    opts = det_demo_overrides(demo_data, **{"model.backbone.base_channels": 4})
    ckpt = random_checkpoint(DET_DEMO_CFG, opts, tmp_path)
    (tmp_path / "results").mkdir()
    cmd = [sys.executable, os.path.join(ROOT, "tools/eval.py"), "-c", DET_DEMO_CFG, "-w", "model.pth",
           "--work-dir", "work", "--out", "results/dets.json", "-o", *opts]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "predictions written to results/dets.json" in proc.stdout
    with open(tmp_path / "results/dets.json") as f:
        dets = json.load(f)
    gt = COCO(os.path.join(demo_data, "annotations/instances_val.json"))
    assert dets and {d["image_id"] for d in dets} <= set(gt.getImgIds())
    assert {d["category_id"] for d in dets} <= set(gt.getCatIds())
    boxes = np.asarray([d["bbox"] for d in dets])
    assert (boxes[:, 2:] >= 0).all() and boxes[:, 0].max() <= 128  # xywh in the 128-px original images
    res = gt.loadRes(str(tmp_path / "results/dets.json"))
    assert len(res.getAnnIds()) == len(dets)
    # an existing file is refused (before anything is built), kept as it was
    before = (tmp_path / "results/dets.json").read_bytes()
    with pytest.raises(OarsError, match="--overwrite"):
        evaluate(DET_DEMO_CFG, ckpt, opts, work_dir=str(tmp_path / "work"), out=str(tmp_path / "results/dets.json"))
    assert (tmp_path / "results/dets.json").read_bytes() == before


def test_segmentation_out_has_one_record_per_image(demo_data, tmp_path):
    from pycocotools import mask as mask_utils

    opts = demo_overrides(demo_data)
    ckpt = random_checkpoint(DEMO_CFG, opts, tmp_path)
    out = tmp_path / "seg.json"
    result = evaluate(DEMO_CFG, ckpt, opts, work_dir=str(tmp_path / "work"), out=str(out))
    assert result["out_file"] == str(out)
    records = json.loads(out.read_text())
    assert len(records) == 8  # the 8 validation images, in order
    assert records[0]["input"].endswith(".png") and records == sorted(records, key=lambda r: r["input"])
    for rec in records:
        h, w = rec["image_size"]
        assert (h, w) == (128, 128)  # original pixels, not the 64-px pipeline size
        total = np.zeros((h, w), np.int64)
        for cls in rec["classes"]:
            m = mask_utils.decode(cls["rle"])
            assert m.sum() == cls["pixels"] > 0
            total += m
        assert (total == 1).all()  # the per-class maps tile the image exactly once


def test_out_refuses_a_folder_and_a_missing_parent(tmp_path):
    with pytest.raises(OarsError, match="is a folder"):
        evaluate(DEMO_CFG, "x.pth", out=str(tmp_path))
    with pytest.raises(OarsError, match="does not exist"):
        evaluate(DEMO_CFG, "x.pth", out=str(tmp_path / "no" / "r.json"))


def test_video_record_has_topk_scores_and_true_label():
    from video.result_records import result_records
    from video.structures import ActionDataSample

    sample = ActionDataSample(metainfo={"filename": "v/clip.mp4", "total_frames": 16, "frame_inds": [0, 8]})
    sample.pred_score = torch.tensor([0.1, 0.6, 0.05, 0.25])
    sample.set_gt_label(3)
    [rec] = result_records(sample, {"classes": ("a", "b", "c", "d")})
    assert (rec["input"], rec["label"], rec["class"], rec["gt_labels"]) == ("v/clip.mp4", 1, "b", [3])
    assert [t["label"] for t in rec["topk"]] == [1, 3, 0, 2] and rec["frame_inds"] == [0, 8]
    assert rec["scores"] == pytest.approx([0.1, 0.6, 0.05, 0.25])
    json.dumps(rec)  # plain JSON
