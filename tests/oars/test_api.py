"""The Python API (``from oars import Model``): the same runs, files and records as the tools, in a few lines.

Segmentation end to end (train 1 tiny epoch, val, predict a file and an array, export, the runtime Predictor on the
export); detection predict + to_json against what tools/infer.py writes for the same image and weights.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import textwrap

import cv2
import numpy as np
import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, ROOT, demo_overrides, det_demo_overrides, random_checkpoint

from oars.errors import OarsError
from oars_deploy.errors import UserError


def test_import_oars_stays_cheap():
    """``import oars`` does not import torch (the lazy ``oars.Model``), ``oars.Model`` does."""
    code = textwrap.dedent("""
        import sys, oars
        assert "torch" not in sys.modules and "oars.api" not in sys.modules
        from oars import Model
        assert Model.__module__ == "oars.api.model"
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    import oars

    with pytest.raises(AttributeError):
        oars.NoSuchThing  # noqa: B018


@pytest.fixture(scope="module")
def trained(demo_data, tmp_path_factory):
    """The shrunk segmentation demo trained for one epoch through ``Model.train`` (keyword overrides)."""
    from oars import Model

    work = tmp_path_factory.mktemp("api_seg")
    opts = [o for o in demo_overrides(demo_data) if not o.startswith("train_cfg.max_epochs=")]
    model = Model(DEMO_CFG, overrides=opts, work_dir=str(work / "run"))
    out = model.train(train_cfg__max_epochs=1)
    return model, out, work


def test_segmentation_train_val_predict_export(trained, demo_data, tmp_path):
    from oars_deploy import Predictor

    model, out, work = trained
    assert out["work_dir"] == str(work / "run") and os.path.isfile(out["weights"]) and model.weights == out["weights"]
    assert "mIoU" in out["metrics"] and "time" not in out["metrics"]
    assert model.overrides[-1] == "train_cfg.max_epochs=1"  # kept: the weights belong to that config
    metrics = model.val()["metrics"]
    assert "mIoU" in metrics and os.path.isfile(work / "run" / "metrics.json")

    image_file = os.path.join(demo_data, "images", "val", sorted(os.listdir(os.path.join(demo_data, "images",
                                                                                        "val")))[0])
    image = cv2.imread(image_file)
    from_file, from_array = model.predict([image_file, image])
    assert from_file.input == image_file and from_array.input == "array_1"
    label = from_file.data["label"]
    np.testing.assert_array_equal(from_file.label_map, label)
    assert label.shape == image.shape[:2] and label.dtype == np.int64
    np.testing.assert_array_equal(from_array.data["label"], label)  # the same pipeline for files and arrays
    record = from_file.to_dict()
    assert record["predictor"] == "semantic_labels" and record["image_size"] == list(image.shape[:2])
    assert sum(c["pixels"] for c in record["classes"]) == label.size
    picture = from_file.plot()
    assert picture.dtype == np.uint8 and picture.shape[0] >= image.shape[0] and picture.shape[2] == 3
    saved = from_file.save(str(tmp_path / "vis.png"))
    np.testing.assert_array_equal(cv2.imread(saved), picture)
    with pytest.raises(UserError, match="input image"):
        from_file.save(image_file)  # outputs never replace inputs

    folder = model.export("onnx", out_dir=str(tmp_path / "export"))
    assert os.path.isfile(os.path.join(folder, "deploy.yaml"))
    predictor = Predictor(folder)
    runtime = predictor(image)  # one array -> a list of one result
    assert len(runtime) == 1 and runtime[0]["label"].shape == label.shape
    assert (runtime[0]["label"] == label).mean() > 0.99  # ONNX Runtime vs PyTorch, borders may round apart
    both = predictor([image_file, image])
    np.testing.assert_array_equal(both[0]["label"], both[1]["label"])
    with pytest.raises(Exception, match="BGR uint8"):
        predictor(image.astype(np.float32))


def test_predict_rejects_bad_inputs(trained, tmp_path):
    model = trained[0]
    with pytest.raises(UserError, match=r"shape \[8, 8\]"):
        model.predict(np.zeros((8, 8), np.uint8))
    with pytest.raises(UserError, match="no such file"):
        model.predict(str(tmp_path / "missing.png"))
    with pytest.raises(UserError, match="int"):
        model.predict(3)


def test_keyword_overrides_and_missing_weights(tmp_path):
    from oars.api.model import Model, keyword_overrides

    assert keyword_overrides({"train_cfg__max_epochs": 2, "model__x": [1, 2], "name": "a"}) == [
        "train_cfg.max_epochs=2", "model.x=[1, 2]", "name=a"]
    with pytest.raises(OarsError, match="needs weights"):
        Model(DEMO_CFG).val()
    with pytest.raises(OarsError, match="max_epochz.*max_epochs"):  # checked before anything is built
        Model(DEMO_CFG, work_dir=str(tmp_path / "w")).train(train_cfg__max_epochz=1)
    with pytest.raises(OarsError, match="not found"):
        Model(str(tmp_path / "nope.yaml"))
    # a misspelt type is named as tools/train.py names it, not mmengine's KeyError at build time
    with pytest.raises(OarsError, match=r"model.backbone.type: unknown model type 'UNett'. Did you mean: UNet"):
        _ = Model(DEMO_CFG, overrides=["model.backbone.type=UNett"]).cfg


