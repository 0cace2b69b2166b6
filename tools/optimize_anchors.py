"""Fit anchors to a config's training boxes: tools/optimize_anchors.py -c CONFIG [-o key=value ...] [--num N]
[--input-size S] [--iters I] [--seed S]. Boxes are rescaled as training rescales the images. YOLO anchor lists:
k-means on 1 - IoU, then a genetic refinement; scales x ratios anchors (RetinaNet, RPN, SSD): k-means on log(h / w)
and on the position inside the octave. Prints the mean best IoU and BPR of the config's anchors and of the fitted
ones, and the -o line to paste."""

from __future__ import annotations

from collections.abc import Sequence

from oars.cli import base_parser, run_cli
from oars.tasks import tool_command


def main(argv: Sequence[str] | None = None) -> None:
    command = tool_command("optimize_anchors")  # given by the task whose models use anchors (oars.tasks)
    parser = base_parser(__doc__)
    command.add_arguments(parser)
    command.run(parser.parse_args(argv))


if __name__ == "__main__":
    run_cli(main)
