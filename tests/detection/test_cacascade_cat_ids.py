"""``get_cat_ids`` (what ClassAwareSampler reads) of the detection and segmentation datasets on the generated demo
shapes, where the COCO boxes and the label maps describe the same shapes: an image's box classes are its label
map's classes less the background (shifted by one); a MultiImageMixDataset asks its inner dataset; the sampler
built on them draws only images that hold a class."""

from __future__ import annotations

import os

import pytest

from detection.datasets import CocoDataset, MultiImageMixDataset
from oars.data.samplers import ClassAwareSampler
from oars.errors import DataError
from segmentation.datasets import SegDataset

SHAPES = ["circle", "square", "triangle"]


def _coco(root: str) -> CocoDataset:
    return CocoDataset(data_root=root, ann_file="annotations/instances_train.json", data_prefix={"img": "images/train"},
                       classes=SHAPES, filter_empty_gt=False)


def _seg(root: str) -> SegDataset:
    return SegDataset(data_root=root, img_dir="images/train", ann_dir="labels/train", img_suffix=".png",
                      seg_map_suffix=".png", classes=["background", *SHAPES])


def test_box_classes_are_the_label_map_classes(demo_data):
    coco, seg = _coco(demo_data), _seg(demo_data)
    by_name = {os.path.basename(seg.get_data_info(i)["img_path"]): i for i in range(len(seg))}
    assert len(coco) == len(seg) == 16
    for i in range(len(coco)):
        j = by_name[os.path.basename(coco.get_data_info(i)["img_path"])]
        boxes = sorted({c + 1 for c in coco.get_cat_ids(i)})
        assert seg.get_cat_ids(j) == [0, *boxes] and boxes, (i, j)
    assert seg.get_cat_ids(0) is seg.get_cat_ids(0)  # read once, then cached
    mixed = MultiImageMixDataset(coco, pipeline=[])
    assert [mixed.get_cat_ids(i) for i in range(len(coco))] == [coco.get_cat_ids(i) for i in range(len(coco))]
    sampler = ClassAwareSampler(coco, seed=0)
    assert len(sampler) == 16 and (sampler.weights > 0).all()


def test_bad_label_value_names_the_file(demo_data):
    seg = SegDataset(data_root=demo_data, img_dir="images/train", ann_dir="labels/train", img_suffix=".png",
                     seg_map_suffix=".png", classes=["background", "circle"])  # squares and triangles unknown
    with pytest.raises(DataError, match=r"labels/train/.*\.png"):
        for i in range(len(seg)):
            seg.get_cat_ids(i)
