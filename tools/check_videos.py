"""Decode every video (or frame folder) of an annotation list and list the unreadable ones before training:
tools/check_videos.py LIST [--root DIR] [--backend pyav|torchcodec|rawframes] [--workers N]. Exit status 2 when any
file cannot be read."""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli
from oars.tasks import tool_command


def main(argv: Sequence[str] | None = None) -> None:
    command = tool_command("check_videos")  # given by the task that reads videos (oars.tasks)
    parser = argparse.ArgumentParser(description=__doc__)
    command.add_arguments(parser)
    command.run(parser.parse_args(argv))


if __name__ == "__main__":
    run_cli(main)
