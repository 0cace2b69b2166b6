"""Tiny data sets of the formats that read URLs (tests/test_storage_formats.py, tests/test_tools_check_data_urls.py),
written from the demo shapes set (tests/conftest.py ``demo_data``): the same images, boxes and label maps in each
format's own layout, so a URL copy can be compared with the local folder sample by sample."""

from __future__ import annotations

import json
import os
import shutil

import cv2
import numpy as np

SHAPES = ["circle", "square", "triangle"]


def _coco(demo_data: str, split: str = "val") -> dict:
    with open(os.path.join(demo_data, "annotations", f"instances_{split}.json")) as f:
        return json.load(f)


def make_voc(demo_data: str, out: str, split: str = "val") -> str:
    """A PASCAL VOC tree (JPEGImages/*.png, Annotations/*.xml with 1-based inclusive boxes, ImageSets/Main/<split>.txt)
    of the demo split; returns ``out``."""
    coco = _coco(demo_data, split)
    names = {c["id"]: c["name"] for c in coco["categories"]}
    for sub in ("JPEGImages", "Annotations", "ImageSets/Main"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    ids = []
    for image in coco["images"]:
        stem = os.path.splitext(os.path.basename(image["file_name"]))[0]
        ids.append(stem)
        shutil.copy(os.path.join(demo_data, "images", split, image["file_name"]),
                    os.path.join(out, "JPEGImages", stem + ".png"))
        objects = []
        for ann in coco["annotations"]:
            if ann["image_id"] != image["id"]:
                continue
            x, y, w, h = ann["bbox"]
            box = [int(round(x)) + 1, int(round(y)) + 1, int(round(x + w)), int(round(y + h))]
            objects.append(f"<object><name>{names[ann['category_id']]}</name><difficult>0</difficult><bndbox>"
                           f"<xmin>{box[0]}</xmin><ymin>{box[1]}</ymin><xmax>{box[2]}</xmax><ymax>{box[3]}</ymax>"
                           "</bndbox></object>")
        with open(os.path.join(out, "Annotations", stem + ".xml"), "w") as f:
            f.write(f"<annotation><size><width>{image['width']}</width><height>{image['height']}</height>"
                    f"<depth>3</depth></size>{''.join(objects)}</annotation>")
    with open(os.path.join(out, "ImageSets", "Main", f"{split}.txt"), "w") as f:
        f.write("".join(f"{i}\n" for i in ids))
    return out


def make_yolo(demo_data: str, out: str, split: str = "val") -> str:
    """An ultralytics YOLO txt set (data.yaml, images/<split>, labels/<split>) of the demo split; returns ``out``."""
    from detection.datasets.yolo_converters import coco_to_yolo

    coco_to_yolo(os.path.join(demo_data, "annotations", f"instances_{split}.json"),
                 os.path.join(demo_data, "images", split), out, split=split, copy_images=True)
    return out


def make_frames(out: str, folders: int = 2, frames: int = 6, size: int = 24) -> str:
    """Frame folders ``frames/v<k>/img_00001.png ...`` (random pixels, seed 0), ``list.txt`` (``frames/v<k> N k``)
    and ``classes.txt``; returns ``out``."""
    rng = np.random.default_rng(0)
    lines = []
    for k in range(folders):
        folder = os.path.join(out, "frames", f"v{k}")
        os.makedirs(folder, exist_ok=True)
        for i in range(frames):
            cv2.imwrite(os.path.join(folder, f"img_{i + 1:05d}.png"),
                        rng.integers(0, 255, (size, size, 3), dtype=np.uint8))
        lines.append(f"frames/v{k} {frames} {k % 2}\n")
    with open(os.path.join(out, "list.txt"), "w") as f:
        f.write("".join(lines))
    with open(os.path.join(out, "classes.txt"), "w") as f:
        f.write("walk\nrun\n")
    return out


def make_labelme(demo_data: str, out: str, split: str = "val", count: int = 3) -> str:
    """labelme files (``<stem>.json`` beside ``<stem>.png``, one rectangle per demo box) for the first ``count``
    images of the demo split; returns ``out``."""
    coco = _coco(demo_data, split)
    names = {c["id"]: c["name"] for c in coco["categories"]}
    os.makedirs(out, exist_ok=True)
    for image in coco["images"][:count]:
        stem = os.path.splitext(os.path.basename(image["file_name"]))[0]
        shutil.copy(os.path.join(demo_data, "images", split, image["file_name"]), os.path.join(out, stem + ".png"))
        shapes = [{"label": names[a["category_id"]], "shape_type": "rectangle",
                   "points": [[a["bbox"][0], a["bbox"][1]], [a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]]]}
                  for a in coco["annotations"] if a["image_id"] == image["id"]]
        with open(os.path.join(out, stem + ".json"), "w") as f:
            json.dump({"imagePath": stem + ".png", "imageHeight": image["height"], "imageWidth": image["width"],
                       "shapes": shapes}, f)
    return out


def make_cityscapes_polygons(out: str) -> str:
    """``gtFine/val/city/a_gtFine_polygons.json`` (a road and a car on 32x24); returns ``out``/gtFine."""
    folder = os.path.join(out, "gtFine", "val", "city")
    os.makedirs(folder, exist_ok=True)
    doc = {"imgHeight": 24, "imgWidth": 32, "objects": [
        {"label": "road", "polygon": [[0, 12], [31, 12], [31, 23], [0, 23]]},
        {"label": "car", "polygon": [[4, 4], [12, 4], [12, 10], [4, 10]]},
    ]}
    with open(os.path.join(folder, "a_gtFine_polygons.json"), "w") as f:
        json.dump(doc, f)
    return os.path.join(out, "gtFine")


def make_cvat_xml(demo_data: str, out: str, split: str = "val", count: int = 3) -> str:
    """A "CVAT for images 1.1" annotations.xml (boxes) of the first ``count`` demo images, the images under
    ``out/images``; returns ``out``."""
    coco = _coco(demo_data, split)
    names = {c["id"]: c["name"] for c in coco["categories"]}
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    images = []
    for k, image in enumerate(coco["images"][:count]):
        shutil.copy(os.path.join(demo_data, "images", split, image["file_name"]),
                    os.path.join(out, "images", image["file_name"]))
        boxes = "".join(f'<box label="{names[a["category_id"]]}" xtl="{a["bbox"][0]}" ytl="{a["bbox"][1]}" '
                        f'xbr="{a["bbox"][0] + a["bbox"][2]}" ybr="{a["bbox"][1] + a["bbox"][3]}" occluded="0"/>'
                        for a in coco["annotations"] if a["image_id"] == image["id"])
        images.append(f'<image id="{k}" name="{image["file_name"]}" width="{image["width"]}" '
                      f'height="{image["height"]}">{boxes}</image>')
    labels = "".join(f"<label><name>{n}</name></label>" for n in SHAPES)
    with open(os.path.join(out, "annotations.xml"), "w") as f:
        f.write(f'<?xml version="1.0" encoding="utf-8"?>\n<annotations><version>1.1</version><meta><task><labels>'
                f'{labels}</labels></task></meta>{"".join(images)}</annotations>')
    return out
