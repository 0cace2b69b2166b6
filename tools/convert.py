"""Convert annotations or checkpoints to what oars reads: python tools/convert.py COMMAND ... (COMMAND --help).

Every converter refuses to replace an existing output without --overwrite and never writes over its input
(oars_deploy.output_paths: the rule every tool that writes files follows).
"""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli
from oars.tasks import Subcommand, tool_commands

TOOL = "convert"  # the commands are those the registered tasks give this tool (oars.tasks, Commands.subcommands)


def build_parser(commands: dict[str, Subcommand]) -> argparse.ArgumentParser:
    """The tool's parser: one sub-parser per command, its usage lines in the description."""
    usage = "\n".join(f"  {c.usage}".replace("\n", "\n  ") for c in commands.values() if c.usage)
    first, _, rest = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(description=f"{first}\n\n{usage}\n\n{rest}" if usage else __doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    for name, command in commands.items():
        command.add_arguments(sub.add_parser(name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    commands = tool_commands(TOOL)
    args = build_parser(commands).parse_args(argv)
    command = commands[args.command]
    check_outputs(args, command)
    command.run(args)


def check_outputs(args: argparse.Namespace, command: Subcommand) -> None:
    """Before any reading: the output may not replace an input, nor an existing file without --overwrite."""
    if command.check_outputs is not None:
        command.check_outputs(args)


if __name__ == '__main__':
    run_cli(main)
