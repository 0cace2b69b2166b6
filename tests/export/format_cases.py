"""Helpers of the edge-format tests (tests/export/test_formats_*.py): calibration images, the export CLI as users
call it, a graph no edge format holds, tiny handmade graphs (one ending in NonMaxSuppression), and the oars-infer
records of an export on a backend, and GAN generator cases (CGAN's noise + label, pix2pix's image)."""

from __future__ import annotations

import copy
import os
import os.path as osp
import runpy
import sys

import cv2
import numpy as np
import onnx
import torch
from demo_utils import ROOT
from onnx import TensorProto, helper, numpy_helper

from oars.config import dump_config
from oars.export.check import synthetic_image
from oars_deploy.cli import run as infer_run
from oars_deploy.records import read_results


def write_images(folder: str, count: int = 10, seed: int = 50) -> str:
    """``count`` synthetic 96x128 images (calibration data, or images to predict)."""
    os.makedirs(folder, exist_ok=True)
    for i in range(count):
        cv2.imwrite(osp.join(folder, f"img{i}.png"), synthetic_image(96, 128, seed=seed + i))
    return folder


def export_cli(monkeypatch, cfg, ckpt: str, folder: str, *flags: str) -> str:
    """tools/export.py -c CFG.yaml -w CKPT -o OUT FLAGS, run as a user runs it, from ``folder`` with relative paths;
    returns the output folder's path."""
    dump_config(cfg, osp.join(folder, "cfg.yaml"))
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", ["export.py", "-c", "cfg.yaml", "-w", osp.relpath(ckpt, folder), "-o", "out",
                                      *flags])
    runpy.run_path(osp.join(ROOT, "tools/export.py"), run_name="__main__")
    return osp.join(folder, "out")


def infer_records(model_dir: str, images: str, out: str, backend: str) -> list[dict]:
    """oars-infer --model-dir MODEL_DIR -i IMAGES -o OUT --backend BACKEND; the records of results.jsonl."""
    infer_run(["--model-dir", model_dir, "-i", images, "-o", out, "--backend", backend])
    return read_results(out)


def unknown_operator_onnx(path: str) -> str:
    """An ONNX graph whose second node is an operator of a custom domain (com.example:FancyOp): no format holds it."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["image"], ["r"]), helper.make_node("FancyOp", ["r"], ["out"], domain="com.example")],
        "fancy", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def with_overrides(cfg, *overrides: str):
    """A copy of ``cfg`` with ``KEY=VALUE`` overrides applied (the case's config left as it is)."""
    import copy

    from oars.config import apply_overrides

    cfg = copy.deepcopy(cfg)
    apply_overrides(cfg, list(overrides))
    return cfg


def leftovers(folder) -> list[str]:
    """What a failed export left in ``folder`` (nothing, or the folder does not exist)."""
    import os

    return os.listdir(folder) if os.path.isdir(folder) else []


def perturb_weights(monkeypatch, writer) -> None:
    """Make ``writer`` (a format writer) convert a graph with one weight tensor tripled, so its files differ from the
    ONNX graph they are checked against: the forced disagreement every format's parity rule must catch."""
    import dataclasses

    from onnx import numpy_helper

    real_write = writer.write

    def perturbed_write(job):
        model = onnx.load(job.fp32_onnx_path)
        init = next(t for t in model.graph.initializer if numpy_helper.to_array(t).size > 16)
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 3, init.name))
        bad = osp.join(job.out_dir, "perturbed.onnx")
        onnx.save(model, bad)
        return real_write(dataclasses.replace(job, fp32_onnx_path=bad))

    monkeypatch.setattr(writer, "write", perturbed_write)


def image_graph(path: str, nodes, inits, out_type=TensorProto.FLOAT) -> str:
    """A tiny opset-17 graph image [1, 3, 8, 8] -> out, saved at ``path``."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", out_type, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def nms_onnx(path: str) -> str:
    """A handmade graph ending in NonMaxSuppression (boxes and scores from the image): what ncnn and litert refuse."""
    c = numpy_helper.from_array
    return image_graph(path, [helper.make_node("Reshape", ["image", "shape"], ["boxes"]),
                              helper.make_node("ReduceMax", ["boxes"], ["s"], axes=[2], keepdims=0),
                              helper.make_node("Unsqueeze", ["s", "axis"], ["scores"]),
                              helper.make_node("NonMaxSuppression", ["boxes", "scores", "keep", "iou"], ["out"])],
                       [c(np.array([1, 48, 4], np.int64), "shape"), c(np.array([0], np.int64), "axis"),
                        c(np.array([5], np.int64), "keep"), c(np.array([0.5], np.float32), "iou")], TensorProto.INT64)


CGAN_MODEL = {"type": "CGAN", "noise_size": 16, "num_classes": 4, "ema_config": {"momentum": 0.5},
              "generator": {"type": "DCGANGenerator", "ngf": 8, "output_size": 28}}


def gan_case(folder: str, name: str, size: int = 32):
    """``(config, checkpoint, None)`` of a GAN with random weights exporting its generator at ``size``: ``"cgan"``
    (noise + int64 class label in) or ``"pix2pix"`` (the facades config's U-Net generator, shrunk as the GAN config
    tests shrink it; an image in)."""
    from config_checks_gan import shrink_model
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    from gan.registry import MODELS
    from oars.config import load_config

    if name == "cgan":
        model_cfg = copy.deepcopy(CGAN_MODEL)
    else:
        path = osp.join(ROOT, "configs/gan/pix2pix/pix2pix_facades.yaml")
        model_cfg = shrink_model(load_config(path).model.to_dict())
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("gan"):  # whatever scope an earlier test in this process left
        model = MODELS.build(copy.deepcopy(model_cfg))
    model.init_weights()
    ckpt = osp.join(folder, "model.pth")
    torch.save({"state_dict": model.state_dict()}, ckpt)
    cfg = Config({"default_scope": "gan", "model": model_cfg, "export": {"input_shape": [1, 3, size, size]}})
    return cfg, ckpt, None
