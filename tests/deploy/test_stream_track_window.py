"""``oars-infer`` on streams with ``--track`` (a detection export: records with track ids, the annotated video) and
``--window`` / ``--stride`` (a clip classifier export: one record per window with its frames and times), on tiny
generated videos and hand-built exports, and the flags refused where they do not apply. Cameras and RTSP cannot be
tested here; they go through the same reader as the files."""

from __future__ import annotations

import pytest
from stream_cases import tiny_brightness_classifier_dir, write_levels_video
from tiny_exports import tiny_detector_dir

from oars_deploy.cli import run as infer_main
from oars_deploy.clips.decode import VideoFile
from oars_deploy.errors import DeployError
from oars_deploy.records import read_results

FPS = 8
LEVELS = [20] * 12 + [230] * 12  # 12 dark frames, then 12 bright ones


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> str:
    return write_levels_video(str(tmp_path_factory.mktemp("clip") / "levels.mp4"), LEVELS, FPS)


@pytest.fixture(scope="module")
def detector(tmp_path_factory) -> str:
    return tiny_detector_dir(str(tmp_path_factory.mktemp("det")))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> str:
    return tiny_brightness_classifier_dir(str(tmp_path_factory.mktemp("clipcls")))


def test_track_writes_a_track_id_per_detection_and_a_video(video, detector, tmp_path):
    out = tmp_path / "track"
    infer_main(["--model-dir", detector, "-i", video, "-o", str(out), "--track", "--track-buffer", "10"])
    records = read_results(str(out))
    assert [r["frame"] for r in records] == list(range(len(LEVELS)))
    # the tiny detector finds the same box in every frame as class a (0.9) and class b (0.1): one track,
    # confirmed in the first frame, id 1 throughout; the 0.1 detection is below ByteTrack's low threshold: no id
    assert [[(d["class"], d["track_id"]) for d in r["detections"]] for r in records] == \
        [[("a", 1), ("b", None)]] * len(LEVELS)
    assert records[0]["detections"][0]["class"] == "a" and records[0]["predictor"] == "detection_boxes"
    with VideoFile(str(out / "levels_vis.mp4")) as drawn:
        assert drawn.total_frames == len(LEVELS) and drawn.frames([0])[0].shape == (48, 64, 3)


def test_track_with_every_tracks_the_predicted_frames(video, detector, tmp_path):
    out = tmp_path / "every"
    infer_main(["--model-dir", detector, "-i", video, "-o", str(out), "--track", "--every", "5"])
    records = read_results(str(out))
    assert [r["frame"] for r in records] == [0, 5, 10, 15, 20]
    assert {d["track_id"] for r in records for d in r["detections"]} == {1, None}


def test_windows_give_one_record_per_window_with_frames_times_and_labels(video, classifier, tmp_path):
    out = tmp_path / "win"
    infer_main(["--model-dir", classifier, "-i", video, "-o", str(out), "--window", "8", "--stride", "4",
                "--topk", "2"])
    records = read_results(str(out))
    assert [(r["start_frame"], r["end_frame"]) for r in records] == [(0, 7), (4, 11), (8, 15), (12, 19), (16, 23)]
    assert [(r["start"], r["end"]) for r in records] == [(s / FPS, e / FPS) for s, e in
                                                         [(0, 7), (4, 11), (8, 15), (12, 19), (16, 23)]]
    # each window's sampled frames (the centred CLIP_LEN of its 8) decide: dark, dark, ?, bright, bright
    labels = [r["class"] for r in records]
    assert labels[:2] == ["dark", "dark"] and labels[3:] == ["bright", "bright"]
    assert records[0]["predictor"] == "clip_classes" and records[0]["input"] == video
    assert [t["class"] for t in records[0]["topk"]] == ["dark", "bright"] and records[0]["score"] > 0.9
    with VideoFile(str(out / "levels_vis.mp4")) as drawn:
        assert drawn.total_frames == len(LEVELS) and drawn.avg_fps == pytest.approx(FPS)
        before, after, bright = drawn.frames([3, 15, 15])
    # frames before the first window's end are shown bare (dark grey); later ones carry the caption box top-left
    # (dark over the bright frame), the frame itself below it
    assert abs(int(before[4, 10].mean()) - 20) < 12 and abs(int(after[8, 3].mean()) - 32) < 12
    assert abs(int(bright[44, 60].mean()) - 230) < 12


def test_a_stream_shorter_than_the_window_is_classified_once_whole(video, classifier, tmp_path):
    out = tmp_path / "short"
    infer_main(["--model-dir", classifier, "-i", video, "-o", str(out), "--window", "100", "--max-frames", "6"])
    records = read_results(str(out))
    assert [(r["start_frame"], r["end_frame"], r["class"]) for r in records] == [(0, 5, "dark")]


def test_a_window_over_the_whole_video_equals_the_whole_video_classified(video, classifier, tmp_path):
    infer_main(["--model-dir", classifier, "-i", video, "-o", str(tmp_path / "w"), "--window", str(len(LEVELS))])
    infer_main(["--model-dir", classifier, "-i", video, "-o", str(tmp_path / "whole")])
    (window,), (whole,) = read_results(str(tmp_path / "w")), read_results(str(tmp_path / "whole"))
    assert (window["start_frame"], window["end_frame"]) == (0, len(LEVELS) - 1)
    assert [t["class"] for t in window["topk"]] == [t["class"] for t in whole["topk"]]
    assert [t["score"] for t in window["topk"]] == pytest.approx([t["score"] for t in whole["topk"]], abs=1e-6)


def test_stream_flags_are_refused_where_they_do_not_apply(video, detector, classifier, tmp_path):
    out = str(tmp_path / "o")
    images = tmp_path / "images"
    images.mkdir()
    cases = [
        ([detector, video, "--window", "8"], "--window applies to video classifiers, not to detection models"),
        ([classifier, video, "--track"], "--track applies to detection models, not to video classifiers"),
        ([detector, str(images), "--track"], "--track applies to streams .* not to -i"),
        ([classifier, video, "--stride", "2"], "--stride applies to --window"),
        ([detector, video, "--track-thresh", "0.4"], "--track-thresh is a tracking parameter: add --track"),
        ([detector, video, "--track", "--track-thresh", "2"], "--track-thresh: tracking option track_thresh: got 2"),
        ([classifier, video, "--window", "1"], "--window 1: the model's sampling needs at least 2 frames"),
        ([classifier, video, "--window", "8", "--stride", "0"], "--stride must be >= 1"),
        ([classifier, "0"], "-i 0: a video classifier reads a camera window by window: add --window N"),
    ]
    for (model, source, *flags), message in cases:
        with pytest.raises(DeployError, match=message):
            infer_main(["--model-dir", model, "-i", source, "-o", out, *flags])
    assert not (tmp_path / "o").exists()  # refused before anything was written
