"""Evaluate a checkpoint: tools/eval.py -c CONFIG -w CKPT [--show-dir DIR] [--report], or MMDetection's
tools/eval.py CONFIG CKPT; or an export folder (FP32/FP16/INT8/pruned ONNX through the torch-free predictor, as
deployed): tools/eval.py -c CONFIG --model-dir DIR."""

import argparse

from oars.cli import base_parser, run_cli
from oars.engine.runner import verbose_console
from oars.evaluation.report import format_metrics
from oars.pipelines.evaluate import evaluate
from oars_deploy.backends import BACKENDS

USAGE_HINT = "tools/eval.py CONFIG CHECKPOINT, or -c CONFIG -w CHECKPOINT (or -c CONFIG --model-dir DIR)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, with the config and checkpoint given either as flags (``-c``/``-w``) or positionally as
    MMDetection's ``tools/test.py CONFIG CHECKPOINT`` takes them; each given once (else one argparse error).

    Args:
        argv: the command line after the program name (None: ``sys.argv[1:]``).

    Returns:
        The namespace; ``config`` and ``weights`` hold the values whichever way they were given.
    """
    parser = base_parser(__doc__)
    for action in parser._actions:  # -c is required by base_parser; here CONFIG may stand in for it
        if action.dest == "config":
            action.required = False
    parser.add_argument("config_arg", nargs="?", metavar="CONFIG", help="the YAML config (instead of -c)")
    parser.add_argument("weights_arg", nargs="?", metavar="CHECKPOINT", help="the checkpoint (instead of -w)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-w", "--weights", help="checkpoint to evaluate")
    source.add_argument("--model-dir", help="export folder (deploy.yaml + model*.onnx) to evaluate with the runtime "
                                            "predictor instead of a checkpoint")
    parser.add_argument("--device", default="cpu", help="--model-dir: cpu or cuda")
    parser.add_argument("--backend", default="onnxruntime", choices=BACKENDS,
                        help="--model-dir: the runtime that runs the export's file of that format (onnxruntime: "
                             "model.onnx, openvino: model.xml, tensorrt: model.engine...; written by tools/export.py "
                             "--format)")
    parser.add_argument("--show-dir", default=None, help="write pictures of predictions next to the ground truth")
    parser.add_argument("--max-show", type=int, default=24, help="how many pictures --show-dir writes")
    parser.add_argument("--report", action="store_true",
                        help="write <work_dir>/report.html: metrics, per-class tables and the confusion matrix, "
                             "plus per task: detection PR curves and the images with the most missed/false boxes; "
                             "segmentation per-class IoU bars and the images with the lowest mIoU; video per-class "
                             "accuracy and the clips with the lowest true-class probability")
    parser.add_argument("--out", default=None,
                        help="also write every raw prediction to this JSON file: detection in the COCO results "
                             "format (image_id, category_id, bbox xywh, score[, segmentation RLE]), segmentation "
                             "one record per image (per-class RLEs), video one record per clip (top-k, scores)")
    parser.add_argument("--overwrite", action="store_true", help="--out: replace an existing file")
    parser.add_argument("--data", default=None, metavar="DATA_YAML",
                        help="evaluate on the test split (else val) of this dataset description (format, root, "
                             "train/val/test, names; an ultralytics data.yaml as is): sets the test loader's dataset "
                             "and the model's num_classes (docs/training.md, 'One data switch')")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print mmengine's full set-up dump (environment, resolved config, hook order)")
    args = parser.parse_args(argv)
    if args.config_arg is not None and args.config is not None:
        parser.error(f"the config is given twice: CONFIG {args.config_arg} and -c {args.config}; give one "
                     f"({USAGE_HINT})")
    if args.weights_arg is not None and (args.weights is not None or args.model_dir is not None):
        given = f"-w {args.weights}" if args.weights is not None else f"--model-dir {args.model_dir}"
        parser.error(f"the model is given twice: CHECKPOINT {args.weights_arg} and {given}; give one ({USAGE_HINT})")
    args.config = args.config if args.config is not None else args.config_arg
    args.weights = args.weights if args.weights is not None else args.weights_arg
    if args.config is None:
        parser.error(f"a config is required: {USAGE_HINT}")
    if args.weights is None and args.model_dir is None:
        parser.error(f"a checkpoint (or --model-dir) is required: {USAGE_HINT}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with verbose_console(args.verbose):
        result = evaluate(args.config, args.weights, args.overrides, work_dir=args.work_dir,
                          show_dir=args.show_dir, max_show=args.max_show, report=args.report,
                          model_dir=args.model_dir, device=args.device, backend=args.backend, out=args.out,
                          overwrite=args.overwrite, data=args.data)
    print(format_metrics(result))
    print(f"metrics written to {result['metrics_file']}")
    if result.get("report_file"):
        print(f"report written to {result['report_file']}")
    if result.get("out_file"):
        print(f"predictions written to {result['out_file']}")


if __name__ == "__main__":
    run_cli(main)
