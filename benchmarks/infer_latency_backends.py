"""Edge backend rows of ``benchmarks/infer_latency.py --backends`` (run through that script: same CLI, same output).

Edge backends (``--backends``): every format of ``tools/export.py --format`` run by the backend that deploys it,
against ONNX Runtime FP32 in the same process:

    python benchmarks/infer_latency.py --backends onnxruntime,openvino,ort,litert [--models deeplabv3 icnet yolov3
                                       ssdlite tsm] [--threads 1,2] [--precisions fp32 fp16 int8] [--runs 10]
                                       [--size N] [--json results.json]

For DeepLabV3-R50 (256x256), ICNet R50-D8 and BiSeNetV2 (512x1024), YOLOv3-DarkNet53 (320x320), SSDLite320
MobileNetV3 (320x320) and TSM-R50 (its test pipeline's input: 8 segments x 3 crops of 256x256), random weights
(nothing downloads), and the two detectors again with ``export.postprocess: raw`` (``yolov3_raw``, ``ssdlite_raw``:
the graph ends at the heads' maps, which NCNN and LiteRT can hold; their reference is the raw graph in ONNX Runtime,
and a further row times the runtime's NumPy decode + NMS of those maps, which the raw graph leaves to the
predictor): the exported graph
(``build_export_spec`` through the task registry) is written to each format at each precision the format offers
(ONNX Runtime: the FP16 / INT8 graphs of oars.export.precision; a format's writer at the precisions its
``require`` accepts; INT8 calibrated on two random batches), and each is timed per thread count (runs interleaved
with ONNX Runtime FP32: ``benchmarks.common.time_alternating``). Printed per model, backend, precision and threads:
median latency, the ratio to ONNX Runtime FP32 on as many threads, the agreement with it on the benchmark input
(the export's parity measure: labels equal, detections matched, dense 1 - relative RMS error) and the model files'
size. Every format of :data:`oars.export.formats.FORMATS` is a valid ``--backends`` value (``onnxruntime`` for the
ONNX graphs). The cheapest run: ``--backends onnxruntime,ort --models unet_demo --size 32 --runs 1 --warmup 0
--threads 1``.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile

import numpy as np
import torch

from benchmarks.common import ROOT

# --backends: key -> (name, config, input (H, W); None: the config's own, a clip model's from its test pipeline)
EDGE_MODELS = {
    "deeplabv3": ("DeepLabV3-R50", "configs/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml", (256, 256)),
    "icnet": ("ICNet R50-D8", "configs/segmentation/icnet/icnet_r50-d8_80k_cityscapes.yaml", (512, 1024)),
    "bisenetv2": ("BiSeNetV2", "configs/segmentation/bisenetv2/bisenetv2_fcn_160k_cityscapes.yaml", (512, 1024)),
    "yolov3": ("YOLOv3-DarkNet53", "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml", (320, 320)),
    "ssdlite": ("SSDLite320 MobileNetV3", "configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml", (320, 320)),
    "tsm": ("TSM-R50", "configs/video/tsm/tsm_r50_1x1x8_kinetics400.yaml", None),
    "yolov3_raw": ("YOLOv3-DarkNet53 (raw heads)", "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml",
                   (320, 320)),
    "ssdlite_raw": ("SSDLite320 MobileNetV3 (raw heads)", "configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml",
                    (320, 320)),
    "unet_demo": ("U-Net demo", "configs/segmentation/unet/unet_demo_shapes.yaml", (64, 64)),
}
# config overrides of a model key (-o syntax), applied before its graph is built
EDGE_OVERRIDES = {"yolov3_raw": ["export.postprocess=raw"], "ssdlite_raw": ["export.postprocess=raw"]}
EDGE_DEFAULT = ("deeplabv3", "icnet", "bisenetv2", "yolov3", "ssdlite", "tsm", "yolov3_raw", "ssdlite_raw")


def edge_backends() -> list[str]:
    """``onnxruntime`` and every registered edge format (each run by its own backend)."""
    from oars.export.formats import FORMATS

    return ["onnxruntime", *FORMATS]


def edge_spec(cfg_path: str, hw: tuple[int, int] | None, overrides: list[str] | None = None):
    """(export spec, options) of the config's model with random weights, through the task registry (no task named
    here); ``hw``: the image input's (H, W) (a clip model keeps its test pipeline's shape); ``overrides``: ``-o``
    style config overrides."""
    from mmengine.registry import MODELS as ROOT_MODELS
    from mmengine.registry import DefaultScope

    from oars.config import apply_overrides, load_config
    from oars.export.onnx_export import export_task
    from oars.export.options import task_export_options

    cfg = load_config(os.path.join(ROOT, cfg_path))
    shape = [f"export.input_shape=[1,3,{hw[0]},{hw[1]}]"] if hw is not None else []
    if shape or overrides:
        apply_overrides(cfg, shape + list(overrides or []))
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = ROOT_MODELS.build(copy.deepcopy(cfg.model)).eval()
    task = export_task(cfg)
    options = task_export_options(task, cfg)
    return task.exporter(cfg).build_export_spec(model, cfg, options), options


def edge_variants(spec, options, folder: str, onnx_path: str, backends: list[str], precisions: list[str],
                  x: np.ndarray) -> list[dict]:
    """Every (backend, precision) the formats offer: ``{backend, precision, folder, model (deploy.yaml model keys),
    files, infer_backend}``; a precision a format refuses is left out with its reason printed."""
    from oars.export.errors import ExportError
    from oars.export.formats import FORMATS, FormatJob
    from oars.export.precision import convert_fp16, precision_file, quantize_int8

    rng = np.random.default_rng(1)
    calib = [rng.standard_normal(x.shape, dtype=np.float32) for _ in range(2)]
    graphs = {"fp32": onnx_path}
    for precision in precisions:
        path = os.path.join(folder, precision_file(precision))
        if precision == "fp16":
            graphs["fp16"] = convert_fp16(onnx_path, path)
        elif precision == "int8":
            graphs["int8"] = quantize_int8(onnx_path, path, calib, spec.input_name)
    out = []
    for backend in backends:
        for precision in precisions:
            if backend == "onnxruntime":
                out.append({"backend": backend, "precision": precision, "folder": folder, "infer_backend":
                            "onnxruntime", "model": {"onnx": os.path.basename(graphs[precision])},
                            "files": [graphs[precision]]})
                continue
            writer = FORMATS[backend]
            try:
                writer.require(precision)
            except ExportError as err:
                print(f"  {backend} {precision}: not offered ({err})", file=sys.stderr)
                continue
            sub = os.path.join(folder, f"{backend}_{precision}")
            os.makedirs(sub, exist_ok=True)
            src = graphs[precision] if not writer.reduces_precision else onnx_path
            for name, path in {"model.onnx": onnx_path, os.path.basename(src): src}.items():
                if not os.path.exists(os.path.join(sub, name)):
                    os.link(path, os.path.join(sub, name))
            job = FormatJob(onnx_path=os.path.join(sub, os.path.basename(src)),
                            fp32_onnx_path=os.path.join(sub, "model.onnx"), out_dir=sub, precision=precision,
                            calibration=calib if precision == "int8" and writer.reduces_precision else [],
                            input_name=spec.input_name)
            try:
                files = writer.write(job)
            except Exception as err:  # a converter's failure leaves this variant out, not the whole run
                print(f"  {backend} {precision}: not written ({type(err).__name__}: {err})", file=sys.stderr)
                continue
            out.append({"backend": backend, "precision": precision, "folder": sub, "infer_backend":
                        writer.infer_backend, "model": {writer.model_key: files.main},
                        "files": [os.path.join(sub, n) for n in files.names]})
    return out


def edge_backend(variant: dict, threads: int):
    """The runtime backend of a variant on ``threads`` CPU threads (its class rebuilt with ``threads`` where its
    constructor takes them: every backend of oars_deploy.backends does)."""
    import inspect

    from oars_deploy.backends import MODEL_FILES, make_backend

    backend = make_backend(variant["infer_backend"], variant["folder"], variant["model"], "cpu")
    if "threads" in inspect.signature(type(backend).__init__).parameters:
        key, default, _ = MODEL_FILES[variant["infer_backend"]]
        path = os.path.join(variant["folder"], variant["model"].get(key, default))
        backend = type(backend)(path, "cpu", threads=threads)
    return backend


def edge_rows(key: str, size: int | None, backends: list[str], precisions: list[str], threads: list[int],
              runs: int, warmup: int, tmp: str) -> list[dict]:
    """The rows of one model (see the module docstring)."""
    from benchmarks.common import time_alternating
    from oars.export.errors import ExportCheckError
    from oars.export.formats.parity import check_parity
    from oars.export.onnx_export import export_spec_to_onnx

    name, cfg_path, hw = EDGE_MODELS[key]
    spec, options = edge_spec(cfg_path, (size, size) if size and hw else hw,  # --size: image models only
                              EDGE_OVERRIDES.get(key))
    folder = os.path.join(tmp, key)
    os.makedirs(folder, exist_ok=True)
    x = np.random.default_rng(0).standard_normal(tuple(options.input_shape), dtype=np.float32)
    onnx_path = os.path.join(folder, "model.onnx")
    export_spec_to_onnx(spec, torch.from_numpy(x), onnx_path, options)
    variants = edge_variants(spec, options, folder, onnx_path, backends, precisions, x)
    reference = next(v for v in variants if v["backend"] == "onnxruntime" and v["precision"] == "fp32") \
        if "onnxruntime" in backends and "fp32" in precisions else {
            "backend": "onnxruntime", "precision": "fp32", "folder": folder, "infer_backend": "onnxruntime",
            "model": {"onnx": "model.onnx"}, "files": [onnx_path]}
    rows = []
    shape = "x".join(str(d) for d in options.input_shape[1:])
    for n in threads:
        runners = {id(reference): edge_backend(reference, n)}
        for v in list(variants):
            try:
                runners[id(v)] = runners.get(id(v)) or edge_backend(v, n)
            except Exception as err:  # a backend that cannot load its files: left out, the reason printed
                print(f"  {name} {v['backend']} {v['precision']}: not run ({type(err).__name__}: {err})",
                      file=sys.stderr)
                variants.remove(v)
        steps = {f"{v['backend']} {v['precision']}": (lambda b=runners[id(v)]: b({spec.input_name: x}))
                 for v in variants}
        steps["onnxruntime fp32 (reference)"] = lambda b=runners[id(reference)]: b({spec.input_name: x})
        medians = time_alternating(steps, runs, "cpu", warmup)
        base = medians["onnxruntime fp32 (reference)"][0]
        for v in variants:
            try:
                parity = check_parity(spec, v["backend"], v["precision"], onnx_path, runners[id(v)], [x],
                                      min_agreement=0.0)
                measured = [a for a in parity["agreement"].values() if a is not None]
            except ExportCheckError as err:  # outputs missing or of another shape: timed, agreement n/a
                print(f"  {name} {v['backend']} {v['precision']}: {err}", file=sys.stderr)
                measured = []
            wall = medians[f"{v['backend']} {v['precision']}"][0]
            rows.append({"model": name, "input": shape, "backend": v["backend"], "precision": v["precision"],
                         "threads": n, "median_ms": wall * 1e3, "x_ort_fp32": wall / base,
                         "agreement": min(measured) if measured else None,
                         "size_mb": sum(os.path.getsize(f) for f in v["files"]) / 2 ** 20})
            print(f"  {name} {v['backend']} {v['precision']} {n} thread(s): {wall * 1e3:.1f} ms", file=sys.stderr)
        if "decode" in spec.postprocess:  # raw heads: the predictor's decode + NMS, on the reference's maps
            post = runtime_decode_seconds(spec.postprocess, runners[id(reference)]({spec.input_name: x}),
                                          tuple(options.input_shape[2:]), runs)
            rows.append({"model": name, "input": shape, "backend": "decode + NMS (NumPy)", "precision": "fp32",
                         "threads": n, "median_ms": post * 1e3, "x_ort_fp32": post / base, "agreement": None,
                         "size_mb": 0.0})
    return rows


def runtime_decode_seconds(post: dict, outputs: dict, hw: tuple[int, int], runs: int) -> float:
    """Median seconds of the runtime's decode + NMS (:func:`oars_deploy.predictors.detection_boxes.postprocess.
    detection`) of one image's raw head maps ``outputs`` (name -> array [1, ...]) at network input ``hw``: what an
    ``export.postprocess: raw`` graph leaves to the predictor, so its rows read with this one added."""
    import time

    from oars_deploy.predictors.detection_boxes.postprocess import detection

    metas = [{"scale_factor": (1.0, 1.0), "ori_shape": hw, "img_shape": hw}]
    detection(outputs, metas, post)  # warm the priors' cache, as a predictor's second image finds it
    times = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        detection(outputs, metas, post)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def edge_main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--backends``: the edge backend table (module docstring)."""
    import json

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    known = edge_backends()
    if not backends or set(backends) - set(known):
        parser.error(f"--backends: unknown {sorted(set(backends) - set(known))}; expected some of {known}")
    try:
        threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        parser.error(f"--threads must be comma-separated counts of at least 1, got {args.threads!r}")
    models = args.models or list(EDGE_DEFAULT)
    if set(models) - set(EDGE_MODELS):
        parser.error(f"--backends: --models {sorted(set(models) - set(EDGE_MODELS))} are not edge models; expected "
                     f"some of {list(EDGE_MODELS)}")
    precisions = args.precisions or ["fp32", "fp16", "int8"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="oars-edge-bench-") as tmp, torch.inference_mode():
        for key in models:
            rows += edge_rows(key, args.size, backends, precisions, threads, args.runs, args.warmup, tmp)
    print(f"\nedge backends on {os.cpu_count()} CPU cores, {args.runs} runs after {args.warmup} warm-up, random "
          "weights, batch 1; ratio and agreement against ONNX Runtime FP32 on as many threads\n")
    header = ("model", "input", "backend", "precision", "threads", "median ms", "x ORT FP32", "agreement", "file MB")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        agree = "n/a" if r["agreement"] is None else f"{r['agreement']:.3f}"
        print(f"| {r['model']} | {r['input']} | {r['backend']} | {r['precision'].upper()} | {r['threads']} | "
              f"{r['median_ms']:.1f} | {r['x_ort_fp32']:.2f} | {agree} | {r['size_mb']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)

