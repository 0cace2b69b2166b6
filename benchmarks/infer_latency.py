"""Inference latency and throughput: PyTorch eager vs ONNX Runtime (vs TensorRT when available).

For DeepLabV3-R50, U-Net, YOLOv3-DarkNet53, Faster R-CNN R50-FPN and Mask R-CNN R50-FPN, the single-stage
detectors RetinaNet R50-FPN, FCOS R50-FPN (800x1344), SSD300 VGG-16 (300) and SSDLite320 MobileNetV3-Large (320),
and the Cityscapes segmentation models ICNet R50-D8, PSPNet R50-D8, BiSeNetV2 and DeepLabV3-R50
(``deeplabv3_city``) at 512x1024 (their full-size configs, random weights), the exported graph of each model
(``{task}.export.build_export_spec``: normalised image in, final outputs out: argmax labels / boxes after NMS / mask
logits of the kept boxes; the single-stage detectors decode every level and run NMS inside the graph) is run by
every engine on the same input at batch 1 and 8 (the two-stage detectors at batch 1 only and FP32 only, unless
``--batches``/``--precisions`` say otherwise: at 800x1344 on a CPU a batch of 8 takes minutes; RetinaNet / FCOS at
800x1344 and the 512x1024 Cityscapes models at batch 1 only).
Printed: median and p90 latency per batch, images/s and the speed-up against PyTorch eager (same process, runs of the
engines interleaved); with ``icnet`` and ``deeplabv3_city`` both run, the latency ratio ICNet / DeepLabV3-R50 per
engine and batch (same input).

    python benchmarks/infer_latency.py [--size 256] [--runs 10] [--batches 1 8] [--device cpu|cuda]
                                       [--models deeplabv3 unet yolov3 faster_rcnn mask_rcnn retinanet fcos ssd300
                                                 ssdlite icnet pspnet bisenetv2 deeplabv3_city]
                                       [--precisions fp32 fp16 int8]

``--size`` overrides the square input size of every model (default: each config's export.input_shape: 512/512/608,
800x1344 for the R50-FPN detectors, 300 / 320 for SSD300 / SSDLite; 512x1024 for the Cityscapes models, whose
configs export 1024x2048). SSD300 / SSDLite: their default boxes are laid out for 300 / 320 px; another ``--size``
times the same graph on other feature-map sizes (a speed check, not a meaningful detector).
``--precisions``: besides the FP32 graph, the FP16 / INT8 (Q/DQ) graphs of oars.export.precision for ONNX Runtime
and TensorRT (default: fp32 int8 on the CPU, where ONNX Runtime has no fast FP16 kernels; all three on CUDA). The
INT8 graph is calibrated on two random batches: its speed is real, its accuracy is not measured here.
The cheapest run, to check that it works: ``--models unet --size 32 --runs 1 --warmup 0 --batches 1``.

Edge backends (``--backends``, the rows of :mod:`benchmarks.infer_latency_backends`): every format of
``tools/export.py --format`` run by the backend that deploys it, against ONNX Runtime FP32 in the same process:

    python benchmarks/infer_latency.py --backends onnxruntime,openvino,ort,litert [--models deeplabv3 icnet yolov3
                                       ssdlite tsm] [--threads 1,2] [--precisions fp32 fp16 int8] [--runs 10]
                                       [--size N] [--json results.json]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402
from benchmarks.infer_latency_backends import EDGE_DEFAULT, EDGE_MODELS, edge_main  # noqa: E402

MODELS = {
    "deeplabv3": ("DeepLabV3-R50", "configs/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml"),
    "unet": ("U-Net", "configs/segmentation/unet/unet_s5-d16_40k_voc12.yaml"),
    "yolov3": ("YOLOv3-DarkNet53", "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml"),
    "faster_rcnn": ("Faster R-CNN R50-FPN", "configs/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml"),
    "mask_rcnn": ("Mask R-CNN R50-FPN", "configs/detection/mask_rcnn/mask_rcnn_r50_fpn_1x_coco.yaml"),
    "retinanet": ("RetinaNet R50-FPN", "configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml"),
    "fcos": ("FCOS R50-FPN", "configs/detection/fcos/fcos_r50_fpn_1x_coco.yaml"),
    "ssd300": ("SSD300 VGG-16", "configs/detection/ssd/ssd300_vgg16_coco.yaml"),
    "ssdlite": ("SSDLite320 MobileNetV3-Large", "configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml"),
    "icnet": ("ICNet R50-D8", "configs/segmentation/icnet/icnet_r50-d8_80k_cityscapes.yaml"),
    "pspnet": ("PSPNet R50-D8", "configs/segmentation/pspnet/pspnet_r50-d8_80k_cityscapes.yaml"),
    "bisenetv2": ("BiSeNetV2", "configs/segmentation/bisenetv2/bisenetv2_fcn_160k_cityscapes.yaml"),
    "deeplabv3_city": ("DeepLabV3-R50", "configs/segmentation/deeplabv3/deeplabv3_r50_80k_cityscapes.yaml"),
}
# Input (H, W) instead of the config's export.input_shape (Cityscapes' 1024x2048 at half resolution).
INPUT_HW = {key: (512, 1024) for key in ("icnet", "pspnet", "bisenetv2", "deeplabv3_city")}
# Defaults of models that are slow on a CPU at their export size (batches, precisions), when not given.
HEAVY_DEFAULTS = {"faster_rcnn": ([1], ["fp32"]), "mask_rcnn": ([1], ["fp32"])}
# the 1x3x512x1024 comparison, and the single-stage R50-FPN detectors at 800x1344; --batches adds others
BATCH1_DEFAULTS = {*INPUT_HW, "retinanet", "fcos"}
RATIO = ("icnet", "deeplabv3_city")  # latency ratio printed when both run


def build_spec(cfg_path: str, size: int | None, hw: tuple[int, int] | None = None):
    """The model's export spec (module + output names) at a square input of ``size`` (else ``hw``, else the
    config's export.input_shape)."""
    from mmengine.registry import MODELS as ROOT_MODELS
    from mmengine.registry import DefaultScope

    from oars.config import load_config
    from oars.export.spec import ExportOptions

    cfg = load_config(os.path.join(ROOT, cfg_path))
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = ROOT_MODELS.build(copy.deepcopy(cfg.model)).eval()
    h, w = hw or cfg.export.input_shape[2:]
    if size:
        h = w = size
    extra = {k: v for k, v in cfg.export.items() if k != "input_shape"}
    options = ExportOptions(input_shape=(1, 3, h, w), dynamic=True, extra=extra)
    spec = importlib.import_module(f"{cfg.default_scope}.export").build_export_spec(model, cfg, options)
    return spec.module.eval(), spec, options


