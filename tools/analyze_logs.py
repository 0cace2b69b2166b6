"""Analyse the scalar logs of training runs (MMDetection's analyze_logs):

  tools/analyze_logs.py plot_curve RUN_DIR [RUN_DIR ...] --keys loss mIoU [--out curves.png] [--legend A B]
  tools/analyze_logs.py cal_train_time RUN_DIR [RUN_DIR ...] [--include-outliers]

RUN_DIR is a training work dir (mmengine writes <timestamp>/vis_data/scalars.json there), one <timestamp> folder
or a scalars.json file. Training keys are drawn against the iteration, validation metrics against the epoch."""

import argparse

from oars.cli import run_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    plot = sub.add_parser("plot_curve", help="plot logged scalars of one or more runs, overlaid")
    plot.add_argument("runs", nargs="+", metavar="RUN_DIR", help="work dirs (or scalars.json files) to compare")
    plot.add_argument("--keys", nargs="+", default=["loss"], help="logged keys to plot, one panel each "
                                                                   "(default: loss)")
    plot.add_argument("--out", default="curves.png", help="picture to write (.png, .pdf, .svg; default curves.png)")
    plot.add_argument("--legend", nargs="+", default=None,
                      help="one name per run, or one label per run and key (runs outer)")
    plot.add_argument("--title", default=None, help="figure title")
    plot.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    times = sub.add_parser("cal_train_time", help="time per iteration: slowest/fastest epoch, mean and std")
    times.add_argument("runs", nargs="+", metavar="RUN_DIR", help="work dirs (or scalars.json files)")
    times.add_argument("--include-outliers", action="store_true",
                       help="keep each epoch's first logged iteration (start-up time) in the statistics")
    return parser


def main() -> None:
    args = _parser().parse_args()
    from oars.analysis.logs import format_train_time, load_run, plot_curves, train_time

    runs = [load_run(path) for path in args.runs]
    if args.command == "plot_curve":
        out = plot_curves(runs, args.keys, args.out, args.legend, args.title, overwrite=args.overwrite)
        print(f"curves written to {out}")
    else:
        print("\n".join(format_train_time(train_time(run, args.include_outliers)) for run in runs))


if __name__ == "__main__":
    run_cli(main)
