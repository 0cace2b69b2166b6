"""``oars-infer``: predict images with an exported model folder, without torch.

    oars-infer --model-dir EXPORT_DIR -i IMAGE_OR_DIR -o OUT_DIR [--device cpu|cuda] [--benchmark]

Reads EXPORT_DIR/deploy.yaml and the ONNX file it names (model.onnx, or model_fp16.onnx / model_int8.onnx after
tools/export.py --half / --int8) for ONNX Runtime, or EXPORT_DIR/model.engine (--backend tensorrt);
writes the same pictures as tools/infer.py (segmentation: <stem>_vis.png and the <stem>.png label map;
detection: <stem>_vis.png and detections.json; video classifiers, whose deploy.yaml has a ``sampling`` section:
the top-k labels printed per video and predictions.json, see oars_deploy.video_cli; frame-feature models, whose
deploy.yaml has a ``features`` section: the same for .npz / .pkl feature files, see
oars_deploy.video_features_predictor). An image that cannot be
read is skipped: the others are written, then the failures are listed and the exit status is 2. The output
folder may not be, hold or lie inside the input folder (oars_deploy.output_paths). --benchmark
prints latency (median, p90) and images/s.
"""

from __future__ import annotations

import argparse
import os.path as osp

import numpy as np

from oars_deploy.backends import BACKENDS
from oars_deploy.deploy_config import DEPLOY_FILE, FEATURES_KEY, GAN_KEY, SAMPLING_KEY, read_deploy_yaml
from oars_deploy.errors import DeployError, run_cli
from oars_deploy.failures import Failures
from oars_deploy.gan_cli import run_gan
from oars_deploy.image_files import list_images
from oars_deploy.output_paths import check_output_folder
from oars_deploy.outputs import ResultWriter, read_image
from oars_deploy.predictor import Predictor
from oars_deploy.video_cli import run_video
from oars_deploy.video_features_predictor import run_features

DEFAULT_DRAW_THRESHOLD = 0.3  # as tools/infer.py


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="oars-infer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="folder with deploy.yaml and model.onnx (tools/export.py)")
    parser.add_argument("-i", "--input", default=None,
                        help="an image or a folder of images (none for noise GANs; a video or a folder of videos for "
                             "video models; "
                             "a .npz/.pkl feature file or a folder of them for feature models)")
    parser.add_argument("-o", "--output-dir", required=True, help="folder for the pictures")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda: CUDAExecutionProvider / TensorRT)")
    parser.add_argument("--backend", default="onnxruntime", choices=BACKENDS,
                        help="onnxruntime (deploy.yaml's model.onnx) or tensorrt (model.engine, GPU)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="images per predict call (default: the model's batch, 8 for a dynamic batch)")
    parser.add_argument("--draw-threshold", type=float, default=None,
                        help=f"detection: draw boxes with a score at or above this (default {DEFAULT_DRAW_THRESHOLD})")
    parser.add_argument("--benchmark", action="store_true", help="also time the model on the first batch of images")
    parser.add_argument("--warmup", type=int, default=5, help="--benchmark: untimed runs first")
    parser.add_argument("--runs", type=int, default=30, help="--benchmark: timed runs")
    parser.add_argument("--array-module", default=None, choices=("numpy", "cupy"),
                        help="pre/post-processing arrays (default: cupy with --device cuda when it runs, else numpy)")
    parser.add_argument("--topk", type=int, default=5, help="video models: how many labels to print and write")
    parser.add_argument("--attrs", default=None, help="GAN attribute models: targets, e.g. Black_Hair=1,Male=0")
    parser.add_argument("--src-attrs", default=None, help="STGAN: the source image's attributes (default all 0)")
    parser.add_argument("--seed", type=int, default=0, help="noise GANs: the noise seed (default 0)")
    parser.add_argument("--num", type=int, default=None, help="noise GANs: how many images (default 16)")
    parser.add_argument("--label", type=int, default=None, help="CGAN: the class id (default: a sweep of classes)")
    return parser.parse_args(argv)


def print_benchmark(stats: dict[str, float], device: str, backend: str) -> None:
    print(f"benchmark ({backend}, {device}, batch {int(stats['batch'])}, {int(stats['runs'])} runs):")
    print(f"  {'':<12} {'median ms':>10} {'p90 ms':>10} {'images/s':>10}")
    for name in ("end_to_end", "model"):
        print(f"  {name:<12} {stats[f'{name}_median_ms']:>10.2f} {stats[f'{name}_p90_ms']:>10.2f} "
              f"{stats[f'{name}_images_per_s']:>10.1f}")


def read_batch(paths: list[str], failures: Failures) -> tuple[list[str], list[np.ndarray]]:
    """The images of ``paths`` that can be read (and their paths); the others go to ``failures``."""
    kept, images = [], []
    for path in paths:
        try:
            images.append(read_image(path))
        except DeployError as err:
            failures.add(path, str(err))
            continue
        kept.append(path)
    return kept, images


def run(argv: list[str] | None = None) -> None:
    """The command with its user errors raised (:class:`~oars_deploy.errors.UserError`); :func:`main` prints them."""
    args = parse_args(argv)
    check_output_folder(args.output_dir, args.input)  # outputs never replace inputs, whatever the model
    deploy = read_deploy_yaml(osp.join(args.model_dir, DEPLOY_FILE))
    if GAN_KEY in deploy:  # a generator: noise (no -i) or image translation (see oars_deploy.gan_cli)
        run_gan(args)
        return
    if args.input is None:
        raise DeployError("-i/--input is required: an image or a folder of images (a video / feature file or a "
                          "folder of them for video models)")
    if SAMPLING_KEY in deploy:  # a video (clip) classifier
        run_video(args)
        return
    if FEATURES_KEY in deploy:  # a frame-feature classifier (.npz / .pkl files)
        run_features(args)
        return
    predictor = Predictor(args.model_dir, device=args.device, backend=args.backend,
                          array_module_name=args.array_module)
    if args.draw_threshold is not None and predictor.task != "detection":
        raise DeployError(f"--draw-threshold applies to detection models, not to task {predictor.task!r}")
    if args.batch_size is not None and args.batch_size < 1:
        raise DeployError(f"--batch-size must be >= 1, got {args.batch_size}")
    batch_size = args.batch_size or predictor.batch_size or 8
    threshold = DEFAULT_DRAW_THRESHOLD if args.draw_threshold is None else args.draw_threshold
    paths = list_images(args.input)
    writer = ResultWriter(predictor.task, args.output_dir, predictor.labels, predictor.palette, threshold)
    failures = Failures()
    first: list = []
    for start in range(0, len(paths), batch_size):
        chunk, images = read_batch(paths[start:start + batch_size], failures)
        if not images:
            continue
        first = first or images
        for path, img, result in zip(chunk, images, predictor.predict(images)):
            writer.add(path, img, result)
    written = writer.close()
    print(f"wrote {len(written)} pictures to {args.output_dir}")
    if args.benchmark and first:
        print_benchmark(predictor.benchmark(first, args.warmup, args.runs), args.device, args.backend)
    failures.raise_if_any(total=len(paths))


def main(argv: list[str] | None = None) -> None:
    """The ``oars-infer`` console script: user errors printed without a traceback, exit status 2."""
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
