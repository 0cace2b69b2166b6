"""The deployed feature predictor (oars_deploy, ONNX Runtime) on an exported shrunk AttentionLSTM: its model input
equals the test pipeline + data preprocessor's on the same files (reading, dequantisation, frame selection,
padding, mask), its scores equal the PyTorch model's pred_score, and oars-infer prints and writes the top-k."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from demo_utils import ROOT
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from vid_feature_cases import CLASSES, DIMS, MAX_FRAMES, checkpoint, feature_config

from oars.inference import build_test_pipeline
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars_deploy.cli import run
from oars_deploy.failures import FolderFailuresError
from oars_deploy.predictors.feature_classes.predictor import FeaturePredictor
from video.demo_data import render_clip, write_video
from video.export_features import pack_features

# (name, frames, quantised): longer than max_frames (segment centres kept), shorter (padding), exactly max_frames
FILES = [("a.npz", 21, True), ("b.pkl", 5, False), ("c.npz", MAX_FRAMES, True)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("vid_feature_predictor")
    cfg = feature_config(str(root), "attention_lstm", batch=2)  # static batch 2: 3 files make a padded chunk
    ckpt = checkpoint(cfg)
    export_model(cfg, ckpt, str(root / "out"))
    folder = root / "features"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, t, quantised in FILES:
        arrays = {m: (rng.integers(0, 256, (t, d), dtype=np.uint8) if quantised
                      else rng.normal(0, 1, (t, d)).astype(np.float32)) for m, d in DIMS.items()}
        arrays["flow"] = np.zeros((t, 3), np.uint8)  # a modality the model does not take
        if name.endswith(".npz"):
            np.savez(folder / name, **arrays)
        else:
            with open(folder / name, "wb") as f:
                pickle.dump(arrays, f)
    (folder / "notes.txt").write_text("not a feature file")  # ignored in a folder
    return {"cfg": Config.fromfile(cfg), "ckpt": ckpt, "model_dir": str(root / "out"), "folder": str(folder)}


def _paths(exported):
    return [os.path.join(exported["folder"], name) for name, _, _ in FILES]


def _torch_side(exported):
    cfg = exported["cfg"]
    model = init_model(cfg, exported["ckpt"])
    pipeline = build_test_pipeline(cfg)
    items = [pipeline({"filename": p, "label": 0, "multi_label": False, "num_classes": len(CLASSES)})
             for p in _paths(exported)]
    with torch.no_grad():
        inputs = model.data_preprocessor(pseudo_collate(items), training=False)["inputs"]
        samples = model.test_step(pseudo_collate(items))
    packed = pack_features(inputs, list(DIMS), MAX_FRAMES).numpy()
    return items, packed, np.stack([s.pred_score.numpy() for s in samples])


def test_same_input_and_scores_as_pytorch(exported):
    items, torch_inputs, pred_scores = _torch_side(exported)
    predictor = FeaturePredictor(exported["model_dir"])
    for path, item, ref in zip(_paths(exported), items, torch_inputs):
        packed, meta = predictor.load(path)
        np.testing.assert_array_equal(meta["frame_inds"], item["data_samples"].metainfo["feature_inds"])
        assert meta["total_frames"] == item["data_samples"].metainfo["total_frames"]
        assert packed.shape == (MAX_FRAMES, sum(DIMS.values()) + 1) and np.abs(packed - ref).max() == 0.0
    np.testing.assert_array_equal(predictor.load(_paths(exported)[0])[1]["frame_inds"], [1, 3, 6, 9, 11, 14, 17, 19])
    assert predictor.load(_paths(exported)[1])[0][:, -1].tolist() == [1.0] * 5 + [0.0] * 3  # the mask channel
    results = predictor.predict(_paths(exported), k=3)
    scores = np.stack([r["scores"] for r in results])
    np.testing.assert_allclose(scores, pred_scores, atol=1e-5)
    assert [r["label"] for r in results] == list(pred_scores.argmax(1))
    assert np.abs(scores[1:] - scores[:1]).max() > 1e-2  # the files get different answers: the test can fail


def test_cli_prints_and_writes_topk(exported, tmp_path, capsys):
    out = tmp_path / "pred"
    run(["--model-dir", exported["model_dir"], "-i", exported["folder"], "-o", str(out), "--topk", "3"])
    records = json.loads((out / "predictions.json").read_text())
    _, _, pred_scores = _torch_side(exported)
    assert [os.path.basename(r["video"]) for r in records] == ["a.npz", "b.pkl", "c.npz"]
    for record, ref, (_, frames, _) in zip(records, pred_scores, FILES):
        assert [t["class_id"] for t in record["topk"]] == list(np.argsort(-ref, kind="stable")[:3])
        assert record["label_name"] == CLASSES[int(ref.argmax())]
        assert record["score"] == pytest.approx(float(ref.max()), abs=1e-5)
        assert record["total_frames"] == frames and len(record["frame_inds"]) == min(frames, MAX_FRAMES)
    assert f"a.npz: {records[0]['label_name']} (" in capsys.readouterr().out


def test_cli_lists_unreadable_files(exported, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    os.symlink(_paths(exported)[0], folder / "good.npz")
    (folder / "broken.npz").write_bytes(b"not a zip")
    np.savez(folder / "narrow.npz", rgb=np.zeros((4, 5), np.uint8), audio=np.zeros((4, 6), np.uint8))
    with pytest.raises(FolderFailuresError, match=r"2 of 3 feature files could not be classified:\n"
                                                  r"  - .*broken.npz: cannot read feature file.*\n"
                                                  r"  - .*narrow.npz: 'rgb' features are 5-wide; the model takes 12"):
        run(["--model-dir", exported["model_dir"], "-i", str(folder), "-o", str(tmp_path / "pred")])
    records = json.loads((tmp_path / "pred" / "predictions.json").read_text())
    assert [os.path.basename(r["video"]) for r in records] == ["good.npz"]


def test_cli_refuses_images_and_videos_as_a_user_calls_it(exported, tmp_path):
    clip = render_clip(np.random.default_rng(0), 0, size=48, num_frames=4)
    cv2.imwrite(str(tmp_path / "still.png"), clip[0])
    write_video(str(tmp_path / "clip.mp4"), clip)
    for target, expected in [
        ("still.png", "error: still.png is a still image (png), not a frame-feature file: frame-feature models take "
                      ".npz / .pkl / .pickle files of per-frame features"),
        ("clip.mp4", "error: clip.mp4 is a video, not a frame-feature file: frame-feature models take"),
    ]:
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "python", "infer.py"), "--model-dir",
                               exported["model_dir"], "-i", target, "-o", "out"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert expected in proc.stderr, proc.stderr[-2000:]
