"""Export folders of hand-built tiny ONNX graphs (no torch export, milliseconds to make): the predictor, the
stream reader and the server are tested on them where the model's numbers do not matter."""

from __future__ import annotations

import os
import os.path as osp

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from oars.export.deploy_config import write_deploy_yaml


def save_model_folder(folder: str, graph, deploy: dict) -> None:
    """An export folder for a hand-built ONNX ``graph``: ``model.onnx`` (opset 17) + ``deploy.yaml``."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, osp.join(folder, "model.onnx"))
    write_deploy_yaml(osp.join(folder, "deploy.yaml"), deploy)


def tiny_segmentor_dir(folder: str, batch: int) -> tuple[str, np.ndarray]:
    """A 1x1-conv 'segmentor' (3 -> 4 classes) at 32x32 with deploy.yaml; ``batch`` -1 = dynamic."""
    weight = np.random.default_rng(0).normal(size=(4, 3, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "w"], ["logits"])], "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch if batch > 0 else "batch", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch if batch > 0 else "batch", 4, 32, 32])],
        [numpy_helper.from_array(weight, "w")])
    save_model_folder(folder, graph, {
        "version": 1, "model": {"name": "Tiny", "task": "segmentation", "onnx": "model.onnx"},
        "labels": ["a", "b", "c", "d"], "palette": [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]],
        "input": {"name": "image", "shape": [batch, 3, 32, 32], "dtype": "float32", "layout": "NCHW", "color": "BGR"},
        "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": True, "interpolation": "linear"},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "Pad", "size": [32, 32], "value": 0.0}, {"type": "Permute"}],
        "outputs": [{"name": "logits", "shape": [batch, 4, 32, 32], "dtype": "float32"}],
        "postprocess": {"type": "segmentation", "output_op": "none", "resize_to_original": "bilinear"}})
    return folder, weight


def tiny_detector_dir(folder: str) -> str:
    """A raw-output 'detector' (one box per image with fixed scores) at 32x32: enough for the writer's files."""
    boxes = numpy_helper.from_array(np.array([[[2, 2, 20, 20]]], np.float32), "b")
    scores = numpy_helper.from_array(np.array([[[0.9, 0.1]]], np.float32), "s")
    graph = helper.make_graph(
        [helper.make_node("Shape", ["image"], ["shp"], end=1),
         helper.make_node("Concat", ["shp", "one", "one"], ["reps"], axis=0),
         helper.make_node("Tile", ["b", "reps"], ["boxes"]), helper.make_node("Tile", ["s", "reps"], ["scores"])],
        "tinydet", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["batch", 1, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 1, 2])],
        [boxes, scores, numpy_helper.from_array(np.array([1], np.int64), "one")])
    save_model_folder(folder, graph, {
        "version": 1, "model": {"name": "TinyDet", "task": "detection", "onnx": "model.onnx"},
        "labels": ["a", "b"],
        "input": {"name": "image", "shape": [-1, 3, 32, 32], "dtype": "float32", "layout": "NCHW", "color": "BGR"},
        "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": False, "interpolation": "linear"},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "Pad", "size": [32, 32], "value": 0.0}, {"type": "Permute"}],
        "outputs": [{"name": "boxes", "shape": [-1, 1, 4], "dtype": "float32"},
                    {"name": "scores", "shape": [-1, 1, 2], "dtype": "float32"}],
        "postprocess": {"type": "detection", "inside_graph": ["decode"], "score_thr": 0.05, "iou_threshold": 0.45}})
    return folder
