"""The runtime's ``Result`` (oars_deploy.result) from ``Predictor.results``: ultralytics-style views given by the
plug-in (``boxes``, ``label_map``, ``probs``), ``names``, ``to_json`` (a string) / ``to_dict``, the old dict access,
folders and patterns as sources, and a video streamed frame by frame in constant memory (frames read lazily)."""

from __future__ import annotations

import inspect
import json
import os

import cv2
import numpy as np
import pytest
from tiny_exports import tiny_detector_dir, tiny_segmentor_dir

from oars_deploy.errors import DeployError, UserError
from oars_deploy.predictor import Predictor
from oars_deploy.result import Result
from oars_deploy.streams import VideoWriter


@pytest.fixture(scope="module")
def detector(tmp_path_factory) -> Predictor:
    return Predictor(tiny_detector_dir(str(tmp_path_factory.mktemp("det"))))


@pytest.fixture(scope="module")
def segmentor(tmp_path_factory) -> Predictor:
    return Predictor(tiny_segmentor_dir(str(tmp_path_factory.mktemp("seg")), -1)[0])


def _images(folder, n: int = 3) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(n):
        img = np.full((40 + i, 50, 3), 20 * i, np.uint8)
        paths.append(str(folder / f"{i:02d}.png"))
        cv2.imwrite(paths[-1], img)
    return paths


def test_detection_result_views_and_records(detector, tmp_path):
    files = _images(tmp_path / "imgs")
    results = detector.results(str(tmp_path / "imgs"))  # a folder: one result per image, sorted
    assert [r.path for r in results] == files and all(isinstance(r, Result) for r in results)
    r = results[0]
    assert r.names == {0: "a", 1: "b"} and r.orig_img.shape == (40, 50, 3)
    boxes = r.boxes
    # one box scored 0.9 for class a and 0.1 for class b: both above the export's score_thr 0.05
    assert len(boxes) == len(r) == 2 and boxes.xyxy.dtype == np.float32 and boxes.xyxy.shape == (2, 4)
    assert boxes.conf.dtype == np.float32 and boxes.cls.dtype == np.int64 and boxes.cls.tolist() == [0, 1]
    np.testing.assert_allclose(boxes.conf, [0.9, 0.1], rtol=1e-6)
    assert boxes.id is None  # not tracked
    np.testing.assert_allclose(boxes.xyxy, r.data["bboxes"].reshape(-1, 4))
    x1, y1, x2, y2 = boxes.xyxy[0]
    np.testing.assert_allclose(boxes.xywh[0], [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], rtol=1e-6)
    assert len(boxes[boxes.conf > 0.5]) == 1 and boxes[1].cls.tolist() == [1] and len(list(boxes)) == 2
    # the first API's forms keep working
    assert r["bboxes"] is r.data["bboxes"] and "scores" in r and r.input == r.path and r.image is r.orig_img
    record = r.to_dict()
    assert isinstance(r.to_json(), str) and json.loads(r.to_json()) == record
    assert record["predictor"] == "detection_boxes" and record["input"] == files[0]
    picture = r.plot()
    assert picture.dtype == np.uint8 and picture.ndim == 3 and picture.shape[2] == 3
    with pytest.raises(AttributeError, match="no 'label_map'.*views: boxes"):
        _ = r.label_map
    # the dict interface of __call__ is unchanged, and takes the folder too
    dicts = detector(str(tmp_path / "imgs"))
    assert len(dicts) == 3 and isinstance(dicts[0], dict)
    np.testing.assert_array_equal(dicts[0]["bboxes"], r.data["bboxes"])


def test_segmentation_label_map_and_sources(segmentor, tmp_path):
    files = _images(tmp_path / "imgs", 2)
    array = cv2.imread(files[0])
    results = segmentor.results([str(tmp_path / "imgs" / "*.png"), array])  # a glob and an array
    assert [r.path for r in results] == [*files, "array_1"]
    assert results[0].label_map.dtype == np.int64 and results[0].label_map.shape == (40, 50)
    np.testing.assert_array_equal(results[0].label_map, results[2].label_map)
    assert results[0].to_dict()["predictor"] == "semantic_labels"
    with pytest.raises(AttributeError, match="no 'boxes'"):
        _ = results[0].boxes
    saved = results[0].save(str(tmp_path / "vis.png"))
    np.testing.assert_array_equal(cv2.imread(saved), results[0].plot())


