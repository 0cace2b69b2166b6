"""tools/infer.py -c <video config> as a user calls it (from their own folder, relative paths) refuses a still image
with one message naming the file and what video models take, instead of classifying a picture into a motion class
(FFmpeg opens a PNG as a one-frame video). The config is the shrunk TSN of the export tests with random weights: the
refusal comes before the model is loaded, so nothing is trained. The same listing (``list_videos``) refuses a
folder of images: tests/deploy/test_vid_predictor_hostile.py, and through oars-infer test_vid_predictor.py."""

from __future__ import annotations

import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
from demo_utils import ROOT
from vid_export_cases import checkpoint, video_config

from video.demo_data import render_clip


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory):
    """A user's folder: the config and weights under model/ and still.png."""
    root = tmp_path_factory.mktemp("video_user")
    (root / "model").mkdir()
    cfg = video_config(str(root / "model"), "tsn")
    ckpt = checkpoint(cfg)
    frame = render_clip(np.random.default_rng(0), 0, size=48, num_frames=1)[0]
    cv2.imwrite(str(root / "still.png"), frame)
    return root, os.path.relpath(cfg, root), os.path.relpath(ckpt, root)


@pytest.mark.slow  # one subprocess importing torch: 5-10 s on a shared machine
def test_infer_refuses_a_still_image(user_folder):
    root, cfg, ckpt = user_folder
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "infer.py"), "-c", cfg, "-w", ckpt, "-i",
                           "still.png", "-o", "out"], cwd=root, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1")))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert ("error: still.png is a still image (png), not a video: a video model classifies the motion across a "
            "clip's frames; video models take video files (.mp4, .avi, .mkv, .mov, .webm, .m4v, .mpg, .mpeg)"
            in proc.stderr), proc.stderr[-2000:]
    assert not (root / "out" / "predictions.json").exists()