def timed(fn: Callable[[], object], runs: int, warmup: int, sync: Callable[[], None]) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times


def precision_graphs(spec, options, onnx_path: str, precisions: list[str]) -> dict[str, str]:
    """precision -> ONNX file: the FP32 export, and its FP16 / INT8 graphs (made once per model)."""
    from oars.export.onnx_export import export_spec_to_onnx
    from oars.export.precision import convert_fp16, quantize_int8

    if not os.path.exists(onnx_path):
        export_spec_to_onnx(spec, torch.zeros(options.input_shape), onnx_path, options)
    paths = {"fp32": onnx_path}
    for precision in precisions:
        path = onnx_path.replace(".onnx", f"_{precision}.onnx")
        if precision == "fp16" and not os.path.exists(path):
            convert_fp16(onnx_path, path)
        elif precision == "int8" and not os.path.exists(path):
            rng = np.random.default_rng(1)
            calib = [rng.standard_normal(options.input_shape, dtype=np.float32) for _ in range(2)]
            quantize_int8(onnx_path, path, calib, spec.input_name)
        if precision != "fp32":
            paths[precision] = path
    return paths


def engines(spec, options, module, graphs: dict[str, str], device: str, x: torch.Tensor) -> dict[str, Callable]:
    """name -> a zero-argument callable running one batch."""
    import onnxruntime as ort

    dev_x = x.to(device)
    out = {"pytorch eager": lambda: module(dev_x)}
    providers = (["CUDAExecutionProvider"] if device == "cuda" else []) + ["CPUExecutionProvider"]
    providers = [p for p in providers if p in ort.get_available_providers()]
    feed = {spec.input_name: x.numpy()}
    for precision, path in graphs.items():
        session = ort.InferenceSession(path, providers=providers)
        out[f"onnxruntime {precision}"] = lambda session=session: session.run(None, feed)
    if device == "cuda" and importlib.util.find_spec("tensorrt") is not None:
        from oars.export.tensorrt import TensorRTRunner, build_engine

        deploy = {"input": {"name": spec.input_name, "shape": [-1, *options.input_shape[1:]],
                            "dynamic_axes": {0: "batch"}}}
        arr = x.numpy()
        for precision, path in graphs.items():
            engine = path.replace(".onnx", ".engine")
            if not os.path.exists(engine):
                build_engine(path, engine, deploy, opt_batch=8)
            runner = TensorRTRunner(engine)
            out[f"tensorrt {precision}"] = lambda runner=runner: runner(arr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=None, help="default: 1 8 (two-stage: 1)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", nargs="+", default=None, choices=sorted({*MODELS, *EDGE_MODELS}),
                        help=f"default: every model ({', '.join(EDGE_DEFAULT)} with --backends)")
    parser.add_argument("--precisions", nargs="+", default=None, choices=["fp32", "fp16", "int8"])
    parser.add_argument("--backends", default=None,
                        help="comma-separated edge backends: onnxruntime and the formats of tools/export.py --format")
    parser.add_argument("--threads", default="1,2", help="with --backends: comma-separated thread counts")
    parser.add_argument("--json", default=None, help="with --backends: write the rows to this JSON file")
    args = parser.parse_args()
    if args.backends:
        edge_main(parser, args)
        return
    args.models = args.models or list(MODELS)
    if set(args.models) - set(MODELS):
        parser.error(f"--models {sorted(set(args.models) - set(MODELS))} are for --backends only")
    if args.runs < 1 or args.warmup < 0 or (args.size is not None and args.size < 1):
        parser.error(f"--runs and --size must be at least 1 and --warmup 0 or more, got {args.runs}, {args.size} "
                     f"and {args.warmup}")
    if args.batches and min(args.batches) < 1:
        parser.error(f"--batches must be at least 1, got {args.batches}")
    precisions = args.precisions or (["fp32", "fp16", "int8"] if args.device == "cuda" else ["fp32", "int8"])
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="oars-bench-") as tmp, torch.inference_mode():
        for key in args.models:
            name, cfg_path = MODELS[key]
            heavy_batches, heavy_precisions = HEAVY_DEFAULTS.get(key, ([1] if key in BATCH1_DEFAULTS else [1, 8],
                                                                        precisions))
            batches = args.batches or heavy_batches
            model_precisions = args.precisions or (precisions if key not in HEAVY_DEFAULTS else heavy_precisions)
            module, spec, options = build_spec(cfg_path, args.size, INPUT_HW.get(key))
            module = module.to(args.device)
            graphs = precision_graphs(spec, options, os.path.join(tmp, f"{key}.onnx"), model_precisions)
            h, w = options.input_shape[2:]
            for batch in batches:
                x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, 3, h, w), dtype=np.float32))
                runs = engines(spec, options, module, graphs, args.device, x)
                base = None
                for engine, fn in runs.items():
                    t = np.array(timed(fn, args.runs, args.warmup, sync))
                    median, p90 = float(np.median(t)), float(np.percentile(t, 90))
                    base = base or median
                    rows.append((name, f"{h}x{w}", batch, engine, median * 1e3, p90 * 1e3, batch / median,
                                 base / median, key))
                    print(f"  {name} b{batch} {engine}: {median * 1e3:.1f} ms", file=sys.stderr)
    print(f"\nlatency on {args.device} (torch threads {torch.get_num_threads()}), {args.runs} runs after "
          f"{args.warmup} warm-up, random weights\n")
    header = ("model", "input", "batch", "engine", "median ms", "p90 ms", "images/s", "x eager")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.1f} | {r[7]:.2f} |")
    print_ratio(rows)


def print_ratio(rows: list[tuple], out: Callable[[str], object] = print) -> None:
    """ICNet / DeepLabV3-R50 median latency per (input, batch, engine) both were run at (nothing when one is
    missing): how much of DeepLabV3's time ICNet needs on the same input and engine. ``out`` writes the text."""
    num, den = RATIO
    times = {(r[8], r[1], r[2], r[3]): r[4] for r in rows}
    lines = [f"  {inp} b{batch} {engine}: {ms / times[(den, inp, batch, engine)]:.3f}"
             f" ({ms:.1f} / {times[(den, inp, batch, engine)]:.1f} ms)"
             for (key, inp, batch, engine), ms in times.items() if key == num and (den, inp, batch, engine) in times]
    if lines:
        out(f"\nlatency ratio {MODELS[num][0]} / {MODELS[den][0]} (lower: ICNet is faster)")
        out("\n".join(lines))


if __name__ == "__main__":
    main()
