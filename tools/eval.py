"""Evaluate a checkpoint: tools/eval.py -c CONFIG -w CKPT [--show-dir DIR] [--report]."""

from oars.cli import base_parser, run_cli
from oars.engine.entry import evaluate
from oars.evaluation.report import format_metrics


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("-w", "--weights", required=True, help="checkpoint to evaluate")
    parser.add_argument("--show-dir", default=None, help="write pictures of predictions next to the ground truth")
    parser.add_argument("--max-show", type=int, default=24, help="how many pictures --show-dir writes")
    parser.add_argument("--report", action="store_true",
                        help="write <work_dir>/report.html: metrics, per-class tables and the confusion matrix, "
                             "plus per task: detection PR curves and the images with the most missed/false boxes; "
                             "segmentation per-class IoU bars and the images with the lowest mIoU; video per-class "
                             "accuracy and the clips with the lowest true-class probability")
    args = parser.parse_args()
    result = evaluate(args.config, args.weights, args.overrides, work_dir=args.work_dir,
                      show_dir=args.show_dir, max_show=args.max_show, report=args.report)
    print(format_metrics(result))
    print(f"metrics written to {result['metrics_file']}")
    if result.get("report_file"):
        print(f"report written to {result['report_file']}")


if __name__ == "__main__":
    run_cli(main)