@pytest.mark.parametrize("source, message", [
    ("missing.png", "no such file or folder: missing.png"),
    ("nothing_*.png", "matches no file"),
    (3, "input 0 is a int"),
    (np.zeros((4, 4), np.uint8), r"shape \[4, 4\]"),
    ([], "nothing to predict"),
])
def test_bad_sources_named(segmentor, source, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=message):
        segmentor.results(source)
    with pytest.raises(UserError, match=message):
        segmentor(source)


def test_empty_folder_and_batch(segmentor, tmp_path):
    os.makedirs(tmp_path / "empty")
    with pytest.raises(UserError, match="no images"):
        segmentor.results(str(tmp_path / "empty"))
    with pytest.raises(DeployError, match="batch=0"):
        segmentor.results(str(tmp_path), batch=0)


def test_video_streams_frame_by_frame(segmentor, tmp_path, monkeypatch):
    """``results(video, stream=True)`` is a generator that decodes a frame only when the next result is asked for."""
    from oars_deploy.streams import source as stream_module

    video = str(tmp_path / "clip.mp4")
    with VideoWriter(video, 8) as writer:
        for i in range(10):
            img = np.full((32, 48, 3), 30, np.uint8)
            img[5:20, 3 * i:3 * i + 10] = 200
            writer.write(img)
    decoded: list[int] = []
    original = stream_module.FrameStream._frame

    def counting(self, frame):
        decoded.append(1)
        return original(self, frame)

    monkeypatch.setattr(stream_module.FrameStream, "_frame", counting)
    gen = segmentor.results(video, stream=True)
    assert inspect.isgenerator(gen) and decoded == []  # checked, nothing read yet
    first = next(gen)
    assert first.frame == 0 and first.path == video and first.stem == "clip_000000" and len(decoded) <= 2
    second = next(gen)
    assert second.frame == 1 and len(decoded) <= 3 and first.to_dict()["frame"] == 0
    rest = list(gen)
    assert len(rest) == 8 and len(decoded) == 10


def test_mask_and_clip_views_and_class_filter():
    """Instance masks (the ``instance_masks`` plug-in inherits the box views) and a clip's top-k as ``probs``; the
    class filter keeps every per-detection array in step."""
    from oars_deploy.plugins import get_predictor

    masks = np.zeros((3, 6, 8), bool)
    masks[1, 2:4, 2:4] = True
    data = {"bboxes": np.arange(12, dtype=np.float32).reshape(3, 4), "scores": np.array([0.9, 0.5, 0.2], np.float32),
            "labels": np.array([0, 1, 0]), "masks": masks}
    r = Result("x.png", np.zeros((6, 8, 3), np.uint8), data, "instance_masks", ["a", "b"], [[0, 0, 0], [9, 9, 9]])
    assert r.masks.data.shape == (3, 6, 8) and r.masks.data.dtype == bool and len(r.masks[1:]) == 2
    kept = get_predictor("instance_masks").keep_classes(data, [1])
    assert kept["labels"].tolist() == [1] and kept["masks"].shape == (1, 6, 8) and kept["masks"][0].sum() == 4
    np.testing.assert_array_equal(kept["bboxes"], data["bboxes"][1:2])
    clip = Result("v.mp4", None, {"topk": [(2, "c", 0.7), (0, "a", 0.2)]}, "clip_classes", ["a", "b", "c"], [])
    assert clip.probs.top1 == 2 and clip.probs.top5 == [2, 0] and clip.probs.top1conf == pytest.approx(0.7)
    assert clip.names[clip.probs.top1] == "c" and len(clip) == 1
    with pytest.raises(AttributeError, match="no 'boxes'.*views: probs"):
        _ = clip.boxes
