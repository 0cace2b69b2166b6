"""The ``video_segments`` predictor (oars_deploy, ONNX Runtime) on the shared shrunk BMN + tiny-recognizer export
(tests/video_segments_export.py) and a generated 30-frame video: its snippet features and class scores equal
tools/extract_features.py's on the same file, its proposals and detections equal ``BMN.predict`` (with
``classify``) on those features, and oars-infer, in a process where torch cannot be imported, writes one
results.jsonl record with segments inside the video, labelled with the class names, and a timeline picture."""

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
from mmengine.registry import DefaultScope
from video_segments_export import BMN_CFG, SHRINK, SNIPPET, STRIDE, TOP_K, segments_export

FRAMES, FPS = 30, 8
INFER = os.path.join(ROOT, "deploy/python/infer.py")
BLOCK_TORCH = """
import importlib.abc, runpy, sys
class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'torchvision', 'mmengine', 'video', 'oars'):
            raise ImportError('blocked in this test: ' + name)
        return None
sys.meta_path.insert(0, _NoTorch())
sys.argv = sys.argv[1:]  # [infer.py, its flags...]
runpy.run_path(sys.argv[0], run_name='__main__')
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(export info, videos folder with one 30-frame video, the predictor's result on it)."""
    from oars_deploy.predictors.video_segments.predictor import SegmentsPredictor
    from video.demo_data import render_clip, write_video

    with DefaultScope.overwrite_default_scope("video"):
        info = segments_export(tmp_path_factory)
    videos = tmp_path_factory.mktemp("segment_videos")
    write_video(videos / "walk.mp4", render_clip(np.random.default_rng(0), 3, 64, FRAMES), fps=FPS)
    result = SegmentsPredictor(str(info["dir"]), batch_size=4).predict(str(videos / "walk.mp4"))
    return info, videos, result


def test_snippets_equal_the_feature_extractor(setup, tmp_path):
    """The deployed decoding, snippet sampling, pre-processing and recognizer graph give the features and class
    scores tools/extract_features.py writes (what the localiser was trained on), chunks of 4 snippets here."""
    from oars.config import load_config
    from video.features.extract import extract_features

    info, videos, result = setup
    with DefaultScope.overwrite_default_scope("video"):
        extract_features(load_config(info["recognizer_config"]), info["recognizer_weights"], str(videos),
                         str(tmp_path / "feats"), snippet=SNIPPET, stride=STRIDE, workers=0)
    feats = np.load(tmp_path / "feats" / "walk.npy")
    assert result["features"].shape == feats.shape == ((FRAMES - SNIPPET) // STRIDE + 1, 16)
    np.testing.assert_allclose(result["features"], feats, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(result["class_scores"], np.load(tmp_path / "feats" / "walk.scores.npy"),
                               rtol=1e-4, atol=1e-5)
    index = json.loads((tmp_path / "feats" / "videos.json").read_text())["walk"]
    feature_second = index["feature_frame"] / index["duration_frame"] * index["duration_second"]
    assert result["feature_second"] == pytest.approx(feature_second)
    assert result["duration_second"] == pytest.approx(FRAMES / FPS)


def test_proposals_and_detections_equal_bmn_predict(setup):
    """On the same features, the runtime's resize + localiser graph + NumPy post-processing and the PyTorch
    ``BMN.predict`` (ResizeTemporal, data preprocessor, the model with classify.top_k) give the same proposals and
    detections: one implementation of proposals, Soft-NMS and the class pairing."""
    from oars.config import load_config
    from oars.pipelines.model import init_model
    from video.structures import ActionDataSample
    from video.transforms import PackLocalizationInputs, ResizeTemporal

    info, _, result = setup
    with DefaultScope.overwrite_default_scope("video"):
        model = init_model(load_config(BMN_CFG, SHRINK + [f"model.classify.top_k={TOP_K}"]), info["bmn_weights"])
        packed = PackLocalizationInputs()(ResizeTemporal(16)({"features": result["features"]}))
        sample = ActionDataSample(metainfo={"feature_second": result["feature_second"],
                                            "class_scores": result["class_scores"]})
        data = model.data_preprocessor({"inputs": [packed["inputs"]], "data_samples": [sample]}, False)
        pred = model(**data, mode="predict")[0]
    assert len(result["proposals"]) > 0 and result["detections"].shape == (3 * len(result["proposals"]), 4)
    np.testing.assert_allclose(result["proposals"], pred.proposals.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(result["detections"], pred.segments.numpy(), rtol=1e-4, atol=1e-4)
    assert torch.equal(pred.segments[:, 3].unique().sort().values,
                       torch.as_tensor(np.sort(result["classes"]), dtype=torch.float32))


def test_oars_infer_without_torch_writes_segments(setup, tmp_path):
    info, videos, _ = setup
    (videos / "broken.mp4").write_bytes(b"not a video")
    try:
        proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, INFER, "--model-dir", str(info["dir"]), "-i",
                               str(videos), "-o", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "deploy/python")})
    finally:
        (videos / "broken.mp4").unlink()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]  # the broken file, listed
    assert "broken.mp4" in proc.stderr and "walk.mp4:" in proc.stdout
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["predictor"] == "video_segments" and record["input"].endswith("walk.mp4")
    assert record["num_snippets"] == 6 and record["duration_second"] == FRAMES / FPS
    names = [f"class{i}" for i in range(8)]
    assert len(record["classes"]) == TOP_K and all(c["class"] in names for c in record["classes"])
    assert record["segments"], "no segments"
    for seg in record["segments"]:
        assert 0 <= seg["start"] < seg["end"] <= record["duration_second"]
        assert seg["class"] == names[seg["label"]] and 0 < seg["score"] <= 1
    scores = [s["score"] for s in record["segments"]]
    assert scores == sorted(scores, reverse=True)
    picture = cv2.imread(str(tmp_path / "out" / record["timeline"]))
    assert picture is not None and picture.shape[1] == 1280 and picture.shape[0] > 150
