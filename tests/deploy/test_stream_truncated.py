"""``oars-infer`` on a video file cut short (its header declares 64 frames, the file holds about 20): every stream
mode (per-frame, ``--track``, ``--window``) predicts what it read, the last record and the summary line say what is
missing, and the exit status is 2 (a listed failure, as for unreadable images); the intact file, ``--max-frames``
stopping early and containers that declare no count are not failures. The clip classifier's whole-file reader
(``oars_deploy.clips.decode``) lists the same file as a failure too."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from stream_cases import tiny_brightness_classifier_dir
from tiny_exports import tiny_detector_dir

from oars_deploy.cli import main as infer_cli
from oars_deploy.cli import run as infer_run
from oars_deploy.records import read_results
from oars_deploy.streams import FrameStream, StreamSource, VideoWriter, stream_source

DECLARED = 64
STREAM_KEYS = {"declared_frames", "frames_read", "truncated", "stream_error"}
MODES = {"frames": ("detector", ["--every", "3"]), "track": ("detector", ["--track"]),
         "window": ("classifier", ["--window", "8", "--stride", "4"])}


def write_video(path: str, frames: int = DECLARED, seed: int = 0) -> str:
    """``frames`` frames of 64x64 noise (big packets: a cut keeps a known share of them), index first."""
    rng = np.random.default_rng(seed)
    with VideoWriter(path, 8, faststart=True) as writer:  # index in front: a cut keeps it, loses the frames
        for _ in range(frames):
            writer.write(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    return path


def cut_copy(src: str, dst: str, share: float = 0.35) -> str:
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[: int(len(data) * share)])
    return dst


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> str:
    """A folder with ``full.mp4`` (64 frames) and ``cut.mp4`` (its first 35 %)."""
    folder = tmp_path_factory.mktemp("cut")
    cut_copy(write_video(str(folder / "full.mp4")), str(folder / "cut.mp4"))
    return str(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    return {"detector": tiny_detector_dir(str(tmp_path_factory.mktemp("det"))),
            "classifier": tiny_brightness_classifier_dir(str(tmp_path_factory.mktemp("clipcls")))}


def frames_in(path: str) -> int:
    with FrameStream(stream_source(path)) as stream:
        return sum(1 for _ in stream)


def infer(models, mode: str, video: str, out: str, *extra: str) -> int:
    """``oars-infer`` as a user runs it (relative paths); its exit status."""
    model, flags = MODES[mode]
    try:
        infer_cli(["--model-dir", models[model], "-i", video, "-o", out, *flags, *extra])
    except SystemExit as done:
        return int(done.code)
    return 0


@pytest.mark.parametrize("mode", list(MODES))
def test_a_truncated_file_is_predicted_then_reported_with_exit_status_2(videos, models, mode, monkeypatch, capsys):
    monkeypatch.chdir(videos)
    read = frames_in("cut.mp4")
    assert 8 <= read < DECLARED // 2  # the cut kept a window's worth, and lost most of the frames
    status = infer(models, mode, "cut.mp4", f"out_{mode}")
    captured = capsys.readouterr()
    assert status == 2
    message = f"cut.mp4 ended after {read} of the {DECLARED} frames its header declares: the file is truncated or " \
              "damaged"
    summary = [line for line in captured.out.splitlines() if line.startswith("cut: ")]
    assert len(summary) == 1 and f"cut: {read} frames read" in summary[0] and summary[0].endswith(message)
    assert captured.err == ("error: 1 of 1 streams were not read to the end:\n  - cut.mp4: ended after "
                            f"{read} of the {DECLARED} frames its header declares: the file is truncated or "
                            "damaged\n")
    records = read_results(f"out_{mode}")  # what was read is kept
    assert records and all(STREAM_KEYS.isdisjoint(r) for r in records[:-1])
    assert {k: records[-1][k] for k in STREAM_KEYS & set(records[-1])} == \
        {"declared_frames": DECLARED, "frames_read": read, "truncated": True}
    if mode == "window":
        assert records[-1]["end_frame"] <= read - 1 and len(records) == (read - 8) // 4 + 1
    else:
        every = 3 if mode == "frames" else 1
        assert [r["frame"] for r in records] == list(range(0, read, every))
    assert frames_in(f"out_{mode}/cut_vis.mp4") == read


@pytest.mark.parametrize("mode", list(MODES))
def test_the_intact_file_is_no_failure_and_its_records_say_nothing_of_an_end(videos, models, mode, monkeypatch,
                                                                             capsys):
    monkeypatch.chdir(videos)
    assert infer(models, mode, "full.mp4", f"full_{mode}") == 0
    captured = capsys.readouterr()
    assert "ended after" not in captured.out and captured.err == ""
    records = read_results(f"full_{mode}")
    assert records and all(STREAM_KEYS.isdisjoint(r) for r in records)


def test_max_frames_stopping_before_the_cut_is_not_a_truncation_but_running_past_it_is(videos, models, monkeypatch,
                                                                                      capsys):
    monkeypatch.chdir(videos)
    infer_run(["--model-dir", models["detector"], "-i", "cut.mp4", "-o", "early", "--track", "--max-frames", "5"])
    assert [r["frame"] for r in read_results("early")] == [0, 1, 2, 3, 4]
    assert all(STREAM_KEYS.isdisjoint(r) for r in read_results("early"))
    assert "ended after" not in capsys.readouterr().out
    assert infer(models, "track", "cut.mp4", "past", "--max-frames", "1000") == 2
    assert read_results("past")[-1]["truncated"] is True


def test_no_check_without_a_declared_count(videos):
    """A live source (a URL: here FFmpeg reading the cut file as one) and a Matroska file declare no frame count:
    their end is where the data ends."""
    cut = os.path.join(videos, "cut.mp4")
    with FrameStream(StreamSource("url", cut, "cut")) as stream:
        read = sum(1 for _ in stream)
        assert stream.declared_frames is None and stream.early_end() is None and read > 0
    mkv = cut_copy(write_video(os.path.join(videos, "full.mkv")), os.path.join(videos, "cut.mkv"))
    with FrameStream(stream_source(mkv)) as stream:
        read = sum(1 for _ in stream)
        assert stream.declared_frames is None and stream.early_end() is None and 0 < read < DECLARED
    with FrameStream(stream_source(cut)) as stream:  # the same frames from the MP4, whose header declares 64
        assert sum(1 for _ in stream) > 0 and stream.declared_frames == DECLARED
        assert stream.early_end().to_json() == {"declared_frames": DECLARED, "frames_read": frames_in(cut),
                                                "truncated": True}


def test_a_file_cut_inside_its_first_packets_is_a_listed_failure_not_a_traceback(videos, models, monkeypatch,
                                                                                 capsys):
    """Cut inside the first keyframe: FFmpeg may stop with a decoding error (reported with it) or give no frame."""
    monkeypatch.chdir(videos)
    cut_copy("full.mp4", "stub.mp4", share=0.02)
    assert infer(models, "track", "stub.mp4", "stub") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of 1 streams were not read to the end:\n  - stub.mp4: ended after ")
    assert f"of the {DECLARED} frames its header declares" in err and "Traceback" not in err
    with open(os.path.join("stub", "results.jsonl")) as f:
        assert all(json.loads(line).get("truncated", True) for line in f)


def test_the_clip_classifier_lists_a_truncated_video_it_would_sample(videos, models, tmp_path, monkeypatch, capsys):
    """Without --window a video classifier samples the whole file (``oars_deploy.clips.decode``): the cut file is
    refused with its counts, the intact one classified."""
    (tmp_path / "videos").mkdir()
    for name in ("full.mp4", "cut.mp4"):
        (tmp_path / "videos" / name).write_bytes(open(os.path.join(videos, name), "rb").read())
    monkeypatch.chdir(tmp_path)
    try:
        infer_cli(["--model-dir", models["classifier"], "-i", "videos", "-o", "whole"])
    except SystemExit as done:
        assert done.code == 2
    else:
        pytest.fail("the truncated video was classified silently")
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of 2 videos could not be classified:")
    assert f"cut.mp4: truncated file: the header lists {DECLARED} frames, the file holds " in err
    assert [os.path.basename(r["input"]) for r in read_results("whole")] == ["full.mp4"]
