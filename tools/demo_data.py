"""Generate a demo data set: python tools/demo_data.py SET [--out DIR ...] (SET --help for its flags).

``shapes`` (images with boxes, instance masks and label maps: the segmentation, detection and pix2pix demos) is the
core's; the other sets come from the registered tasks (``Commands.subcommands`` for this tool). A set that is
already there with the same parameters is reused; a folder holding other files is refused.
"""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli
from oars.tasks import Subcommand, tool_commands

TOOL = "demo_data"


def _shapes_arguments(parser: argparse.ArgumentParser) -> None:
    from oars.data.demo_shapes import add_arguments

    add_arguments(parser)


def _run_shapes(args: argparse.Namespace) -> int:
    from oars.data.demo_shapes import run

    return run(args)


SHAPES = Subcommand(TOOL, "shapes", "128-px images of shapes with boxes, instance masks and label maps (python -m "
                    "oars.data.demo_shapes)", _shapes_arguments, _run_shapes,
                    usage="tools/demo_data.py shapes --out data/demo_shapes")


def commands() -> dict[str, Subcommand]:
    """The core's ``shapes`` and every registered task's sets, by name."""
    return {SHAPES.name: SHAPES, **tool_commands(TOOL)}


def build_parser(sets: dict[str, Subcommand]) -> argparse.ArgumentParser:
    """The tool's parser: one sub-parser per set, their usage lines in the description."""
    usage = "\n".join(f"  {c.usage}" for c in sets.values() if c.usage)
    first, _, rest = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(description=f"{first}\n\n{usage}\n\n{rest}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="set", required=True)
    for name, command in sets.items():
        command.add_arguments(sub.add_parser(name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    sets = commands()
    args = build_parser(sets).parse_args(argv)
    sets[args.set].run(args)


if __name__ == "__main__":
    run_cli(main)
