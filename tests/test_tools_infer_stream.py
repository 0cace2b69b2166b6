"""tools/infer.py -i VIDEO for image models (PyTorch): frame records with their index and time, the annotated
video, --every, --track; each frame's record is Model.predict's on that decoded frame (the same model and
runtime plug-in); stream flags are refused where no stream is read. Shrunk demo configs, random weights."""

from __future__ import annotations

import json
import os
import runpy

import numpy as np
import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, ROOT, demo_overrides, det_demo_overrides, random_checkpoint

from oars.errors import OarsError
from oars_deploy.streams import FrameStream, VideoWriter
from oars_deploy.streams.source import stream_source

FRAMES, FPS = 6, 5.0


@pytest.fixture(scope="module")
def infer_main():
    return runpy.run_path(os.path.join(ROOT, "tools", "infer.py"))["main"]


@pytest.fixture(scope="module")
def video(demo_data, tmp_path_factory) -> str:
    """An H.264 file of the demo's validation images (128 px), one per frame."""
    import cv2

    folder = os.path.join(demo_data, "images", "val")
    path = str(tmp_path_factory.mktemp("stream") / "clip.mp4")
    with VideoWriter(path, FPS) as writer:
        for name in sorted(os.listdir(folder))[:FRAMES]:
            writer.write(cv2.imread(os.path.join(folder, name)))
    return path


def decoded_frames(path: str) -> list[np.ndarray]:
    with FrameStream(stream_source(path)) as stream:
        return [frame.image for frame in stream]


def read_records(folder) -> list[dict]:
    with open(os.path.join(folder, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_detector_stream_records_equal_model_predict_on_the_frames(infer_main, demo_data, video, tmp_path):
    from oars import Model

    opts = det_demo_overrides(demo_data, **{"model.backbone.base_channels": 4, "model.test_cfg.score_thr": 0.0})
    ckpt = random_checkpoint(DET_DEMO_CFG, opts, tmp_path)
    out = tmp_path / "out"
    infer_main(["-c", DET_DEMO_CFG, "-w", ckpt, "-i", video, "-o", str(out), *opts, "--every", "2"])
    records = read_records(out)
    assert [r["frame"] for r in records] == [0, 2, 4]
    assert [r["time"] for r in records] == pytest.approx([0.0, 2 / FPS, 4 / FPS])
    assert os.path.isfile(out / "clip_vis.mp4") and len(decoded_frames(str(out / "clip_vis.mp4"))) == FRAMES
    frames = decoded_frames(video)
    expected = Model(DET_DEMO_CFG, weights=ckpt, overrides=opts).predict([frames[i] for i in (0, 2, 4)])
    for record, result in zip(records, expected):
        assert record["predictor"] == "detection_boxes" and len(record["detections"]) > 0
        assert record["detections"] == result.to_dict()["detections"]

    tracked = tmp_path / "tracked"
    infer_main(["-c", DET_DEMO_CFG, "-w", ckpt, "-i", video, "-o", str(tracked), *opts, "--track",
                "--max-frames", "3"])
    records = read_records(tracked)
    assert len(records) == 3 and all("track_id" in d for r in records for d in r["detections"])


def test_segmenter_stream_and_refused_flags(infer_main, demo_data, video, tmp_path):
    opts = demo_overrides(demo_data) + ["model.backbone.base_channels=4"]
    ckpt = random_checkpoint(DEMO_CFG, opts, tmp_path)
    out = tmp_path / "seg"
    infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", video, "-o", str(out), *opts, "--max-frames", "2"])
    records = read_records(out)
    assert [r["frame"] for r in records] == [0, 1] and records[0]["predictor"] == "semantic_labels"
    assert records[0]["image_size"] == [128, 128]

    with pytest.raises(OarsError, match="--track applies to detection models"):
        infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", video, "-o", str(tmp_path / "t"), *opts, "--track"])
    image_dir = os.path.join(demo_data, "images", "val")
    with pytest.raises(OarsError, match=r"--every applies to streams .*-i .*val is read as this model's own input"):
        infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", image_dir, "-o", str(tmp_path / "e"), *opts, "--every", "2"])
    with pytest.raises(OarsError, match="--track-buffer is a tracking parameter"):
        infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", video, "-o", str(tmp_path / "b"), *opts,
                    "--track-buffer", "5"])
    assert not os.path.exists(tmp_path / "t") and not os.path.exists(tmp_path / "b")
    from oars_deploy.output_paths import OutputPathError

    with pytest.raises(OutputPathError, match="-i"):  # the folder holding the video may not take the outputs
        infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", video, "-o", os.path.dirname(video), *opts])
    assert sorted(os.listdir(os.path.dirname(video))) == ["clip.mp4"]


