"""Helpers of the stream tracking / sliding-window tests: a tiny hand-built clip classifier export (no torch,
milliseconds to make and run) and small generated videos."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from tiny_exports import save_model_folder

from oars_deploy.streams import VideoWriter

CLIP_LEN = 4


def tiny_brightness_classifier_dir(folder: str) -> str:
    """A 'video classifier' (NCTHW, dynamic batch, 4 frames of 16x16): ``bright`` when the clip's mean pixel (0..1
    after Normalize) is above 0.5, else ``dark``; softmax of ``[5 - 10 m, 10 m - 5]``, so the scores follow the
    frames the sampling picked."""
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["clip"], ["m"], axes=[1, 2, 3, 4], keepdims=1),  # [B, 1, 1, 1, 1]
         helper.make_node("Reshape", ["m", "shape"], ["m2"]),  # [B, 1]
         helper.make_node("MatMul", ["m2", "w"], ["mw"]), helper.make_node("Add", ["mw", "b"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["scores"], axis=-1)],
        "tinybright", [helper.make_tensor_value_info("clip", TensorProto.FLOAT, ["batch", 3, CLIP_LEN, 16, 16])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 2])],
        [numpy_helper.from_array(np.array([-1, 1], np.int64), "shape"),
         numpy_helper.from_array(np.array([[-10.0, 10.0]], np.float32), "w"),
         numpy_helper.from_array(np.array([5.0, -5.0], np.float32), "b")])
    save_model_folder(folder, graph, {
        "version": 1, "predictor": "clip_classes",
        "model": {"name": "TinyBright", "task": "recognition", "onnx": "model.onnx"}, "labels": ["dark", "bright"],
        "input": {"name": "clip", "shape": [-1, 3, CLIP_LEN, 16, 16], "dtype": "float32", "layout": "NCTHW",
                  "color": "RGB"},
        "sampling": {"clip_len": CLIP_LEN, "frame_interval": 1, "num_clips": 1, "out_of_bound_opt": "loop",
                     "twice_sample": False, "min_frames": 2, "decoder": "pyav"},
        "preprocess": [{"type": "Resize", "scale": [16, 16], "keep_ratio": False},
                       {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
                       {"type": "FormatShape", "input_format": "NCTHW"}],
        "outputs": [{"name": "scores", "shape": [-1, 2], "dtype": "float32"}],
        "postprocess": {"type": "recognition"}})
    return folder


def write_levels_video(path: str, levels: list[int], fps: float = 8, size: tuple[int, int] = (48, 64)) -> str:
    """An MP4 of one grey level per frame (``levels``), ``size`` (H, W), with a small square moving right."""
    with VideoWriter(path, fps) as writer:
        for i, level in enumerate(levels):
            img = np.full((*size, 3), level, np.uint8)
            img[20:28, 2 * i:2 * i + 8] = 255 - level
            writer.write(img)
    return path
