"""The detection task's kinds: a mask head makes a config an instance segmenter, whose predictor's results are drawn
by the ``instance_masks`` plug-in; every other detector's by ``detection_boxes`` (declared per kind, so no role
branches on the config)."""

from __future__ import annotations

import pytest

from oars.config import load_config
from oars.tasks import get_task


@pytest.mark.parametrize("config, kind, plugin", [
    ("configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml", "detector", "detection_boxes"),
    ("configs/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml", "detector", "detection_boxes"),
    ("configs/detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml", "instance segmenter", "instance_masks"),
    ("configs/detection/cascade_rcnn/cascade_mask_rcnn_r50_fpn_1x_coco.yaml", "instance segmenter", "instance_masks"),
])
def test_a_config_gets_the_kind_and_the_plugin_of_its_heads(config, kind, plugin):
    cfg = load_config(config)
    task = get_task("detection")
    assert task.kind(cfg).name == kind
    assert task.predictor(cfg).image_plugin == plugin


def test_a_mask_head_set_to_none_is_a_detector_again():
    cfg = load_config("configs/detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml")
    cfg.model.roi_head.mask_head = None
    assert get_task("detection").predictor(cfg).image_plugin == "detection_boxes"
