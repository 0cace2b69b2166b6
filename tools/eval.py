"""Evaluate a checkpoint: tools/eval.py -c CONFIG -w CKPT [--show-dir DIR] [--report]; or an export folder
(FP32/FP16/INT8/pruned ONNX through the torch-free predictor, as deployed): tools/eval.py -c CONFIG --model-dir DIR."""

from oars.cli import base_parser, run_cli
from oars.evaluation.report import format_metrics
from oars.pipelines.evaluate import evaluate


def main() -> None:
    parser = base_parser(__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-w", "--weights", help="checkpoint to evaluate")
    source.add_argument("--model-dir", help="export folder (deploy.yaml + model*.onnx) to evaluate with the runtime "
                                            "predictor instead of a checkpoint")
    parser.add_argument("--device", default="cpu", help="--model-dir: cpu or cuda")
    parser.add_argument("--backend", default="onnxruntime", choices=("onnxruntime", "tensorrt"),
                        help="--model-dir: onnxruntime (model.onnx) or tensorrt (model.engine)")
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
    args = parser.parse_args()
    result = evaluate(args.config, args.weights, args.overrides, work_dir=args.work_dir,
                      show_dir=args.show_dir, max_show=args.max_show, report=args.report, model_dir=args.model_dir,
                      device=args.device, backend=args.backend, out=args.out, overwrite=args.overwrite)
    print(format_metrics(result))
    print(f"metrics written to {result['metrics_file']}")
    if result.get("report_file"):
        print(f"report written to {result['report_file']}")
    if result.get("out_file"):
        print(f"predictions written to {result['out_file']}")


if __name__ == "__main__":
    run_cli(main)
