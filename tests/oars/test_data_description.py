"""One ``data=`` switch (issue 37): a dataset description file sets every loader's dataset type, root, split and
classes and the model's ``num_classes`` in one place, recorded with its source. Each format is tested on tiny
generated folders at the resolved-config level; one goes through ``tools/train.py --data`` for one iteration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from oars.config import cfg_provenance, load_config
from oars.config.check import load_checked_config
from oars.config.data_description import DataDescriptionError, apply_data_description
from oars.config.resolved import resolved_values

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
UNET = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
TSM = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
LOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")


def _touch(root, *paths: str) -> None:
    for path in paths:
        full = os.path.join(root, path)
        if path.endswith("/"):
            os.makedirs(full, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write("")


def _write(path, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def _dataset(cfg, loader: str) -> dict:
    return cfg.to_dict()[loader]["dataset"]


def test_coco_description_sets_every_loader_num_classes_and_records_the_source(tmp_path):
    _touch(tmp_path / "shapes", "ann/train.json", "ann/val.json", "img/train/", "img/val/")
    desc = _write(tmp_path / "data.yaml", "format: coco\nroot: shapes\ntrain: {ann: ann/train.json, img: img/train}\n"
                                          "val: {ann: ann/val.json, img: img/val}\nnames: [a, b, c, d, e]\n")
    cfg = load_config(YOLO)
    pipeline = _dataset(cfg, "train_dataloader")["pipeline"]
    apply_data_description(cfg, desc)
    root = str(tmp_path / "shapes")
    train, val, test = (_dataset(cfg, k) for k in LOADERS)
    assert train["type"] == "CocoDataset" and train["data_root"] == root
    assert train["ann_file"] == os.path.join(root, "ann/train.json")
    assert train["data_prefix"] == {"img": os.path.join(root, "img/train")}
    assert val["ann_file"] == test["ann_file"] == os.path.join(root, "ann/val.json")  # no test split: val
    assert train["classes"] == ["a", "b", "c", "d", "e"] and cfg.model.num_classes == 5
    assert train["pipeline"] == pipeline and "palette" not in train  # 3 colours for 5 classes: left to the dataset
    assert cfg.data_description == {"file": os.path.abspath(desc), "format": "coco"}
    assert cfg_provenance(cfg)["train_dataloader.dataset.ann_file"] == f"--data {desc}"
    notes = resolved_values(cfg)
    assert notes["model.num_classes"].source == f"--data {desc}" and "data_description" in notes
    # the same file through the tools' loader, then checked: the key check accepts data_description
    checked = load_checked_config(YOLO, ["train_dataloader.batch_size=2"], data=desc)
    assert checked.train_dataloader.batch_size == 2 and checked.model.num_classes == 5


def test_ultralytics_data_yaml_as_is(tmp_path):
    _touch(tmp_path / "ds", "images/train/", "images/val/")
    desc = _write(tmp_path / "ds.yaml", "path: ds\ntrain: images/train\nval: images/val\nnc: 2\n"
                                        "names: {0: cat, 1: dog}\n")
    cfg = load_config(YOLO)
    apply_data_description(cfg, desc)
    for split, loader in zip(("train", "val", "val"), LOADERS):
        ds = _dataset(cfg, loader)
        assert ds["type"] == "YOLOTxtDataset" and ds["data_yaml"] == os.path.abspath(desc)
        assert ds["split"] == split and ds["classes"] == ["cat", "dog"]  # no test in the file: val
    assert cfg.model.num_classes == 2 and cfg.data_description["format"] == "yolo"


def test_voc_detection(tmp_path):
    _touch(tmp_path / "VOC", "ImageSets/Main/train.txt", "ImageSets/Main/val.txt", "JPEGImages/", "Annotations/")
    desc = _write(tmp_path / "voc.yaml", "format: voc\nroot: VOC\ntrain: ImageSets/Main/train.txt\n"
                                         "val: ImageSets/Main/val.txt\n")
    cfg = load_config(YOLO)
    apply_data_description(cfg, desc)
    ds = _dataset(cfg, "train_dataloader")
    voc = str(tmp_path / "VOC")
    assert ds["type"] == "VOCDataset" and ds["ann_file"] == os.path.join(voc, "ImageSets/Main/train.txt")
    assert ds["data_prefix"] == {"img": os.path.join(voc, "JPEGImages"), "ann": os.path.join(voc, "Annotations")}
    assert ds["classes"] is None and cfg.model.num_classes == 3  # no names: the dataset's and the config's stay


def test_segmentation_folder_pair_voc_and_cityscapes(tmp_path):
    _touch(tmp_path, "seg/images/train/", "seg/labels/train/", "seg/images/val/", "seg/labels/val/")
    desc = _write(tmp_path / "seg.yaml", "format: seg_folders\nroot: seg\nimg_suffix: .png\n"
                                         "train: {img: images/train, ann: labels/train}\n"
                                         "val: {img: images/val, ann: labels/val}\nnames: [background, fg]\n")
    cfg = load_config(UNET)
    apply_data_description(cfg, desc)
    ds = _dataset(cfg, "val_dataloader")
    assert ds["type"] == "SegDataset" and ds["img_dir"] == str(tmp_path / "seg/images/val")
    assert ds["ann_dir"] == str(tmp_path / "seg/labels/val") and ds["img_suffix"] == ".png"
    assert ds["classes"] == ["background", "fg"] and cfg.model.num_classes == 2

    _touch(tmp_path / "VOC12", "ImageSets/Segmentation/train.txt", "ImageSets/Segmentation/val.txt", "JPEGImages/",
           "SegmentationClass/")
    voc = _write(tmp_path / "vocseg.yaml", "format: voc_seg\nroot: VOC12\ntrain: ImageSets/Segmentation/train.txt\n"
                                           "val: ImageSets/Segmentation/val.txt\n")
    cfg = load_config(UNET)
    apply_data_description(cfg, voc)
    assert _dataset(cfg, "train_dataloader")["type"] == "PascalVOCDataset"
    assert _dataset(cfg, "train_dataloader")["split"] == str(tmp_path / "VOC12/ImageSets/Segmentation/train.txt")

    _touch(tmp_path / "cs", "leftImg8bit/train/", "gtFine/train/", "leftImg8bit/val/", "gtFine/val/")
    cs = _write(tmp_path / "cs.yaml", "format: cityscapes\nroot: cs\ntrain: train\nval: val\n")
    cfg = load_config(UNET)
    apply_data_description(cfg, cs)
    ds = _dataset(cfg, "test_dataloader")
    assert ds["type"] == "CityscapesDataset" and ds["img_dir"] == str(tmp_path / "cs/leftImg8bit/val")


def test_video_list_with_a_names_file(tmp_path):
    _touch(tmp_path / "vids", "train.txt", "val.txt")
    _write(tmp_path / "vids" / "classes.txt", "left\nright\nup\n")
    desc = _write(tmp_path / "v.yaml", "format: video_list\nroot: vids\ntrain: train.txt\nval: val.txt\n"
                                       "names: classes.txt\n")
    cfg = load_config(TSM)
    apply_data_description(cfg, desc)
    ds = _dataset(cfg, "train_dataloader")
    assert ds["type"] == "VideoDataset" and ds["ann_file"] == str(tmp_path / "vids/train.txt")
    assert ds["classes"] == ["left", "right", "up"]
    assert all(n == 3 for n in _num_classes(cfg.to_dict()["model"]))


def _num_classes(model) -> list:
    found = []
    if isinstance(model, dict):
        for k, v in model.items():
            found += [v] if k == "num_classes" else _num_classes(v)
    return found


@pytest.mark.parametrize(("text", "expected"), [
    (None, r"--data {file}: dataset description file not found"),
    ("root: .\ntrain: a\n", r"{file}: format: missing \(expected the data's format, e\.g\. format: coco\)"),
    ("format: pascal\ntrain: a.txt\nval: a.txt\n", r"{file}: format: 'pascal' is not a format the config's task "
                                                   r"\(detection\) reads; known formats: coco, voc, yolo"),
    ("format: voc\ntrain: ImageSets/Main/missing.txt\nval: ImageSets/Main/missing.txt\n",
     r"{file}: train: 'ImageSets/Main/missing.txt' does not exist \(looked for .*missing\.txt"),
    ("format: coco\ntrain: {ann: a.json}\nval: {ann: a.json}\n", r"{file}: train: format coco expects \{ann: "),
    ("format: coco\nval: {ann: a.json, img: .}\n", r"{file}: train: no 'train' split; the run needs it"),
    ("format: coco\nroot: nowhere\ntrain: x\n", r"{file}: root: 'nowhere' is not a folder"),
])
def test_bad_descriptions_name_the_file_and_the_key(tmp_path, text, expected):
    file = str(tmp_path / "d.yaml")
    if text is not None:
        _touch(tmp_path, "a.json", "a.txt")
        _write(file, text)
    cfg = load_config(YOLO)
    with pytest.raises(DataDescriptionError, match=expected.replace("{file}", re.escape(file))) as err:
        apply_data_description(cfg, file)
    assert "\n" not in str(err.value)


def test_evaluation_needs_only_the_test_split(tmp_path):
    _touch(tmp_path, "a.json", "img/")
    desc = _write(tmp_path / "d.yaml", "format: coco\nval: {ann: a.json, img: img}\n")
    cfg = load_config(YOLO)
    apply_data_description(cfg, desc, splits=("test",))
    assert _dataset(cfg, "test_dataloader")["ann_file"] == str(tmp_path / "a.json")
    assert _dataset(cfg, "train_dataloader")["type"] == "CocoDataset"  # untouched, not required


@pytest.mark.slow  # a training subprocess: ~20 s idle, a minute on two busy cores
def test_train_with_data_runs_one_iteration_on_the_described_data(demo_data, tmp_path):
    _write(tmp_path / "shapes.yaml", f"format: coco\nroot: {demo_data}\n"
                                            "train: {ann: annotations/instances_train.json, img: images/train}\n"
                                            "val: {ann: annotations/instances_val.json, img: images/val}\n"
                                            "names: [circle, square, triangle]\n")
    loaders = [f"{k}.{opt}" for k in ("train_dataloader", "val_dataloader") for opt in
               ("num_workers=0", "persistent_workers=false", "num_batch_per_epoch=1")]
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools/train.py"), "-c", YOLO, "--data", "shapes.yaml",
                           "--work-dir", "wd", "-o", "train_cfg.max_epochs=1", *loaders], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = (tmp_path / "wd" / "config.yaml").read_text()
    assert f"data_description: {{file: {tmp_path / 'shapes.yaml'}, format: coco}}" in saved
    assert f"ann_file: {demo_data}/annotations/instances_train.json" in saved
    metrics = [json.loads(line) for line in (tmp_path / "wd").rglob("scalars.json").__next__().read_text().splitlines()]
    assert any("coco/bbox_mAP" in m for m in metrics)
