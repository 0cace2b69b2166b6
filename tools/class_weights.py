"""Median-frequency class weights from a config's training label maps: tools/class_weights.py -c CONFIG
[-o key=value ...] [--split train] [--ignore-index N] [--num-workers N]. Prints the YAML to paste as
model.decode_head.loss_decode.class_weight."""

from __future__ import annotations

import sys
import warnings
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
    from segmentation.datasets.class_frequency import (
        UnseenClassWarning,
        class_frequency,
        format_weights,
        label_sources,
    )

    cfg = load_config(args.config, args.overrides)
    sources = label_sources(cfg, args.split, args.ignore_index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnseenClassWarning)
        result = class_frequency(sources, num_workers=args.num_workers)
    for warning in caught:  # one plain line each, not Python's "file:line: Warning" form
        if issubclass(warning.category, UnseenClassWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    print(format_weights(result, args.split, cfg.get("model")))


if __name__ == "__main__":
    run_cli(main)
