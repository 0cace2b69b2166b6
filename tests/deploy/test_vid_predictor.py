"""The deployed video predictor (oars_deploy, ONNX Runtime) on an exported shrunk TSM: its model input equals the
test pipeline + data preprocessor's on the same videos (decoding, frame numbering, sampling, resize, crop,
normalisation), its scores equal the PyTorch model's pred_score, and oars-infer prints and writes the top-k."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from demo_utils import ROOT
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from vid_export_cases import CLASSES, checkpoint, video_config

from oars.inference import build_test_pipeline
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars_deploy.cli import run
from oars_deploy.clips.decode import VideoFile
from oars_deploy.failures import FolderFailuresError
from oars_deploy.predictors.clip_classes.predictor import VideoPredictor
from video.datasets.decoders import PyAVReader
from video.demo_data import render_clip, write_video

pytestmark = pytest.mark.slow  # one export (about 10 s) shared by the module

# (name, frames, size): a 3-frame video is shorter than the 4 segments (indices loop)
VIDEOS = [("a", 17, (48, 64)), ("b", 9, (64, 40)), ("c", 3, (40, 40))]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("vid_predictor")
    cfg = video_config(str(root), "tsm", batch=2)
    ckpt = checkpoint(cfg)
    export_model(cfg, ckpt, str(root / "out"))
    videos = root / "videos"
    videos.mkdir()
    rng = np.random.default_rng(0)
    for k, (name, n, (h, w)) in enumerate(VIDEOS):
        clip = render_clip(rng, k % len(CLASSES), size=max(h, w), num_frames=n)[:, :h, :w]
        write_video(str(videos / f"{name}.mp4"), clip)
    return {"cfg": Config.fromfile(cfg), "ckpt": ckpt, "model_dir": str(root / "out"), "videos": str(videos)}


def _paths(exported):
    return [os.path.join(exported["videos"], f"{name}.mp4") for name, _, _ in VIDEOS]


def _torch_side(exported):
    cfg = exported["cfg"]
    model = init_model(cfg, exported["ckpt"])
    pipeline = build_test_pipeline(cfg)
    items = [pipeline({"filename": p, "start_index": 0, "modality": "RGB", "multi_label": False,
                       "num_classes": len(CLASSES)}) for p in _paths(exported)]
    with torch.no_grad():
        inputs = model.data_preprocessor(pseudo_collate(items), training=False)["inputs"]
        samples = model.test_step(pseudo_collate(items))
    return items, inputs.numpy(), np.stack([s.pred_score.numpy() for s in samples])


def test_same_input_and_scores_as_pytorch(exported):
    items, torch_inputs, pred_scores = _torch_side(exported)
    predictor = VideoPredictor(exported["model_dir"])
    loaded = [predictor.load(p) for p in _paths(exported)]
    for (clip, meta), item, ref in zip(loaded, items, torch_inputs):
        np.testing.assert_array_equal(meta["frame_inds"], item["data_samples"].metainfo["frame_inds"])
        assert np.abs(clip - ref).max() == 0.0
    results = predictor.predict(_paths(exported), k=3)  # 3 videos through a batch-2 graph: a padded chunk
    scores = np.stack([r["scores"] for r in results])
    np.testing.assert_allclose(scores, pred_scores, atol=1e-5)
    assert [r["label"] for r in results] == list(pred_scores.argmax(1))
    assert np.abs(scores[1:] - scores[:1]).max() > 1e-2  # the videos get different answers: the test can fail


def test_decoder_numbers_frames_as_training(exported):
    path = _paths(exported)[0]
    inds = np.array([16, 0, 5, 5, 9, 1, 15])
    with VideoFile(path) as video, PyAVReader(path) as reader:
        assert video.total_frames == reader.total_frames == 17
        for mine, ref in zip(video.frames(inds), reader.get_frames(inds)):
            np.testing.assert_array_equal(mine, ref)


def test_cli_prints_and_writes_topk(exported, tmp_path, capsys):
    out = tmp_path / "pred"
    run(["--model-dir", exported["model_dir"], "-i", exported["videos"], "-o", str(out), "--topk", "3"])
    records = json.loads((out / "predictions.json").read_text())
    _, _, pred_scores = _torch_side(exported)
    assert [os.path.basename(r["video"]) for r in records] == ["a.mp4", "b.mp4", "c.mp4"]
    for record, ref in zip(records, pred_scores):
        assert [t["class_id"] for t in record["topk"]] == list(np.argsort(-ref, kind="stable")[:3])
        assert record["label_name"] == CLASSES[int(ref.argmax())]
        assert record["score"] == pytest.approx(float(ref.max()), abs=1e-5)
    printed = capsys.readouterr().out
    assert f"a.mp4: {records[0]['label_name']} (" in printed


def test_cli_lists_undecodable_videos(exported, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    os.symlink(_paths(exported)[0], folder / "good.mp4")
    (folder / "broken.mp4").write_bytes(b"not a video")
    with pytest.raises(FolderFailuresError, match=r"1 of 2 videos could not be classified:\n  - .*broken.mp4"):
        run(["--model-dir", exported["model_dir"], "-i", str(folder), "-o", str(tmp_path / "pred")])
    records = json.loads((tmp_path / "pred" / "predictions.json").read_text())
    assert [os.path.basename(r["video"]) for r in records] == ["good.mp4"]


def _oars_infer(model_dir: str, target: str, cwd) -> subprocess.CompletedProcess:
    """``python deploy/python/infer.py --model-dir DIR -i TARGET -o out`` from ``cwd``, as a user runs it."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "python", "infer.py"), "--model-dir",
                           model_dir, "-i", target, "-o", "out"], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_refuses_still_images_as_a_user_calls_it(exported, tmp_path):
    frame = render_clip(np.random.default_rng(0), 0, size=48, num_frames=1)[0]
    (tmp_path / "images").mkdir()
    for name in ("still.png", "images/a.png", "images/b.jpg"):
        cv2.imwrite(str(tmp_path / name), frame)
    for target, expected in [
        ("still.png", "error: still.png is a still image (png), not a video: a video model classifies the motion "
                      "across a clip's frames; video models take video files (.mp4, .avi, .mkv"),
        ("images", "error: no videos (.mp4, .avi, .mkv, .mov, .webm, .m4v, .mpg, .mpeg) in folder images: it holds "
                   "2 still images (a.png, b.jpg); video models take video files"),
    ]:
        proc = _oars_infer(exported["model_dir"], target, tmp_path)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert expected in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_cli_lists_a_still_image_named_like_a_video(exported, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    os.symlink(_paths(exported)[0], folder / "good.mp4")
    ok, png = cv2.imencode(".png", np.zeros((48, 64, 3), np.uint8))
    (folder / "photo.mp4").write_bytes(png.tobytes())
    with pytest.raises(FolderFailuresError, match=r"1 of 2 videos could not be classified:\n  - .*photo.mp4: .*"
                                                  r"photo.mp4 is a still image \(png\), not a video"):
        run(["--model-dir", exported["model_dir"], "-i", str(folder), "-o", str(tmp_path / "pred")])
    records = json.loads((tmp_path / "pred" / "predictions.json").read_text())
    assert [os.path.basename(r["video"]) for r in records] == ["good.mp4"]
