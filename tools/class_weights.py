"""Median-frequency class weights from a config's training label maps: tools/class_weights.py -c CONFIG
[-o key=value ...] [--split train] [--ignore-index N] [--num-workers N]. Prints the YAML to paste as
model.decode_head.loss_decode.class_weight."""

from __future__ import annotations

from collections.abc import Sequence

from oars.cli import base_parser, run_cli
from oars.tasks import tool_command


def main(argv: Sequence[str] | None = None) -> None:
    command = tool_command("class_weights")  # given by the task that trains on label maps (oars.tasks)
    parser = base_parser(__doc__)
    command.add_arguments(parser)
    command.run(parser.parse_args(argv))


if __name__ == "__main__":
    run_cli(main)