def test_recognizer_windows_over_a_stream(infer_main, tmp_path):
    """--window N --stride S on a video recognizer: one record per window with its frames and times; a window over
    the whole 16-frame video gives Model.predict's scores for that video (the test pipeline vs the export's
    sampling and steps with the export's graph module, run eagerly)."""
    from oars import Model
    from video.demo_data import generate

    generate(tmp_path / "data", num_train=1, num_val=1, size=64, num_frames=16)
    video = str(tmp_path / "data" / "videos" / "val" / "00000.mp4")
    cfg = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
    opts = ["model.backbone.base_channels=8"]
    ckpt = random_checkpoint(cfg, opts, tmp_path)
    out = tmp_path / "windows"
    infer_main(["-c", cfg, "-w", ckpt, "-i", video, "-o", str(out), *opts, "--window", "8", "--stride", "4"])
    records = read_records(out)
    assert [(r["start_frame"], r["end_frame"]) for r in records] == [(0, 7), (4, 11), (8, 15)]
    assert records[0]["predictor"] == "clip_classes" and os.path.isfile(out / "00000_vis.mp4")

    whole = tmp_path / "whole"
    infer_main(["-c", cfg, "-w", ckpt, "-i", video, "-o", str(whole), *opts, "--window", "16"])
    (record,) = read_records(whole)
    expected = Model(cfg, weights=ckpt, overrides=opts).predict(video)[0].to_dict()["topk"]
    assert [t["class"] for t in record["topk"]] == [t["class"] for t in expected]
    np.testing.assert_allclose([t["score"] for t in record["topk"]], [t["score"] for t in expected], atol=1e-4)
    with pytest.raises(OarsError, match="--track applies to detection models"):
        infer_main(["-c", cfg, "-w", ckpt, "-i", video, "-o", str(tmp_path / "t"), *opts, "--window", "8",
                    "--track"])


def test_a_truncated_video_is_predicted_then_reported(infer_main, demo_data, tmp_path):
    """tools/infer.py on a file cut short (its header declares 24 frames): the frames it holds are predicted and
    written, the last record says so, then the run ends with the runtime's failure summary (exit status 2)."""
    from oars_deploy.failures import FolderFailuresError

    rng = np.random.default_rng(0)
    full = str(tmp_path / "full.mp4")
    with VideoWriter(full, FPS, faststart=True) as writer:  # the index in front: a cut keeps it, loses frames
        for _ in range(24):
            writer.write(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    data = open(full, "rb").read()
    cut = tmp_path / "in" / "cut.mp4"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 3])
    opts = demo_overrides(demo_data) + ["model.backbone.base_channels=4"]
    ckpt = random_checkpoint(DEMO_CFG, opts, tmp_path)
    out = tmp_path / "out"
    with pytest.raises(FolderFailuresError, match=r"cut.mp4: ended after \d+ of the 24 frames its header declares"):
        infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", str(cut), "-o", str(out), *opts])
    records = read_records(out)
    assert 0 < len(records) < 24 and records[-1]["truncated"] is True and records[-1]["declared_frames"] == 24
    infer_main(["-c", DEMO_CFG, "-w", ckpt, "-i", full, "-o", str(tmp_path / "whole"), *opts])  # intact: no error
    assert len(read_records(tmp_path / "whole")) == 24
