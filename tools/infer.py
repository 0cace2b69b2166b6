"""Predict with a trained model: tools/infer.py -c CONFIG -w CKPT -i INPUT_FILE_OR_DIR -o OUT_DIR [TASK FLAGS].

The config's task says what -i takes (images, videos, feature files; nothing for a model that generates from
noise) and adds its own flags: tools/infer.py -c CONFIG --help lists them.

``-o`` takes both the output folder and ``key=value`` config overrides, as on every tool:
``-o out/ test_dataloader.dataset.pipeline.1.scale=[256,256]``.

An image of a folder that cannot be read does not stop the others: they are written, and the tool ends with
one list of the files it could not read (exit status 2).
"""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli, split_output_and_overrides
from oars.engine.entry import load
from oars.errors import OarsError
from oars.tasks import TASKS, Task, get_task, known_tasks
from oars_deploy.failures import Failures


def common_parser(add_help: bool = True) -> argparse.ArgumentParser:
    """The flags of every task; a task adds its own (``Task.infer_arguments``) once the config names it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=add_help,
                                     epilog="Each task adds its own flags: tools/infer.py -c CONFIG --help lists those "
                                            f"of the config's task (tasks: {known_tasks()}).")
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("-w", "--weights", required=True, help="checkpoint")
    parser.add_argument("-i", "--input", default=None, help="a file or a folder of the inputs the config's task reads")
    parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[],
                        metavar="OUT_DIR|KEY=VALUE", help="output folder and/or config overrides")
    parser.add_argument("--output-dir", default=None, help="output folder (alternative to -o OUT_DIR)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    # first the config (and its -o overrides): its default_scope names the task whose flags the parser then takes
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("-c", "--config", default=None)
    pre.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[])
    known, _ = pre.parse_known_args(argv)
    parser = common_parser()
    cfg = task = None
    if known.config:  # without -c, the full parse below says it is required (and --help lists the common flags)
        cfg = load(known.config, [v for v in known.values if "=" in v])
        scope = cfg.get("default_scope")
        task = get_task(scope, where=known.config)
        task.infer_arguments(parser.add_argument_group(f"{scope} flags"))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, unknown, task, args.config)
    if cfg is None or task is None:  # not reached: -c is required, so parse_known_args stopped already
        parser.error("the following arguments are required: -c/--config")
    output, _ = split_output_and_overrides(args.values, args.output_dir)
    if args.input is None and task.requires_input(cfg):  # only generative tasks make pictures from nothing
        raise OarsError("-i/--input is required: an image or a folder of images")
    failures = Failures()  # images that cannot be read: the others are written, then one summary, exit 2
    written = task.infer(cfg, args.weights, args.input, output, device=args.device, failures=failures, args=args)
    print(f"wrote {len(written)} pictures to {output}")
    failures.raise_if_any(total=len(written) + len(failures))


def _refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str], task: Task | None, config: str) -> None:
    """A flag of another task is a clear error naming the config's scope; anything else is argparse's own."""
    for flag in (u.split("=", 1)[0] for u in unknown if u.startswith("--")):
        owners = [scope for scope in sorted(TASKS) if TASKS[scope] is not task and flag in _infer_flags(TASKS[scope])]
        if owners and task is not None:
            raise OarsError(f"{flag} does not apply to default_scope {task.scope!r} (it is a flag of "
                            f"{', '.join(owners)}; see tools/infer.py -c {config} --help)")
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def _infer_flags(task: Task) -> set[str]:
    """The option strings ``task`` adds to tools/infer.py."""
    probe = argparse.ArgumentParser(add_help=False)
    task.infer_arguments(probe)
    return {s for action in probe._actions for s in action.option_strings}


if __name__ == "__main__":
    run_cli(main)
