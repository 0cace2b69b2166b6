"""The ``video_segments`` predictor on a C-TCN export (tests/video_ctcn_export.py: shrunk RGB-only C-TCN, tiny
recognizer, random weights) and a generated 30-frame video: the NumPy decoding (anchors, per-class NMS, Soft-NMS,
seconds) equals ``CTCN.predict`` on the same model outputs, the deployed graphs + decoding equal ``CTCN.predict`` on
the video's features, BMN exports without ``segments.localizer`` still run BMN's post-processing, a missing anchors
file is one clear error, and oars-infer, with torch blocked, writes C-TCN's segments to results.jsonl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from demo_utils import ROOT
from mmengine.registry import DefaultScope
from test_vid_segments_predictor import BLOCK_TORCH, FPS, FRAMES, INFER
from video_ctcn_export import CTCN_CFG, CTCN_CLASSES, CTCN_SHRINK, TEMPORAL_DIM, ctcn_export

from oars_deploy.errors import DeployError
from oars_deploy.predictors.video_segments.segments import ctcn_segments


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(export info, the C-TCN in eval mode, videos folder with one 30-frame video, the predictor's result)."""
    from oars.config import load_config
    from oars.pipelines.model import init_model
    from oars_deploy.predictors.video_segments.predictor import SegmentsPredictor
    from video.demo_data import render_clip, write_video

    with DefaultScope.overwrite_default_scope("video"):
        info = ctcn_export(tmp_path_factory)
        model = init_model(load_config(CTCN_CFG, CTCN_SHRINK), info["ctcn_weights"]).eval()
    videos = tmp_path_factory.mktemp("ctcn_videos")
    write_video(videos / "walk.mp4", render_clip(np.random.default_rng(0), 3, 64, FRAMES), fps=FPS)
    result = SegmentsPredictor(str(info["dir"]), batch_size=4).predict(str(videos / "walk.mp4"))
    return info, model, videos, result


def _predict(model, features: torch.Tensor, seconds: float):
    from video.structures import ActionDataSample

    samples = [ActionDataSample(metainfo={"feature_second": seconds}) for _ in range(features.shape[0])]
    return model(features, samples, mode="predict")


def test_numpy_decoding_equals_ctcn_predict(setup):
    """On the same model outputs, :func:`ctcn_segments` (what the predictor runs) = ``CTCN.predict``: the same
    segments (to 1e-5 s), labels and scores (to 1e-5), in the same order, for unsure and confident inputs."""
    _, model, _, _ = setup
    variances = [0.1, 0.2]
    for seed, scale in ((0, 1.0), (1, 4.0), (2, 10.0)):
        x = scale * torch.randn(2, model.concepts, TEMPORAL_DIM, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            offsets, probs = model(x, mode="tensor")
        preds = _predict(model, x, 12.5)
        for i, pred in enumerate(preds):
            ours = ctcn_segments(offsets[i].numpy(), probs[i].numpy(), model.anchors.numpy(), 12.5, variances,
                                 **model.test_cfg)
            theirs = pred.segments.numpy()
            assert ours.shape == theirs.shape and ours.shape[0] > 0, (seed, ours.shape, theirs.shape)
            np.testing.assert_array_equal(ours[:, 3], theirs[:, 3])
            np.testing.assert_allclose(ours[:, :3], theirs[:, :3], rtol=0, atol=1e-5)
            np.testing.assert_allclose(ours[: model.max_proposals, :3], pred.proposals.numpy(), rtol=0, atol=1e-5)


def test_predictor_equals_ctcn_predict_on_the_video(setup):
    """The deployed resize + graph + decoding on the video's snippet features = the PyTorch pipeline
    (ResizeTemporal, PackLocalizationInputs, data preprocessor, CTCN.predict) on the same features."""
    from video.transforms import PackLocalizationInputs, ResizeTemporal

    _, model, _, result = setup
    packed = PackLocalizationInputs()(ResizeTemporal(TEMPORAL_DIM)({"features": result["features"]}))
    with torch.no_grad():
        x = model.data_preprocessor({"inputs": [packed["inputs"]], "data_samples": None}, False)["inputs"]
    pred = _predict(model, x, result["feature_second"])[0]
    dets = result["detections"]
    assert dets.shape == tuple(pred.segments.shape) and len(dets) > 0
    np.testing.assert_array_equal(dets[:, 3], pred.segments[:, 3].numpy())
    np.testing.assert_allclose(dets[:, :3], pred.segments[:, :3].numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(result["proposals"], pred.proposals.numpy(), rtol=0, atol=1e-4)
    assert result["classes"].size == 0  # C-TCN names its segments: no video-level class pairing


def test_bmn_exports_without_the_key_and_bad_folders(setup, tmp_path_factory, tmp_path):
    """A BMN deploy.yaml without ``segments.localizer`` (exports made before it existed) runs BMN's
    post-processing, as with ``localizer: bmn``; an unknown localizer and a missing anchors file are one error."""
    from video_segments_export import segments_export

    from oars_deploy.deploy_config import read_deploy_yaml
    from oars_deploy.predictors.video_segments.predictor import SegmentsPredictor

    info = setup[0]
    with DefaultScope.overwrite_default_scope("video"):
        bmn = segments_export(tmp_path_factory)["dir"]
    old = tmp_path / "old_bmn"
    shutil.copytree(bmn, old)
    deploy = yaml.safe_load((old / "deploy.yaml").read_text())
    assert deploy["segments"].pop("localizer") == "bmn"
    (old / "deploy.yaml").write_text(yaml.safe_dump(deploy, sort_keys=False))
    feats = np.random.default_rng(0).normal(size=(9, 16)).astype(np.float32)
    scores = np.full(8, 1 / 8, dtype=np.float32)
    new_pred, old_pred = SegmentsPredictor(str(bmn)), SegmentsPredictor(str(old))
    assert new_pred.kind == old_pred.kind == "bmn" and old_pred.anchors is None
    for a, b in zip(new_pred.localize(feats, scores, 4.0), old_pred.localize(feats, scores, 4.0)):
        assert len(a) > 0
        np.testing.assert_array_equal(a, b)
    deploy["segments"]["localizer"] = "ssd"
    (old / "deploy.yaml").write_text(yaml.safe_dump(deploy, sort_keys=False))
    with pytest.raises(DeployError, match=r"segments.localizer must be one of \['bmn', 'ctcn'\], got 'ssd'"):
        read_deploy_yaml(str(old / "deploy.yaml"))
    broken = tmp_path / "ctcn_no_anchors"
    shutil.copytree(info["dir"], broken)
    (broken / "anchors.npy").unlink()
    with pytest.raises(DeployError, match="anchors.npy: the C-TCN anchors"):
        SegmentsPredictor(str(broken))


def test_oars_infer_without_torch_writes_ctcn_segments(setup, tmp_path):
    info, _, videos, _ = setup
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, INFER, "--model-dir", str(info["dir"]), "-i",
                           str(videos), "-o", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "deploy/python")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["predictor"] == "video_segments" and record["input"].endswith("walk.mp4")
    assert record["classes"] == [] and record["segments"], record
    for seg in record["segments"]:
        assert 0 <= seg["start"] < seg["end"] <= record["feature_second"] <= record["duration_second"]
        assert seg["class"] == CTCN_CLASSES[seg["label"]] and 0 < seg["score"] <= 1
    scores = [s["score"] for s in record["segments"]]
    assert scores == sorted(scores, reverse=True)
    assert (tmp_path / "out" / record["timeline"]).is_file()