def test_detection_predict_matches_tools_infer(demo_data, tmp_path, monkeypatch):
    """Model.predict(...): to_json() is the results.jsonl line and plot() the picture tools/infer.py writes for the
    same image and weights (tools/infer.py run in-process: no second interpreter start)."""
    from oars import Model

    opts = det_demo_overrides(demo_data, **{"model.backbone.base_channels": 4, "model.test_cfg.score_thr": 0.0})
    ckpt = random_checkpoint(DET_DEMO_CFG, opts, tmp_path)
    image_file = os.path.join(demo_data, "images", "val", sorted(os.listdir(os.path.join(demo_data, "images",
                                                                                        "val")))[0])
    infer_main = runpy.run_path(os.path.join(ROOT, "tools", "infer.py"))["main"]
    infer_main(["-c", DET_DEMO_CFG, "-w", ckpt, "-i", image_file, "-o", str(tmp_path / "out"), *opts])
    with open(tmp_path / "out" / "results.jsonl") as f:
        expected = json.loads(f.readline())
    stem = os.path.splitext(os.path.basename(image_file))[0]
    expected_picture = cv2.imread(str(tmp_path / "out" / f"{stem}_vis.png"))

    monkeypatch.setenv("OARS_HOME", str(tmp_path / "home"))  # oars://NAME: a registered checkpoint and its config
    from oars.hub import register

    register("api_det", ckpt, config=DET_DEMO_CFG)
    model = Model("oars://api_det", overrides=opts)
    assert (model.config, model.weights) == (DET_DEMO_CFG, ckpt)
    result = model.predict(image_file)[0]
    assert result.predictor == "detection_boxes" and len(expected["detections"]) > 0
    assert result.to_dict() == expected and json.loads(result.to_json()) == expected
    np.testing.assert_array_equal(result.plot(), expected_picture)
    array_result = model.predict(cv2.imread(image_file))[0]
    assert array_result.to_dict()["detections"] == expected["detections"]


def test_video_predict_matches_tools_infer(tmp_path):
    """A video model: predict a video file; to_json() and plot() are tools/infer.py's results.jsonl line and strip."""
    from oars import Model
    from video.demo_data import generate

    generate(tmp_path / "data", num_train=1, num_val=1, size=64, num_frames=16)
    video = str(tmp_path / "data" / "videos" / "val" / "00000.mp4")
    cfg = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
    opts = ["model.backbone.base_channels=8"]
    ckpt = random_checkpoint(cfg, opts, tmp_path)
    runpy.run_path(os.path.join(ROOT, "tools", "infer.py"))["main"](
        ["-c", cfg, "-w", ckpt, "-i", video, "-o", str(tmp_path / "out"), *opts])
    with open(tmp_path / "out" / "results.jsonl") as f:
        expected = json.loads(f.readline())

    model = Model(cfg, weights=ckpt, overrides=opts)
    result = model.predict(video)[0]
    assert result.predictor == "clip_classes" and result.image is None
    got = result.to_dict()
    assert got["topk"][0]["class"] == expected["topk"][0]["class"] and got["frame_inds"] == expected["frame_inds"]
    np.testing.assert_allclose([t["score"] for t in got["topk"]], [t["score"] for t in expected["topk"]], atol=1e-5)
    assert result.probs.top1 == got["label"] and result.names[result.probs.top1] == got["class"]
    assert result.probs.top5 == [t["label"] for t in got["topk"]][:5]
    np.testing.assert_array_equal(result.plot(), cv2.imread(str(tmp_path / "out" / "00000_strip.png")))
    with pytest.raises(OarsError, match="video files"):
        model.predict(np.zeros((8, 8, 3), np.uint8))


def test_gan_translation_matches_tools_infer(demo_data, tmp_path):
    """An image-to-image generator (pix2pix, shrunk, random weights): the output, the pair picture and the record
    are tools/infer.py's ``<stem>.png``, ``<stem>_pair.png`` and results.jsonl line."""
    import copy

    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars import Model
    from oars.config import load_config

    cfg_path = os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_demo_shapes.yaml")
    opts = ["model.generator.ngf=4", "model.generator.num_downs=5", "model.discriminator.ndf=4",
            "model.discriminator.n_layers=1", "test_dataloader.dataset.pipeline.1.scale=32",
            "export.input_shape=[1,3,32,32]"]
    cfg = load_config(cfg_path, opts)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        net = MODELS.build(copy.deepcopy(cfg.model))
    ckpt = str(tmp_path / "g.pth")
    torch.save({"state_dict": net.state_dict(), "meta": {}}, ckpt)
    image_file = os.path.join(demo_data, "images", "val", "0000.png")
    runpy.run_path(os.path.join(ROOT, "tools", "infer.py"))["main"](
        ["-c", cfg_path, "-w", ckpt, "-i", image_file, "-o", str(tmp_path / "out"), *opts])
    with open(tmp_path / "out" / "results.jsonl") as f:
        expected = json.loads(f.readline())

    result = Model(cfg_path, weights=ckpt, overrides=opts).predict(cv2.imread(image_file))[0]
    assert result.predictor == "gan_images"
    np.testing.assert_array_equal(result.data["image"], cv2.imread(str(tmp_path / "out" / "0000.png")))
    np.testing.assert_array_equal(result.plot(), cv2.imread(str(tmp_path / "out" / "0000_pair.png")))
    assert result.to_dict() == {**expected, "input": "array_0", "images": ["array_0.png", "array_0_pair.png"]}
