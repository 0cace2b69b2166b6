"""The deploy predictor's instance masks without a model: RLE records (checked with pycocotools), mask pasting
in the detection post-processing (original pixels), and clear errors for a deploy.yaml that does not fit."""

from __future__ import annotations

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from oars_deploy.errors import DeployError
from oars_deploy.mask_paste import paste_masks
from oars_deploy.predictors.detection_boxes.postprocess import detection
from oars_deploy.predictors.detection_boxes.records import detection_record
from oars_deploy.predictors.detection_boxes.rle import mask_to_rle, rle_to_mask


def _masks() -> np.ndarray:
    rng = np.random.default_rng(0)
    masks = rng.random((5, 23, 31)) > 0.6
    masks[1] = False  # empty
    masks[2] = True  # full
    masks[3, 0, 0], masks[4, 0, 0] = True, False  # runs starting with 1s and with 0s
    return masks


def test_rle_is_coco_uncompressed_rle():
    for mask in _masks():
        rle = mask_to_rle(mask)
        assert rle["size"] == [23, 31] and sum(rle["counts"]) == mask.size
        decoded = mask_utils.decode(mask_utils.frPyObjects(rle, 23, 31)).astype(bool)
        assert np.array_equal(decoded, mask) and np.array_equal(rle_to_mask(rle), mask)
    # pycocotools' own encoding of the same mask decodes equal (column-major runs, 0s first)
    ref = mask_utils.encode(np.asfortranarray(_masks()[3].astype(np.uint8)))
    assert np.array_equal(mask_utils.decode(ref).astype(bool), rle_to_mask(mask_to_rle(_masks()[3])))


def test_detection_record_has_segmentation():
    masks = _masks()[:2]
    pred = {"bboxes": np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float64), "scores": np.array([0.9, 0.5]),
            "labels": np.array([0, 1]), "masks": masks}
    rec = detection_record("a.png", pred, ["cat", "dog"])
    assert [d["class"] for d in rec["detections"]] == ["cat", "dog"]
    assert all(np.array_equal(rle_to_mask(d["segmentation"]), m) for d, m in zip(rec["detections"], masks))
    with pytest.raises(ValueError, match="1 masks for 2 detections"):
        detection_record("a.png", {**pred, "masks": masks[:1]}, ["cat", "dog"])


POST = {"type": "detection", "inside_graph": ["rpn", "roi_head", "nms", "mask_head"], "boxes_in": "input_pixels",
        "masks": {"output": "masks", "size": [28, 28], "threshold": 0.5, "paste": "mmdet"}}


def _outputs() -> dict:
    rng = np.random.default_rng(1)
    boxes = np.zeros((1, 4, 4), np.float32)
    boxes[0, :2] = [[10, 12, 60, 50], [30, 5, 70, 40]]
    return {"num_dets": np.array([2]), "boxes": boxes, "scores": np.array([[0.9, 0.6, 0, 0]], np.float32),
            "labels": np.array([[1, 0, -1, -1]]), "masks": rng.random((1, 4, 28, 28)).astype(np.float32)}


def test_detection_pastes_masks_in_original_pixels():
    outs = _outputs()
    meta = {"scale_factor": (0.5, 0.5), "ori_shape": (160, 180), "img_shape": (64, 64)}
    res = detection(outs, [meta], POST)[0]
    assert res["bboxes"].tolist() == [[20, 24, 120, 100], [60, 10, 140, 80]]
    assert res["masks"].shape == (2, 160, 180) and res["masks"].dtype == bool
    want = paste_masks(outs["masks"][0, :2], res["bboxes"], (160, 180), 0.5)
    assert np.array_equal(res["masks"], want) and want.any()
    assert not res["masks"][0, :, :20].any() and not res["masks"][0, 100:].any()  # nothing outside the box
    tv = detection(outs, [meta], {**POST, "masks": {**POST["masks"], "paste": "torchvision"}})[0]["masks"]
    assert not np.array_equal(tv, res["masks"])  # the mode is used


@pytest.mark.parametrize("change, message", [
    ({"paste": "nearest"}, "masks.paste='nearest'"),
    ({"output": "mask_probs"}, "names output 'mask_probs'"),
    ({"threshold": None}, "postprocess.masks must be"),
])
def test_mask_settings_errors(change, message):
    spec = {k: v for k, v in {**POST["masks"], **change}.items() if v is not None}
    meta = {"scale_factor": (1, 1), "ori_shape": (64, 64), "img_shape": (64, 64)}
    with pytest.raises(DeployError, match=message):
        detection(_outputs(), [meta], {**POST, "masks": spec})
