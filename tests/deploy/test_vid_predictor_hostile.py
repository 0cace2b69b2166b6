"""The deployed video and feature predictors' input checks, without a model: a still image (whatever its suffix), a
one-frame video or a frame-feature file given to a video model, and a still image or a video given to a feature
model, are refused with one message naming the file and what the model takes; a folder without the files a model
takes says what it holds instead. (The same refusals through ``oars-infer`` with a real export are in
test_vid_predictor.py and test_vid_feature_predictor.py, which build the exports once.)"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from oars_deploy.errors import DeployError, UserError
from oars_deploy.predictors.clip_classes.cli import list_videos
from oars_deploy.predictors.clip_classes.predictor import video_input
from oars_deploy.predictors.feature_classes.files import FeatureFileError, read_feature_arrays
from oars_deploy.predictors.feature_classes.predictor import list_feature_files
from video.demo_data import render_clip, write_video

SAMPLING = {"clip_len": 1, "frame_interval": 1, "num_clips": 4, "out_of_bound_opt": "loop", "twice_sample": False,
            "decoder": "pyav"}
STEPS = [{"type": "Resize", "scale": [-1, 40]}, {"type": "CenterCrop", "size": [32, 32]}]


def _image(path: Path, ext: str = ".png") -> str:
    ok, buf = cv2.imencode(ext, render_clip(np.random.default_rng(0), 0, size=48, num_frames=1)[0])
    assert ok
    path.write_bytes(buf.tobytes())
    return str(path)


def test_video_input_refuses_still_images_and_one_frame_videos(tmp_path):
    with pytest.raises(DeployError, match=r"png.mp4 is a still image \(png\), not a video: .*video models take "
                                          r"video files \(.mp4"):
        video_input(_image(tmp_path / "png.mp4"), SAMPLING, STEPS)
    one = str(tmp_path / "one.mp4")
    write_video(one, render_clip(np.random.default_rng(0), 0, size=48, num_frames=1))
    with pytest.raises(DeployError, match=r"one.mp4: 1 frame, but the sampling needs at least 2 \(min_frames 2; "
                                          r"clip_len 1 x frame_interval 1, num_clips 4; .*picture saved as a video"):
        video_input(one, SAMPLING, STEPS)
    with pytest.raises(DeployError, match=r"one.mp4: 1 frame, but the sampling needs at least 3"):
        video_input(one, {**SAMPLING, "min_frames": 3}, STEPS)


def test_list_videos_refuses_what_is_not_a_video(tmp_path):
    with pytest.raises(UserError, match=r"still.png is a still image \(png\), not a video"):
        list_videos(_image(tmp_path / "still.png"))
    with pytest.raises(UserError, match=r"photo.mp4 is a still image \(jpeg\), not a video"):
        list_videos(_image(tmp_path / "photo.mp4", ".jpg"))
    np.savez(tmp_path / "feat.npz", rgb=np.zeros((3, 4), np.float32))
    with pytest.raises(UserError, match=r"feat.npz is a frame-feature file \(.npz\), not a video: .*frame-feature "
                                        r"models"):
        list_videos(str(tmp_path / "feat.npz"))
    images = tmp_path / "images"
    images.mkdir()
    for name in ("a.png", "b.jpg"):
        _image(images / name, Path(name).suffix)
    with pytest.raises(UserError, match=r"no videos \(.mp4, .*\) in folder .*images: it holds 2 still images "
                                        r"\(a.png, b.jpg\); video models take video files"):
        list_videos(str(images))


def test_feature_inputs_refuse_images_and_videos(tmp_path):
    png, video = _image(tmp_path / "still.png"), str(tmp_path / "clip.mp4")
    write_video(video, render_clip(np.random.default_rng(0), 0, size=48, num_frames=4))
    for lister in (list_feature_files, read_feature_arrays):
        error = UserError if lister is list_feature_files else FeatureFileError
        with pytest.raises(error, match=r"still.png is a still image \(png\), not a frame-feature file: "
                                        r"frame-feature models take .npz / .pkl / .pickle files"):
            lister(png)
        with pytest.raises(error, match=r"clip.mp4 is a video, not a frame-feature file: .*clip models"):
            lister(video)
    with pytest.raises(FeatureFileError, match=r"disguised.npz is a still image \(png\)"):
        read_feature_arrays(_image(tmp_path / "disguised.npz"))
    folder = tmp_path / "videos"
    folder.mkdir()
    Path(video).rename(folder / "clip.mp4")
    with pytest.raises(UserError, match=r"no feature files \(.npz, .pkl, .pickle\) in folder .*videos: it holds 1 "
                                        r"video file \(clip.mp4\); frame-feature models take"):
        list_feature_files(str(folder))
