"""The datasets read a URL data_root (``memory://`` here; ``s3://`` in tests/test_tools_s3_data.py) exactly as
they read the local copy: the same samples, the same pixels, the same annotations, the same video frames."""

from __future__ import annotations

import os

import numpy as np
import pytest

from oars.data import storage
from oars.errors import DataFileNotFoundError

fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")

SEG_ARGS = dict(img_dir="images/val", ann_dir="labels/val", img_suffix=".png", seg_map_suffix=".png",
                classes=["background", "circle", "square", "triangle"])


@pytest.fixture
def mem_root(demo_data, tmp_path, monkeypatch):
    """The demo shapes set copied to ``memory://oars-test/shapes`` (a fresh store and storage registry)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("OARS_STORAGE_OPTIONS", raising=False)
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(storage, "_listings", {})
    fs = fsspec.filesystem("memory")
    fs.put(demo_data.rstrip("/") + "/", "/oars-test/shapes/", recursive=True)
    yield "memory://oars-test/shapes"
    fs.rm("/oars-test", recursive=True)


def _relative(dataset, root: str, keys: tuple[str, ...]) -> list[dict]:
    """Every data info of ``dataset`` with the paths under ``keys`` relative to ``root``."""
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    return [{k: (os.path.relpath(v, root) if k in keys else v) for k, v in info.items()} for info in infos]


def test_a_segmentation_folder_on_a_url_gives_the_local_samples(demo_data, mem_root):
    from oars.data.transforms.loading import LoadImageFromFile
    from segmentation.datasets.seg_dataset import SegDataset
    from segmentation.transforms import LoadSegAnnotations

    local = SegDataset(data_root=demo_data, **SEG_ARGS)
    remote = SegDataset(data_root=mem_root, **SEG_ARGS)
    assert len(remote) == len(local) == 8
    keys = ("img_path", "seg_map_path")
    infos = _relative(remote, mem_root, keys)
    assert infos == _relative(local, demo_data, keys) and infos[7]["seg_map_path"] == "labels/val/0007.png"
    load = [LoadImageFromFile(), LoadSegAnnotations()]
    a, b = dict(local.get_data_info(3)), dict(remote.get_data_info(3))
    for t in load:
        a, b = t(a), t(b)
    np.testing.assert_array_equal(a["img"], b["img"])
    np.testing.assert_array_equal(a["gt_seg_map"], b["gt_seg_map"])
    fsspec.filesystem("memory").rm("/oars-test/shapes/labels/val/0005.png")
    storage._listings.clear()
    with pytest.raises(DataFileNotFoundError, match=rf"label map {mem_root}/labels/val/0005\.png not found"):
        SegDataset(data_root=mem_root, **SEG_ARGS)


def test_a_coco_file_on_a_url_gives_the_local_annotations(demo_data, mem_root):
    from detection.datasets.coco import CocoDataset

    args = dict(ann_file="annotations/instances_val.json", data_prefix={"img": "images/val"},
                classes=["circle", "square", "triangle"], test_mode=True)
    local = CocoDataset(data_root=demo_data, **args)
    remote = CocoDataset(data_root=mem_root, **args)
    infos = _relative(remote, mem_root, ("img_path",))
    assert infos == _relative(local, demo_data, ("img_path",)) and len(infos) == 8
    assert sum(len(d["instances"]) for d in infos) > 0 and infos[0]["img_path"] == "images/val/0000.png"
    # the evaluator's copy of the annotation file is a local file with the same content
    with open(remote.metainfo["ann_file"], "rb") as a, open(local.metainfo["ann_file"], "rb") as b:
        assert a.read() == b.read()
    with pytest.raises(DataFileNotFoundError, match=rf"annotation file {mem_root}/annotations/none\.json not found"):
        CocoDataset(data_root=mem_root, **dict(args, ann_file="annotations/none.json"))


def test_a_video_list_on_a_url_decodes_the_same_frames(tmp_path, mem_root):
    from video.datasets.loading import VideoDecode, VideoInit
    from video.datasets.video_dataset import VideoDataset
    from video.demo_data import write_video

    rng = np.random.default_rng(0)
    os.makedirs(tmp_path / "videos")
    write_video(tmp_path / "videos" / "a.mp4", rng.integers(0, 255, (10, 32, 32, 3), dtype=np.uint8))
    (tmp_path / "list.txt").write_text("videos/a.mp4 1\n")
    (tmp_path / "classes.txt").write_text("walk\nrun\n")
    fs = fsspec.filesystem("memory")
    url = mem_root + "/video"
    for name in ("videos/a.mp4", "list.txt", "classes.txt"):
        fs.pipe(f"/oars-test/shapes/video/{name}", (tmp_path / name).read_bytes())
    local = VideoDataset(ann_file="list.txt", data_root=str(tmp_path), classes="classes.txt")
    remote = VideoDataset(ann_file="list.txt", data_root=url, classes="classes.txt")
    assert remote.metainfo["classes"] == ("walk", "run")
    assert remote.get_data_info(0)["filename"] == f"{url}/videos/a.mp4"

    def frames(info):
        info = VideoInit()(dict(info, frame_inds=np.arange(0, 10, 3)))
        return VideoDecode()(info)["imgs"]

    np.testing.assert_array_equal(np.stack(frames(remote.get_data_info(0))), np.stack(frames(local.get_data_info(0))))
    with pytest.raises(DataFileNotFoundError, match=rf"annotation list not found: {url}/none\.txt"):
        VideoDataset(ann_file="none.txt", data_root=url, classes=["walk", "run"])
