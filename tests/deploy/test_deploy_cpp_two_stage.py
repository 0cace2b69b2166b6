"""deploy/cpp on an exported Mask R-CNN: the C++ predictor's ONNX Runtime backend gives the Python predictor's
boxes, scores, labels and pasted masks (RLE in its JSON lines).

Two-stage graphs hold ONNX ``NonMaxSuppression`` and ``RoiAlign``, which OpenCV DNN 4.6 cannot run, so this needs
oars_infer built with ONNX Runtime: set ``OARS_ONNXRUNTIME_ROOT`` to an ONNX Runtime C/C++ SDK folder
(``include/onnxruntime_cxx_api.h``, ``lib/libonnxruntime.so``, e.g. an unpacked onnxruntime-linux-x64 release).
Without it (or without deploy/cpp's apt packages) the test is skipped. The binary is built into its own folder
(deploy/cpp/build-ort), so the default OpenCV-only build of test_deploy_cpp.py is left as it is.
"""

from __future__ import annotations

import os
import sys

import cv2
import numpy as np
import pytest
from cpp_cases import run_oars_infer
from demo_utils import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "detection", "export"))
from two_stage_cases import SIZE, build_case, save_checkpoint  # noqa: E402

BOX_ATOL, SCORE_ATOL, MIN_MASK_IOU, MAX_DIFFER = 1e-2, 1e-3, 0.98, 0.002


def _rle_to_mask(rle: dict) -> np.ndarray:
    from oars_deploy.predictors.detection_boxes.rle import rle_to_mask

    return rle_to_mask(rle)


@pytest.mark.slow
def test_cpp_onnxruntime_mask_rcnn_matches_python_predictor(oars_infer_ort, tmp_path):
    from oars.export import write_deploy_yaml
    from oars.pipelines.export import export_model
    from oars_deploy.deploy_config import read_deploy_yaml

    cfg, model = build_case("mask")
    out = str(tmp_path / "export")
    export_model(cfg, save_checkpoint(model, str(tmp_path)), out)
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(2 * SIZE, 2 * SIZE), (96, 150)]):  # halved; letterboxed
        img = (rng.random((h, w, 3)) * 60 + 90).astype(np.uint8)
        cv2.circle(img, (w // 2, h // 2), min(h, w) // 4, (40, 200, 60), -1)
        cv2.rectangle(img, (4, 4), (w // 3, h // 3), (220, 40, 40), -1)
        cv2.imwrite(str(images / f"img{i}.png"), img)
    total = _compare(oars_infer_ort, out, images, tmp_path / "o")
    assert total > 0, "degenerate test model: no detections at all"
    # torchvision's paste rule (FCNMaskHead.paste_mode of converted torchvision weights), same graph
    deploy = read_deploy_yaml(os.path.join(out, "deploy.yaml"))
    assert deploy["postprocess"]["masks"]["paste"] == "mmdet"
    deploy["postprocess"]["masks"]["paste"] = "torchvision"
    write_deploy_yaml(os.path.join(out, "deploy.yaml"), deploy)
    assert _compare(oars_infer_ort, out, images, tmp_path / "o2") == total


def _compare(binary: str, out: str, images, results) -> int:
    """oars_infer's detections and masks on every image = the Python predictor's; returns their number."""
    from oars_deploy.predictor import Predictor

    lines = run_oars_infer(binary, out, str(images), str(results), backend="onnxruntime")
    predictor = Predictor(out)
    total = 0
    for name in sorted(os.listdir(images)):
        path = str(images / name)
        got = [r for r in lines if r["image"] == path and "bbox" in r]
        ref = predictor.predict([cv2.imread(path)])[0]
        assert len(got) == len(ref["scores"]), f"{name}: C++ {len(got)} detections, Python {len(ref['scores'])}"
        unused = list(range(len(got)))
        for box, score, label, mask in zip(ref["bboxes"], ref["scores"], ref["labels"], ref["masks"]):
            k = next((k for k in unused if got[k]["label"] == int(label)
                      and np.abs(np.asarray(got[k]["bbox"]) - box).max() <= BOX_ATOL
                      and abs(got[k]["score"] - float(score)) <= SCORE_ATOL), None)
            assert k is not None, f"{name}: Python detection {box.tolist()} {score:.5f} {label} has no C++ partner"
            unused.remove(k)
            cpp_mask = _rle_to_mask(got[k]["segmentation"])
            assert cpp_mask.shape == mask.shape
            union, differ = (cpp_mask | mask).sum(), (cpp_mask != mask).sum()
            assert union == 0 or (cpp_mask & mask).sum() / union >= MIN_MASK_IOU
            # the same sampling (float sums in another order): pixels differ only exactly at the threshold
            assert differ <= max(2, MAX_DIFFER * union), f"{name}: {differ} of {union} mask pixels differ"
        total += len(got)
        assert os.path.isfile(results / f"{os.path.splitext(name)[0]}_vis.png")
    return total
