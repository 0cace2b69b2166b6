"""Median-frequency class weights from a config's training label maps: tools/class_weights.py -c CONFIG
[-o key=value ...] [--split train] [--ignore-index N] [--num-workers N]. Prints the YAML to paste as
model.decode_head.loss_decode.class_weight."""

from __future__ import annotations

from collections.abc import Sequence

from oars.cli import base_parser, run_cli

SPLITS = ("train", "val", "test")


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--split", choices=SPLITS, default="train",
                        help="whose dataloader's label maps to count (default: train, what the weights train)")
    parser.add_argument("--ignore-index", type=int, default=None,
                        help="label value that is not a class (default: the dataset's ignore_index, usually 255)")
    parser.add_argument("--num-workers", type=int, default=0,
                        help="DataLoader workers reading the label maps (default 0: this process)")
    args = parser.parse_args(argv)
    if args.num_workers < 0:
        parser.error(f"--num-workers must be >= 0, got {args.num_workers}")
    from oars.config import load_config
    from segmentation.datasets.class_frequency import class_frequency, format_weights, label_sources

    sources = label_sources(load_config(args.config, args.overrides), args.split, args.ignore_index)
    result = class_frequency(sources, num_workers=args.num_workers)
    print(format_weights(result, args.split))


if __name__ == "__main__":
    run_cli(main)
