"""Streams through the image predictors: a video file, the same file over loopback HTTP, ``--every``,
``--max-frames``, the annotated video and the errors (oars_deploy.streams). Cameras and RTSP cannot be tested here
(no camera, no RTSP server); they go through the same FFmpeg open call."""

from __future__ import annotations

import functools
import http.server
import os
import threading

import numpy as np
import pytest
from tiny_exports import tiny_detector_dir, tiny_segmentor_dir

from oars_deploy.cli import run as infer_main
from oars_deploy.clips.decode import VideoFile
from oars_deploy.errors import DeployError
from oars_deploy.records import read_results
from oars_deploy.streams import VideoWriter, stream_source

FPS = 8
FRAMES = 12


def _frames(n: int = FRAMES, h: int = 48, w: int = 64) -> list[np.ndarray]:
    """A bright square moving right over a dark background: every frame different."""
    out = []
    for i in range(n):
        img = np.full((h, w, 3), 30, np.uint8)
        img[10:30, 3 * i:3 * i + 20] = (40, 200, 240)
        out.append(img)
    return out


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("stream") / "clip.mp4"
    with VideoWriter(path, FPS) as writer:
        for img in _frames():
            writer.write(img)
    return str(path)


@pytest.fixture(scope="module")
def segmentor(tmp_path_factory) -> str:
    return tiny_segmentor_dir(str(tmp_path_factory.mktemp("seg")), -1)[0]


def test_sources_are_told_apart(tmp_path):
    assert stream_source(str(tmp_path / "a.mp4")).kind == "file"
    assert stream_source("http://127.0.0.1:1/x/clip.mp4?t=1").name == "clip"
    assert stream_source("rtsp://cam.local/live").kind == "url"
    assert stream_source("0").kind == "camera" and stream_source("0").name == "camera0"
    assert stream_source(str(tmp_path / "a.png")) is None and stream_source(str(tmp_path)) is None
    with pytest.raises(DeployError, match="unsupported URL scheme 'ftp'"):
        stream_source("ftp://host/clip.mp4")


def test_video_file_gives_one_record_per_frame_with_times_and_an_annotated_video(clip, segmentor, tmp_path):
    out = tmp_path / "out"
    infer_main(["--model-dir", segmentor, "-i", clip, "-o", str(out)])
    records = read_results(str(out))
    assert [r["frame"] for r in records] == list(range(FRAMES))
    assert [r["time"] for r in records] == [round(i / FPS, 6) for i in range(FRAMES)]
    assert {r["predictor"] for r in records} == {"semantic_labels"} and {r["input"] for r in records} == {clip}
    assert records[0]["image_size"] == [48, 64] and records[3]["label_png"] == "clip_000003.png"
    assert (out / "clip_000003.png").is_file()
    with VideoFile(str(out / "clip_vis.mp4")) as video:
        assert video.total_frames == FRAMES and video.avg_fps == pytest.approx(FPS)
        drawn = video.frames([5])[0]
    assert drawn.shape[0] >= 48  # the drawn picture (label map over the frame), not the bare frame


def test_every_and_max_frames(clip, segmentor, tmp_path):
    out = tmp_path / "every"
    infer_main(["--model-dir", segmentor, "-i", clip, "-o", str(out), "--every", "3", "--max-frames", "10"])
    assert [r["frame"] for r in read_results(str(out))] == [0, 3, 6, 9]
    with VideoFile(str(out / "clip_vis.mp4")) as video:
        assert video.total_frames == 10  # every read frame is in the video, the skipped ones drawn held
    with pytest.raises(DeployError, match="--every must be >= 1"):
        infer_main(["--model-dir", segmentor, "-i", clip, "-o", str(tmp_path / "bad"), "--every", "0"])


def test_the_same_file_over_loopback_http_gives_the_same_records(clip, tmp_path):
    model = tiny_detector_dir(str(tmp_path / "det"))
    handler = functools.partial(_QuietHandler, directory=os.path.dirname(clip))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/clip.mp4"
        infer_main(["--model-dir", model, "-i", url, "-o", str(tmp_path / "http")])
    finally:
        server.shutdown()
        server.server_close()
    infer_main(["--model-dir", model, "-i", clip, "-o", str(tmp_path / "file")])
    over_http, from_file = read_results(str(tmp_path / "http")), read_results(str(tmp_path / "file"))
    assert len(over_http) == FRAMES and over_http[0]["input"] == url
    assert [{**r, "input": None} for r in over_http] == [{**r, "input": None} for r in from_file]
    assert over_http[0]["predictor"] == "detection_boxes" and over_http[0]["detections"][0]["class"] == "a"
    assert (tmp_path / "http" / "clip_vis.mp4").is_file()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_stream_errors_name_the_source(segmentor, tmp_path):
    with pytest.raises(DeployError, match="video file not found: .*missing.mp4"):
        infer_main(["--model-dir", segmentor, "-i", str(tmp_path / "missing.mp4"), "-o", str(tmp_path / "o")])
    still = tmp_path / "still.mp4"
    still.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    with pytest.raises(DeployError, match="still.mp4"):
        infer_main(["--model-dir", segmentor, "-i", str(still), "-o", str(tmp_path / "o")])


def test_writer_pads_odd_sizes_and_refuses_a_size_change(tmp_path):
    path = tmp_path / "odd.mp4"
    with VideoWriter(path, 5) as writer:
        writer.write(np.zeros((31, 45, 3), np.uint8))
        with pytest.raises(DeployError, match="every frame must be 32x46"):
            writer.write(np.zeros((20, 20, 3), np.uint8))
    with VideoFile(str(path)) as video:
        assert video.total_frames == 1 and video.frames([0])[0].shape == (32, 46, 3)
