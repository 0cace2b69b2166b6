"""Helpers of the serving tests: a tiny export (a 1x1-conv 'segmentor' with a dynamic batch, built as ONNX
directly: no torch, milliseconds to make and run), random images, a free loopback port and an HTTP client."""

from __future__ import annotations

import os
import os.path as osp
import socket
import subprocess
import urllib.error
import urllib.request

import cv2
import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper

TOKEN = "s3cret-test-token"
SERVER_FLAGS = ["--num-cpus", "2", "--max-batch", "4", "--batch-wait-ms", "20", "--max-body-mb", "0.25",
                "--max-pixels", "40000", "--max-queue", "2"]


def write_tiny_segmentor(folder: str, batch: int = -1) -> str:
    """An export folder: ``model.onnx`` (1x1 conv, 3 -> 4 classes at 32x32; ``batch`` -1 = dynamic) + deploy.yaml."""
    weight = np.random.default_rng(0).normal(size=(4, 3, 1, 1)).astype(np.float32)
    dim = batch if batch > 0 else "batch"
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "w"], ["logits"])], "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [dim, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [dim, 4, 32, 32])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, osp.join(folder, "model.onnx"))
    deploy = {
        "version": 1, "predictor": "semantic_labels",
        "model": {"name": "Tiny", "task": "segmentation", "onnx": "model.onnx"},
        "labels": ["a", "b", "c", "d"], "palette": [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]],
        "input": {"name": "image", "shape": [batch, 3, 32, 32], "dtype": "float32", "layout": "NCHW",
                  "color": "BGR"},
        "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": True, "interpolation": "linear"},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "Pad", "size": [32, 32], "value": 0.0}, {"type": "Permute"}],
        "outputs": [{"name": "logits", "shape": [batch, 4, 32, 32], "dtype": "float32"}],
        "postprocess": {"type": "segmentation", "output_op": "none", "resize_to_original": "bilinear"}}
    with open(osp.join(folder, "deploy.yaml"), "w") as f:
        yaml.safe_dump(deploy, f, sort_keys=False)
    return folder


def write_images(folder: str, sizes: list[tuple[int, int]], seed: int = 0) -> list[str]:
    """Random PNGs ``img{i}.png`` of the given (H, W) sizes; their paths."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i, (h, w) in enumerate(sizes):
        path = osp.join(folder, f"img{i}.png")
        cv2.imwrite(path, rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        paths.append(path)
    return paths


RAY_DEFAULT_PORTS = {6379, 8000, 8265, 10001, 52365}  # GCS, Serve, dashboard, client, dashboard agent (fixed)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now and none of Ray's default ports (a Ray instance started later binds those
    itself: the kernel once handed out 52365, the dashboard agent's, and the server lost the race to Ray)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in RAY_DEFAULT_PORTS:
            return port


class Server:
    """The running ``oars-serve`` subprocess: its base URL, process, token and export folder."""

    def __init__(self, url: str, proc: subprocess.Popen, model_dir: str, token_file: str, log: str) -> None:
        self.url, self.proc, self.model_dir, self.token_file, self.log = url, proc, model_dir, token_file, log

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                token: str | None = TOKEN) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one HTTP request (``token`` None: no Authorization header)."""
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()


