"""Predict with a trained model: tools/infer.py -c CONFIG -w CKPT -i INPUT_FILE_OR_DIR -o OUT_DIR [TASK FLAGS].

The config's task says what -i takes (images, videos, feature files; nothing for a model that generates from
noise) and adds its own flags: tools/infer.py -c CONFIG --help lists them.

``-o`` takes both the output folder and ``key=value`` config overrides, as on every tool:
``-o out/ test_dataloader.dataset.pipeline.1.scale=[256,256]``.

An image of a folder that cannot be read does not stop the others: they are written, and the tool ends with
one list of the files it could not read (exit status 2).

For a model that predicts images (detection, instance or semantic segmentation), ``-i`` may also be a video file,
a URL FFmpeg opens or a camera index: a stream, predicted frame by frame (``--every N``, ``--max-frames``,
``--track`` for detectors) into results.jsonl (each frame's index and time) and ``<name>_vis.mp4``, by the same
code as ``oars-infer`` on an export (oars.pipelines.infer).
"""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli, split_output_and_overrides
from oars.config.check import load_checked_config
from oars.errors import OarsError
from oars.pipelines.infer import add_stream_arguments, infer_images, infer_stream, refuse_stream_flags
from oars.task_flags import parse_task_command_line
from oars.tasks import known_tasks
from oars_deploy.failures import Failures
from oars_deploy.records import write_results
from oars_deploy.streams.source import stream_source


def common_parser(add_help: bool = True) -> argparse.ArgumentParser:
    """The flags of every task; a task adds its own (``Predictor.infer_arguments``) once the config names it."""
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
    add_stream_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    # the config's default_scope names the task whose flags the parser then takes
    line = parse_task_command_line(common_parser(), argv,
                                   lambda task, group: task.default_kind.predictor.infer_arguments(group), "infer",
                                   load_checked_config)
    args, cfg, task = line.args, line.cfg, line.task
    output, _ = split_output_and_overrides(args.values, args.output_dir)
    predictor = task.predictor(cfg)  # the predictor of the config's kind of model
    if args.input is None and predictor.requires_input(cfg):  # only generative tasks make pictures from nothing
        raise OarsError("-i/--input is required: an image or a folder of images")
    source = stream_source(args.input)
    if source is not None:
        run = infer_stream(task, cfg, args.weights, source, output, args, device=args.device)
        if run is not None:
            write_results(run.records, output)
            print(f"wrote {len(run.records)} frame records to {output}/results.jsonl")
            run.failures.raise_if_any(total=run.total)  # a file that ended before its declared length: exit 2
            return
    refuse_stream_flags(args, f"-i {args.input} is read as this model's own input")
    if predictor.image_plugin is not None:  # images: the runtime plug-in's loop, the checkpoint as its model
        flags = {name: getattr(args, name) for name in ("draw_threshold",) if getattr(args, name, None) is not None}
        infer_images(task, cfg, args.weights, args.input, output, device=args.device, flags=flags)
        return
    failures = Failures()  # images that cannot be read: the others are written, then one summary, exit 2
    written = predictor.infer(cfg, args.weights, args.input, output, device=args.device, failures=failures, args=args)
    print(f"wrote {len(written)} pictures to {output}")
    failures.raise_if_any(total=len(written) + len(failures))


if __name__ == "__main__":
    run_cli(main)
