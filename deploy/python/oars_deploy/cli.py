"""``oars-infer``: predict images with an exported model folder, without torch.

    oars-infer --model-dir EXPORT_DIR -i IMAGE_OR_DIR -o OUT_DIR [--device cpu|cuda] [--benchmark]

Reads EXPORT_DIR/deploy.yaml and the ONNX file it names (model.onnx, or model_fp16.onnx / model_int8.onnx after
tools/export.py --half / --int8) for ONNX Runtime, or EXPORT_DIR/model.engine (--backend tensorrt);
writes the same pictures as tools/infer.py (segmentation: <stem>_vis.png and the <stem>.png label map;
detection: <stem>_vis.png and detections.json; video classifiers, whose deploy.yaml has a ``sampling`` section:
the top-k labels printed per video and predictions.json, see oars_deploy.predictors.clip_classes.cli; frame-feature
models, whose
deploy.yaml has a ``features`` section: the same for .npz / .pkl feature files, see
oars_deploy.predictors.feature_classes.predictor). Every run also writes
OUT_DIR/results.jsonl: one JSON record per input (oars_deploy.records), whatever the model. The model's
deploy.yaml ``predictor`` key (inferred for older exports) chooses the plug-in that validates its section, adds
its flags, runs it and makes the records (oars_deploy.plugins). An image that cannot be
read is skipped: the others are written, then the failures are listed and the exit status is 2. The output
folder may not be, hold or lie inside the input folder, nor any folder holding a file a glob or a .txt list names
(oars_deploy.output_paths, in every mode); two inputs never write the same output file (x.png beside x.jpg:
x_png*, x_jpg*; --ray over a glob reaching twins/a/x.png and twins/b/x.png: a/x*, b/x*). --benchmark
prints latency (median, p90) and images/s. For an image model, ``-i`` may also be a video file, a URL that FFmpeg
opens or a camera index: a stream, predicted frame by frame (``--every N``) into results.jsonl (with each frame's
index and time) and ``<name>_vis.mp4`` (oars_deploy.streams). ``--ray`` runs a folder (or a glob / .txt list)
with Ray Data instead: resumable, records appended as they come (oars_deploy.serve.ray_data). ``--track`` adds
ByteTrack ids to a detection stream (oars_deploy.track); ``--window N --stride S`` classifies a stream window by
window with a video classifier (oars_deploy.streams.windows).
"""

from __future__ import annotations

import argparse
import os.path as osp

from oars_deploy.backends import BACKENDS
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError, run_cli
from oars_deploy.output_paths import check_output_folder
from oars_deploy.plugins import add_all_arguments, predictor_for
from oars_deploy.records import write_results
from oars_deploy.streams.options import add_stream_arguments, check_stream_flags
from oars_deploy.streams.source import stream_source


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The common flags, then every predictor plug-in's (a flag that does not fit the model is refused by its
    plug-in, with the kinds it applies to)."""
    parser = argparse.ArgumentParser(prog="oars-infer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="folder with deploy.yaml and model.onnx (tools/export.py)")
    parser.add_argument("-i", "--input", default=None,
                        help="an image or a folder of images; for image models also a video file, a URL FFmpeg "
                             "opens (http, rtsp) or a camera index, read as a stream (none for noise GANs; a video "
                             "or a folder of videos for video models; a .npz/.pkl feature file or a folder of them "
                             "for feature models)")
    parser.add_argument("-o", "--output-dir", required=True, help="folder for the pictures and results.jsonl")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda: CUDAExecutionProvider / TensorRT)")
    parser.add_argument("--backend", default="onnxruntime", choices=BACKENDS,
                        help="onnxruntime (deploy.yaml's model.onnx), ort (model.ort, the mobile format), openvino "
                        "(model.xml) or tensorrt (model.engine, GPU)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="images per predict call (default: the model's batch, 8 for a dynamic batch)")
    parser.add_argument("--benchmark", action="store_true", help="also time the model on the first batch of images")
    parser.add_argument("--warmup", type=int, default=5, help="--benchmark: untimed runs first")
    parser.add_argument("--runs", type=int, default=30, help="--benchmark: timed runs")
    parser.add_argument("--array-module", default=None, choices=("numpy", "cupy"),
                        help="pre/post-processing arrays (default: cupy with --device cuda when it runs, else numpy)")
    parser.add_argument("--every", type=int, default=1,
                        help="streams (-i a video file, URL or camera index for an image model): predict every N-th "
                             "frame (the others are drawn with the latest result)")
    parser.add_argument("--max-frames", type=int, default=None, help="streams: stop after this many frames")
    parser.add_argument("--ray", action="store_true",
                        help="batch inference with Ray Data: resumable results.jsonl, -i may also be a glob or a "
                             ".txt list (oars_deploy.serve.ray_data; needs the serve extra)")
    parser.add_argument("--num-workers", type=int, default=2, help="--ray: predictor actors (default 2)")
    parser.add_argument("--worker-cpus", type=float, default=1.0, help="--ray: Ray CPUs per actor (default 1)")
    parser.add_argument("--ray-address", default=None, help="--ray: a running Ray cluster (default: a local one)")
    add_stream_arguments(parser)
    add_all_arguments(parser)
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> None:
    """The command with its user errors raised (:class:`~oars_deploy.errors.UserError`); :func:`main` prints them.

    The plug-in of the model (deploy.yaml ``predictor``) runs it and returns its records; they are written to
    results.jsonl before the summary of the inputs that failed is raised, so what could be done is kept.
    """
    args = parse_args(argv)
    check_output_folder(args.output_dir, args.input)  # outputs never replace inputs, whatever the model
    deploy_path = osp.join(args.model_dir, DEPLOY_FILE)
    deploy = read_deploy_yaml(deploy_path)
    plugin = predictor_for(deploy, deploy_path)
    if args.input is None and plugin.needs_input:
        raise DeployError("-i/--input is required: an image or a folder of images (a video / feature file or a "
                          "folder of them for video models)")
    check_stream_flags(args, plugin)
    if args.ray:
        from oars_deploy.serve.ray_data import run_ray

        written, skipped, failures = run_ray(args, deploy, plugin)
        print(f"wrote {written} records to {args.output_dir}/results.jsonl ({skipped} done before, skipped)")
        failures.raise_if_any(total=written + len(failures))
        return
    if args.window is not None:  # a clip classifier over a stream (check_stream_flags made sure of both)
        outcome = plugin.run_windows(args, stream_source(args.input))
    else:
        outcome = plugin.run(args, deploy)
    write_results(outcome.records, args.output_dir)
    outcome.failures.raise_if_any(total=outcome.total)


def main(argv: list[str] | None = None) -> None:
    """The ``oars-infer`` console script: user errors printed without a traceback, exit status 2."""
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