def write_tiny_detector(folder: str) -> str:
    """An export folder of a raw-output 'detector' (dynamic batch, 32x32): one box per image whose corner moves
    with the image's mean colour, scores for 2 classes; the runtime's NMS and rescaling run on it."""
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["image", "axes"], ["m"], keepdims=0),  # [B]
         helper.make_node("Mul", ["m", "k"], ["mk"]), helper.make_node("Unsqueeze", ["mk", "ax1"], ["c"]),  # [B, 1]
         helper.make_node("Add", ["c", "base"], ["box"]),  # [B, 4]
         helper.make_node("Unsqueeze", ["box", "ax1"], ["boxes"]),  # [B, 1, 4]
         helper.make_node("Mul", ["c", "half"], ["s0"]), helper.make_node("Concat", ["s0", "s0"], ["s"], axis=1),
         helper.make_node("Sigmoid", ["s"], ["s1"]), helper.make_node("Unsqueeze", ["s1", "ax1"], ["scores"])],
        "tinydet", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["batch", 1, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 1, 2])],
        [numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
         numpy_helper.from_array(np.array(10.0, np.float32), "k"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array([1], np.int64), "ax1"),
         numpy_helper.from_array(np.array([[1.0, 2.0, 20.0, 24.0]], np.float32), "base")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, osp.join(folder, "model.onnx"))
    deploy = {
        "version": 1, "predictor": "detection_boxes",
        "model": {"name": "TinyDet", "task": "detection", "onnx": "model.onnx"}, "labels": ["a", "b"],
        "input": {"name": "image", "shape": [-1, 3, 32, 32], "dtype": "float32", "layout": "NCHW", "color": "BGR"},
        "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": False, "interpolation": "linear"},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "Pad", "size": [32, 32], "value": 0.0}, {"type": "Permute"}],
        "outputs": [{"name": "boxes", "shape": [-1, 1, 4], "dtype": "float32"},
                    {"name": "scores", "shape": [-1, 1, 2], "dtype": "float32"}],
        "postprocess": {"type": "detection", "inside_graph": ["decode"], "score_thr": 0.05, "iou_threshold": 0.45}}
    with open(osp.join(folder, "deploy.yaml"), "w") as f:
        yaml.safe_dump(deploy, f, sort_keys=False)
    return folder


def write_tiny_clip_classifier(folder: str) -> str:
    """An export folder of a 'video classifier' (dynamic batch, one 4-frame 16x16 clip, NCTHW): softmax of a 3x3
    projection of the clip's mean colour, so the scores follow the video's content."""
    weight = np.array([[4.0, -2.0, 0.0], [0.0, 3.0, -3.0], [-4.0, 0.0, 5.0]], np.float32)
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["clip", "axes"], ["m"], keepdims=0),  # [B, 3]
         helper.make_node("MatMul", ["m", "w"], ["logits"]), helper.make_node("Softmax", ["logits"], ["scores"])],
        "tinyclip", [helper.make_tensor_value_info("clip", TensorProto.FLOAT, ["batch", 3, 4, 16, 16])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(np.array([2, 3, 4], np.int64), "axes"), numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, osp.join(folder, "model.onnx"))
    deploy = {
        "version": 1, "predictor": "clip_classes",
        "model": {"name": "TinyClip", "task": "recognition", "onnx": "model.onnx"}, "labels": ["x", "y", "z"],
        "input": {"name": "clip", "shape": [-1, 3, 4, 16, 16], "dtype": "float32", "layout": "NCTHW",
                  "color": "RGB"},
        "sampling": {"clip_len": 4, "frame_interval": 1, "num_clips": 1, "out_of_bound_opt": "loop",
                     "twice_sample": False, "min_frames": 2, "decoder": "pyav"},
        "preprocess": [{"type": "Resize", "scale": [16, 16], "keep_ratio": False},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "FormatShape", "input_format": "NCTHW"}],
        "outputs": [{"name": "scores", "shape": [-1, 3], "dtype": "float32"}],
        "postprocess": {"type": "recognition"}}
    with open(osp.join(folder, "deploy.yaml"), "w") as f:
        yaml.safe_dump(deploy, f, sort_keys=False)
    return folder


def write_video(path: str, colour: tuple[int, int, int], frames: int = 8) -> str:
    """A small MP4 (32x32, ``frames`` frames of one BGR colour with a moving bar) written with OpenCV."""
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), 8, (32, 32))
    for t in range(frames):
        img = np.full((32, 32, 3), colour, np.uint8)
        img[:, (4 * t) % 32:(4 * t) % 32 + 4] = 255
        writer.write(img)
    writer.release()
    return path
