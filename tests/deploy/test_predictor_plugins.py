"""Predictor plug-ins (oars_deploy.plugins) and result records (oars_deploy.records).

The registry, deploy.yaml's ``predictor`` key (written by write_deploy_yaml, inferred for exports written before it
existed, an unknown name refused with the known ones), the CLI's dispatch through the registry (a plug-in
registered here runs through ``oars-infer`` with no runtime file edited) and every record's JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import os.path as osp

import cv2
import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from oars.export.deploy_config import write_deploy_yaml
from oars_deploy import plugins
from oars_deploy.cli import run as infer_main
from oars_deploy.deploy_config import read_deploy_yaml, validate_deploy
from oars_deploy.errors import DeployError
from oars_deploy.plugins import (
    PredictorPlugin,
    PredictorRun,
    get_predictor,
    predictor_kind,
    predictor_name,
    predictor_names,
    register_predictor,
)
from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
from oars_deploy.predictors.detection_boxes.records import detection_result, detections_json
from oars_deploy.predictors.detection_boxes.rle import rle_to_mask
from oars_deploy.predictors.feature_classes.records import FeatureClassesRecord
from oars_deploy.predictors.gan_images.records import GANImagesRecord
from oars_deploy.predictors.semantic_labels.records import semantic_labels_result
from oars_deploy.records import RESULTS_FILE, ResultRecord, read_results, write_results

KINDS = ["clip_classes", "detection_boxes", "feature_classes", "gan_images", "instance_masks", "semantic_labels",
         "video_segments"]


def _image_deploy(task: str, post: dict, outputs: list[dict] | None = None) -> dict:
    """A minimal valid deploy.yaml of an image model at 32x32 (no ``predictor`` key)."""
    return {
        "version": 1, "model": {"name": "Tiny", "task": task, "onnx": "model.onnx"},
        "labels": ["a", "b", "c", "d"], "palette": [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]],
        "input": {"name": "image", "shape": [-1, 3, 32, 32], "dtype": "float32", "layout": "NCHW", "color": "BGR"},
        "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": True, "interpolation": "linear"},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "Pad", "size": [32, 32], "value": 0.0}, {"type": "Permute"}],
        "outputs": outputs or [{"name": "logits", "shape": [-1, 4, 32, 32], "dtype": "float32"}],
        "postprocess": post,
    }


SEG = _image_deploy("segmentation", {"type": "segmentation", "output_op": "none", "resize_to_original": "bilinear"})
DET = _image_deploy("detection", {"type": "detection", "inside_graph": ["decode", "nms"]},
                    [{"name": n, "shape": [-1, 10], "dtype": "float32"} for n in ("num_dets", "boxes", "scores",
                                                                                    "labels")])
MASKS = _image_deploy("detection", {"type": "detection", "inside_graph": ["decode", "nms"],
                                    "masks": {"output": "masks", "size": [28, 28], "threshold": 0.5}},
                      [{"name": n, "shape": [-1, 10], "dtype": "float32"} for n in ("num_dets", "boxes", "scores",
                                                                                      "labels", "masks")])


def _section_deploy(key: str) -> dict:
    """A deploy dict with one plug-in section (content not validated here: predictor_kind reads only the key)."""
    return {**copy.deepcopy(SEG), "model": {"name": "X", "task": "video" if key != "gan" else "gan",
                                            "onnx": "model.onnx"}, key: {}}


# ----------------------------------------------------------------------------- registry and predictor_kind
def test_registry_holds_one_plugin_per_kind():
    assert sorted(predictor_names()) == KINDS
    for name in KINDS:
        plugin = get_predictor(name)
        assert isinstance(plugin, PredictorPlugin) and plugin.name == name and plugin.describes
    with pytest.raises(DeployError, match="unknown predictor 'boxes'; known predictors: .*detection_boxes"):
        get_predictor("boxes")


def test_a_duplicate_name_is_an_error():
    with pytest.raises(ValueError, match="'semantic_labels' is registered already"):
        @register_predictor("semantic_labels")
        class Other(PredictorPlugin):
            def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
                return PredictorRun()


@pytest.mark.parametrize(("deploy", "kind"), [
    (SEG, "semantic_labels"), (DET, "detection_boxes"), (MASKS, "instance_masks"),
    (_section_deploy("gan"), "gan_images"), (_section_deploy("sampling"), "clip_classes"),
    (_section_deploy("features"), "feature_classes"), (_section_deploy("segments"), "video_segments"),
], ids=["segmentation", "boxes", "masks", "gan", "sampling", "features", "segments"])
def test_predictor_kind_is_inferred_from_the_content(deploy, kind):
    assert predictor_kind(deploy) == kind
    assert predictor_name(deploy) == kind  # no key: inferred
    assert predictor_name({**deploy, "predictor": "x"}) == "x"  # the key wins


def test_predictor_kind_falls_back_on_postprocess_type_and_says_when_it_cannot_tell():
    assert predictor_kind({**SEG, "model": {**SEG["model"], "task": "mytask"}}) == "semantic_labels"
    with pytest.raises(DeployError, match="cannot tell which predictor runs this model .*one of: clip_classes"):
        predictor_kind({**SEG, "model": {**SEG["model"], "task": "mytask"}, "postprocess": {"type": "none"}})


def test_write_deploy_yaml_writes_the_key_first_and_old_exports_still_load(tmp_path):
    deploy = copy.deepcopy(MASKS)
    path = str(tmp_path / "new" / "deploy.yaml")
    write_deploy_yaml(path, deploy)
    assert deploy["predictor"] == "instance_masks"
    with open(path) as f:
        assert list(yaml.safe_load(f))[:2] == ["version", "predictor"]
    assert read_deploy_yaml(path)["predictor"] == "instance_masks"
    explicit = {**copy.deepcopy(SEG), "predictor": "semantic_labels"}
    write_deploy_yaml(str(tmp_path / "e.yaml"), explicit)  # a name the exporter gave is kept
    old = str(tmp_path / "old.yaml")  # written before the key existed
    with open(old, "w") as f:
        yaml.safe_dump(DET, f, sort_keys=False)
    data = read_deploy_yaml(old)
    assert "predictor" not in data and predictor_name(data) == "detection_boxes"


def test_an_unknown_predictor_name_is_a_clear_error(tmp_path):
    with pytest.raises(DeployError) as err:
        validate_deploy({**copy.deepcopy(SEG), "predictor": "semantic_label"}, "m/deploy.yaml")
    msg = str(err.value)
    assert msg.startswith("m/deploy.yaml: unknown predictor 'semantic_label'; known predictors:")
    assert all(name in msg for name in KINDS)
    with pytest.raises(DeployError, match="unknown predictor"):
        write_deploy_yaml(str(tmp_path / "deploy.yaml"), {**copy.deepcopy(SEG), "predictor": 3})


def test_a_plugin_validates_its_own_section():
    with pytest.raises(DeployError, match="gan.kind must be one of"):
        validate_deploy({**copy.deepcopy(SEG), "predictor": "gan_images", "gan": {"kind": "x"}}, "d.yaml")
    with pytest.raises(DeployError, match=r"input.shape must be \[B, 3, H, W\]"):
        validate_deploy({**copy.deepcopy(SEG), "input": {**SEG["input"], "shape": [1, 3]}}, "d.yaml")


# ----------------------------------------------------------------------------- the CLI through the registry
def _tiny_segmentor(folder: str, with_key: bool) -> str:
    """A 1x1-conv 'segmentor' export (3 -> 4 classes, 32x32); ``with_key`` False writes deploy.yaml as exports did
    before the ``predictor`` key."""
    weight = np.random.default_rng(0).normal(size=(4, 3, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "w"], ["logits"])], "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4, 32, 32])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, osp.join(folder, "model.onnx"))
    if with_key:
        write_deploy_yaml(osp.join(folder, "deploy.yaml"), copy.deepcopy(SEG))
    else:
        with open(osp.join(folder, "deploy.yaml"), "w") as f:
            yaml.safe_dump(SEG, f, sort_keys=False)
    return folder


def _images(folder: str, sizes: list[tuple[int, int]]) -> str:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    for i, (h, w) in enumerate(sizes):
        cv2.imwrite(osp.join(folder, f"img{i}.png"), rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return folder


@pytest.mark.parametrize("with_key", [True, False], ids=["predictor_key", "old_export"])
def test_cli_writes_results_jsonl_for_new_and_old_exports(tmp_path, with_key):
    model_dir = _tiny_segmentor(str(tmp_path / "m"), with_key)
    images = _images(str(tmp_path / "images"), [(40, 64), (32, 32)])
    out = tmp_path / "out"
    infer_main(["--model-dir", model_dir, "-i", images, "-o", str(out)])
    records = read_results(str(out))
    assert [osp.basename(r["input"]) for r in records] == ["img0.png", "img1.png"]
    for rec, size in zip(records, [[40, 64], [32, 32]]):
        assert rec["predictor"] == "semantic_labels" and rec["image_size"] == size
        assert (out / rec["label_png"]).is_file()
        assert sum(c["pixels"] for c in rec["classes"]) == size[0] * size[1]
        assert all(c["class"] == "abcd"[c["label"]] for c in rec["classes"])


def test_a_registered_plugin_runs_through_the_cli(tmp_path):
    """A new kind of output: registered here, named in deploy.yaml, run by oars-infer, its records in
    results.jsonl; its flags parsed; no runtime module edited."""

    class _Echo(ResultRecord):
        predictor = "test_echo"

        def __init__(self, path: str, times: int) -> None:
            self.path, self.times = path, times

        def to_json(self) -> dict:
            return {"predictor": self.predictor, "input": self.path, "times": self.times}

    @register_predictor("test_echo")
    class Echo(PredictorPlugin):
        section = "echo"
        describes = "echo models"

        def validate(self, deploy: dict, path: str) -> None:
            if not isinstance(deploy["echo"].get("times"), int):
                raise DeployError(f"{path}: echo.times must be an int")

        def add_arguments(self, parser: argparse.ArgumentParser) -> None:
            plugins.add_flag(parser, "--echo-extra", type=int, default=0)

        def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
            return PredictorRun(records=[_Echo(args.input, deploy["echo"]["times"] + args.echo_extra)], total=1)

    try:
        model_dir = tmp_path / "m"
        model_dir.mkdir()
        deploy = {**copy.deepcopy(SEG), "echo": {"times": 2}}
        assert predictor_kind(deploy) == "test_echo"  # its section claims the export
        write_deploy_yaml(str(model_dir / "deploy.yaml"), deploy)
        assert deploy["predictor"] == "test_echo"
        image = _images(str(tmp_path / "images"), [(8, 8)])
        infer_main(["--model-dir", str(model_dir), "-i", image, "-o", str(tmp_path / "out"), "--echo-extra", "3"])
        assert read_results(str(tmp_path / "out")) == [{"predictor": "test_echo", "input": image, "times": 5}]
    finally:
        plugins._PLUGINS.pop("test_echo", None)


def test_flags_that_do_not_fit_are_refused_with_the_kinds_they_apply_to(tmp_path):
    model_dir = _tiny_segmentor(str(tmp_path / "m"), True)
    images = _images(str(tmp_path / "images"), [(8, 8)])
    with pytest.raises(DeployError, match="--draw-threshold applies to detection models, not to task 'segmentation'"):
        infer_main(["--model-dir", model_dir, "-i", images, "-o", str(tmp_path / "o"), "--draw-threshold", "0.5"])


# ----------------------------------------------------------------------------- records
def test_records_are_json_and_round_trip(tmp_path):
    mask = np.zeros((6, 8), bool)
    mask[1:4, 2:5] = True
    pred = {"bboxes": np.array([[2.0, 1.0, 5.0, 4.0]]), "scores": np.array([0.912345678]), "labels": np.array([1])}
    boxes = detection_result("a.png", pred, ["x", "y"], (6, 8))
    masks = detection_result("a.png", {**pred, "masks": mask[None]}, ["x", "y"], (6, 8))
    labels = np.array([[0, 0, 3], [3, 3, 3]])
    seg = semantic_labels_result("b.png", labels, ["bg", "p", "q", "r"], "b.png")
    top = {"path": "v.mp4", "topk": [(2, "run", 0.7), (0, "walk", 0.2)], "total_frames": 16,
           "frame_inds": np.arange(8)}
    clip = ClipClassesRecord.from_result(top)
    feat = FeatureClassesRecord.from_result({**top, "path": "f.npz"})
    gan = GANImagesRecord(input="c.png", images=["c.png", "c_pair.png"], attrs={"Male": 1.0})
    noise = GANImagesRecord(input=None, images=["sample_000.png"], seed=0, index=0, label=3, class_name="three")
    records = [boxes, masks, seg, clip, feat, gan, noise]
    for rec in records:
        assert json.loads(json.dumps(rec.to_json())) == rec.to_json()
    assert boxes.to_json() == {"predictor": "detection_boxes", "input": "a.png", "image_size": [6, 8], "detections": [
        {"bbox": [2.0, 1.0, 5.0, 4.0], "score": 0.91235, "label": 1, "class": "y"}]}
    got = masks.to_json()
    assert got["predictor"] == "instance_masks"
    np.testing.assert_array_equal(rle_to_mask(got["detections"][0]["segmentation"]), mask)
    assert seg.to_json() == {"predictor": "semantic_labels", "input": "b.png", "image_size": [2, 3],
                             "label_png": "b.png", "classes": [{"label": 0, "class": "bg", "pixels": 2},
                                                               {"label": 3, "class": "r", "pixels": 4}]}
    assert clip.to_json() == {"predictor": "clip_classes", "input": "v.mp4", "label": 2, "class": "run", "score": 0.7,
                              "topk": [{"label": 2, "class": "run", "score": 0.7},
                                       {"label": 0, "class": "walk", "score": 0.2}],
                              "total_frames": 16, "frame_inds": list(range(8))}
    assert feat.to_json()["predictor"] == "feature_classes" and feat.to_json()["input"] == "f.npz"
    assert gan.to_json()["attrs"] == {"Male": 1.0} and gan.to_json()["seed"] is None
    assert noise.to_json()["class"] == "three" and noise.to_json()["input"] is None
    assert detections_json([boxes, seg]) == [{"image": "a.png", "detections": boxes.to_json()["detections"]}]
    path = write_results(records, str(tmp_path))
    assert osp.basename(path) == RESULTS_FILE
    assert read_results(path) == [r.to_json() for r in records] == read_results(str(tmp_path))
    with open(path) as f:
        assert len(f.read().splitlines()) == len(records)
