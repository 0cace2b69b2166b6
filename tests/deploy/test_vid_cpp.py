"""deploy/cpp on exported video classifiers (shrunk TSM, TSN with ThreeCrop): oars_infer reads the videos with
cv::VideoCapture, samples and preprocesses them as deploy.yaml says and gives the Python predictor's frame indices,
top-1 and top-5 (and scores to 1e-5) with its ONNX Runtime backend.

Like test_deploy_cpp_two_stage.py this needs oars_infer built with ONNX Runtime: set ``OARS_ONNXRUNTIME_ROOT`` to an
ONNX Runtime C/C++ SDK folder (include/, lib/); without it (or without deploy/cpp's apt packages) it is skipped.
OpenCV DNN 4.6 cannot load the TSM graph (its temporal shift's Concat of zeros); the TSN graph is tried with it too.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from vid_export_cases import CLASSES, checkpoint, video_config

VIDEOS = [(17, 48, 64), (9, 64, 40), (3, 40, 40)]  # frames, H, W; 3 frames < 4 segments (indices loop)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> str:
    from video.demo_data import render_clip, write_video

    folder = tmp_path_factory.mktemp("vid_cpp_videos")
    rng = np.random.default_rng(0)
    for k, (n, h, w) in enumerate(VIDEOS):
        clip = render_clip(rng, k % len(CLASSES), size=max(h, w), num_frames=n)[:, :h, :w]
        write_video(str(folder / f"v{k}.mp4"), clip)
    return str(folder)


def _run(binary: str, model_dir: str, videos: str, out: str, backend: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "--model-dir", model_dir, "--video", videos, "--out", out, "--backend", backend],
                          capture_output=True, text=True, timeout=300)


def _compare(lines: list[str], model_dir: str, videos: str) -> None:
    from oars_deploy.predictors.clip_classes.predictor import VideoPredictor

    paths = sorted(os.path.join(videos, f) for f in os.listdir(videos))
    ref = VideoPredictor(model_dir).predict(paths, k=5)
    got = [json.loads(line) for line in lines]
    assert [g["video"] for g in got] == paths
    for g, r in zip(got, ref):
        assert g["frame_inds"] == [int(i) for i in r["frame_inds"]] and g["total_frames"] == r["total_frames"]
        assert g["label"] == r["label"] and g["label_name"] == CLASSES[r["label"]]
        assert [t["class_id"] for t in g["topk"]] == [i for i, _, _ in r["topk"]]
        np.testing.assert_allclose([t["score"] for t in g["topk"]], [s for _, _, s in r["topk"]], atol=1e-5)


@pytest.mark.parametrize("name,crop", [("tsm", "CenterCrop"), ("tsn", "ThreeCrop")])
def test_cpp_onnxruntime_matches_python_predictor(oars_infer_ort, videos, tmp_path, name, crop):
    from oars.pipelines.export import export_model

    cfg = video_config(str(tmp_path), name, crop)
    model_dir = str(tmp_path / "export")
    export_model(cfg, checkpoint(cfg), model_dir)
    proc = _run(oars_infer_ort, model_dir, videos, str(tmp_path / "o"), "onnxruntime")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _compare(proc.stdout.splitlines(), model_dir, videos)
    if name == "tsn":  # OpenCV DNN: runs the plain 2D network, or says clearly that it cannot
        proc = _run(oars_infer_ort, model_dir, videos, str(tmp_path / "o2"), "opencv")
        if proc.returncode == 0:
            _compare(proc.stdout.splitlines(), model_dir, videos)
        else:
            assert "OpenCV DNN" in proc.stderr and "onnxruntime" in proc.stderr


def test_cpp_refuses_3d_exports(oars_infer_ort, videos, tmp_path):
    from oars.pipelines.export import export_model

    cfg = video_config(str(tmp_path), "r2plus1d")
    model_dir = str(tmp_path / "export")
    export_model(cfg, checkpoint(cfg), model_dir)
    proc = _run(oars_infer_ort, model_dir, videos, str(tmp_path / "o"), "onnxruntime")
    assert proc.returncode == 1 and "input.layout" in proc.stderr and "NCTHW" in proc.stderr


def test_cpp_refuses_still_images_and_one_frame_videos(oars_infer_ort, tmp_path):
    """The rules of oars_deploy.clips.inputs / video_sampling.check_frame_count in C++: a PNG named .mp4 is a still
    image, not a one-frame video; fewer frames than deploy.yaml's sampling.min_frames (default 2) is refused."""
    import cv2

    from oars.pipelines.export import export_model
    from video.demo_data import render_clip, write_video

    cfg = video_config(str(tmp_path), "tsn", "CenterCrop")
    model_dir = str(tmp_path / "export")
    export_model(cfg, checkpoint(cfg), model_dir)
    still = tmp_path / "still.mp4"
    still.write_bytes(cv2.imencode(".png", np.zeros((40, 40, 3), np.uint8))[1].tobytes())
    proc = _run(oars_infer_ort, model_dir, str(still), str(tmp_path / "o"), "onnxruntime")
    assert proc.returncode == 1 and f"{still} is a still image (png), not a video" in proc.stderr
    one = str(tmp_path / "one.mp4")
    write_video(one, render_clip(np.random.default_rng(0), 0, size=40, num_frames=1))
    proc = _run(oars_infer_ort, model_dir, one, str(tmp_path / "o"), "onnxruntime")
    assert proc.returncode == 1 and f"{one}: 1 frame, but the sampling needs at least 2" in proc.stderr
