"""The video task's commands (:class:`oars.tasks.Commands`): ``tools/convert.py videos2list`` /
``thumos2activitynet``, ``tools/check_videos.py``, ``tools/extract_features.py``, ``tools/demo_data.py videos`` /
``long-videos``, and the hub converter of torchvision's R(2+1)D-18. Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse

from oars.tasks import Commands, Subcommand


class VideoCommands(Commands):
    """What the video task adds to the tools."""

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py videos2list`` (:mod:`video.datasets.build_file_list`) and ``thumos2activitynet``
        (:mod:`video.converters_thumos`); ``tools/check_videos.py``;
        ``tools/extract_features.py`` (:mod:`video.features.extract`);
        ``tools/demo_data.py videos`` (the demo clips and features); ``tools/demo_data.py long-videos`` (long videos
        with timed actions, :mod:`video.demo_long_videos`)."""
        return [Subcommand("convert", "videos2list", "a folder of videos (ROOT/<class>/<video>) -> 'path label' "
                           "lists and classes.txt (MMAction2's build_file_list)", _videos2list_arguments,
                           _run_videos2list,
                           usage="python tools/convert.py videos2list --input data/myvideos/videos --out "
                                 "data/myvideos \\\n    [--level 2|1] [--split-ratio 0.8 | --split-file "
                                 "train=trainlist01.txt val=testlist01.txt] \\\n    [--classes classInd.txt] "
                                 "[--shuffle] [--seed 0] [--overwrite]",
                           check_outputs=_check_videos2list_output),
                Subcommand("convert", "thumos2activitynet", "THUMOS14 temporal annotations (<Class>_val.txt / "
                           "_test.txt) -> the ActivityNet v1.3 JSON of ActivityNetFeatureDataset",
                           _thumos_arguments, _run_thumos,
                           usage="python tools/convert.py thumos2activitynet --ann-dir DIR --out OUT.json "
                                 "[--subset validation|test] \\\n    (--videos DIR | --features-index videos.json) "
                                 "[--classes-out classes.txt] [--overwrite]",
                           check_outputs=_check_thumos_outputs),
                Subcommand("check_videos", "check_videos", "decode every video of an annotation list and list the "
                           "unreadable ones", _check_videos_arguments, _run_check_videos),
                Subcommand("extract_features", "extract_features", "snippet features of long videos from a "
                           "trained recognizer (T x C .npy per video + videos.json, for BMN)",
                           _extract_features_arguments, _run_extract_features,
                           usage="tools/extract_features.py -c RECOGNIZER_CFG -w CKPT -i VIDEOS -o OUT"),
                Subcommand("demo_data", "videos", "moving-shape clips (8 classes) with their lists and per-clip "
                           "features (python -m video.demo_data)", _demo_arguments, _run_demo,
                           usage="tools/demo_data.py videos --out data/demo_videos"),
                Subcommand("demo_data", "long-videos", "long videos of a static scene with 1-3 timed motion actions "
                           "and an ActivityNet-style JSON, for BMN (python -m video.demo_long_videos)",
                           _long_demo_arguments, _run_long_demo,
                           usage="tools/demo_data.py long-videos --out data/demo_long_videos")]

    def hub_converters(self) -> dict[str, str | tuple[str, dict]]:
        """Converter of torchvision's R(2+1)D-18 for the hub (``load_from: torchvision://r2plus1d_18``)."""
        return {"torchvision_r2plus1d": "video.models.converters:convert_torchvision_r2plus1d"}


def _split_file(text: str) -> tuple[str, str]:
    from video.datasets.build_file_list import SPLIT_NAMES

    name, sep, path = text.partition('=')
    if not sep or name not in SPLIT_NAMES or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE with NAME one of {list(SPLIT_NAMES)}, got {text!r}")
    return name, path


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {value}")
    return value


def _videos2list_arguments(parser: argparse.ArgumentParser) -> None:
    from video.datasets.build_file_list import VIDEO_EXTENSIONS

    parser.add_argument("--input", required=True, help="the videos folder: ROOT/<class>/<video> (--level 2) or "
                        "ROOT/<video> (--level 1); the lists' paths are relative to it")
    parser.add_argument("--out", required=True, help="folder for <split>.txt and classes.txt (may be --input)")
    parser.add_argument("--level", type=int, choices=[1, 2], default=2,
                        help="2: class folders (default); 1: videos directly in --input, classes from --split-file")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--split-ratio", type=_ratio, default=0.8,
                       help="fraction of each class for train.txt, the rest in val.txt (default 0.8; 1: train only)")
    split.add_argument("--split-file", type=_split_file, nargs="+", default=None, metavar="NAME=FILE",
                       help="official-style splits instead: train=FILE val=FILE [test=FILE], one <class>/<video> "
                            "per line (UCF101's trainlist01.txt / testlist01.txt)")
    parser.add_argument("--classes", default=None, help="class names in label order (one per line, or UCF101's "
                        "'index name' classInd.txt; default: the sorted class folders)")
    parser.add_argument("--shuffle", action="store_true", help="shuffle each class before the ratio split and the "
                        "lines of each list")
    parser.add_argument("--seed", type=int, default=0, help="random seed for --shuffle (default 0)")
    parser.add_argument("--ext", nargs="+", default=list(VIDEO_EXTENSIONS), help="video file suffixes")
    parser.add_argument("--overwrite", action="store_true", help="replace existing list files (default: stop)")


def _split_files(args: argparse.Namespace) -> dict[str, str]:
    from oars.errors import OarsError

    files: dict[str, str] = {}
    for name, path in args.split_file or []:
        if name in files:
            raise OarsError(f"--split-file {name}= is given twice ({files[name]}, {path}); give each split once")
        files[name] = path
    return files


def _check_videos2list_output(args: argparse.Namespace) -> None:
    """Before any reading: ``--out`` is a folder, not one inside ``--input`` (it would become a class folder of the
    next run; ``--input`` itself or a folder above it is fine), and no list file replaces an input or (without
    ``--overwrite``) an existing file."""
    import os.path as osp

    from oars_deploy.output_paths import OutputPathError, check_new_file, check_output_folder
    from video.datasets.build_file_list import CLASSES_FILE

    check_output_folder(args.out, flag="--out")
    out, root = osp.realpath(args.out), osp.realpath(args.input)
    if out.startswith(root.rstrip(osp.sep) + osp.sep):
        raise OutputPathError(f"--out {args.out} is inside the videos folder --input {args.input}: it would be read "
                              "as a class folder next time; choose --input itself or a folder outside it")
    files = _split_files(args)
    names = list(files) if files else ["train", "val"] if args.split_ratio < 1 else ["train"]
    inputs = (*files.values(), *([args.classes] if args.classes else []))
    for name in [f"{n}.txt" for n in names] + [CLASSES_FILE]:
        check_new_file(osp.join(args.out, name), args.overwrite, flag="--out", inputs=inputs)


def _run_videos2list(args: argparse.Namespace) -> None:
    from video.datasets.build_file_list import build_file_lists, summary

    print(summary(build_file_lists(args.input, args.out, level=args.level, split_ratio=args.split_ratio,
                                   split_files=_split_files(args) or None, classes_file=args.classes,
                                   shuffle=args.shuffle, seed=args.seed, extensions=args.ext,
                                   overwrite=args.overwrite)))


def _thumos_arguments(parser: argparse.ArgumentParser) -> None:
    from video.converters_thumos import add_arguments

    add_arguments(parser)


def _check_thumos_outputs(args: argparse.Namespace) -> None:
    from video.converters_thumos import check_outputs

    check_outputs(args)


def _run_thumos(args: argparse.Namespace) -> None:
    from video.converters_thumos import run

    run(args)


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    from video.demo_data import add_arguments

    add_arguments(parser)


def _run_demo(args: argparse.Namespace) -> int:
    from video.demo_data import run

    return run(args)


def _long_demo_arguments(parser: argparse.ArgumentParser) -> None:
    from video.demo_long_videos import add_arguments

    add_arguments(parser)


def _run_long_demo(args: argparse.Namespace) -> int:
    from video.demo_long_videos import run

    return run(args)


def _extract_features_arguments(parser: argparse.ArgumentParser) -> None:
    from video.features.extract import add_arguments

    add_arguments(parser)


def _run_extract_features(args: argparse.Namespace) -> None:
    """Extract; a ``FolderFailuresError`` (exit status 2) lists the unreadable videos after the others are written."""
    from video.features.extract import run

    run(args)


def _check_videos_arguments(parser: argparse.ArgumentParser) -> None:
    from video.datasets.check import CHECK_BACKENDS

    parser.add_argument("list", help="annotation list: `path label ...` lines (`frame_dir total_frames label` for "
                        "rawframes)")
    parser.add_argument("--root", default="", help="folder the list's paths are relative to (default: the list's)")
    parser.add_argument("--backend", choices=CHECK_BACKENDS, default="pyav")
    parser.add_argument("--workers", type=int, default=0, help="processes decoding in parallel (default: 0, this one)")
    parser.add_argument("--filename-tmpl", default="img_{:05d}.jpg", help="frame file names (rawframes)")
    parser.add_argument("--start-index", type=int, default=1, help="number of the first frame file (rawframes)")


def _run_check_videos(args: argparse.Namespace) -> None:
    """Decode every listed file; print the report; a :class:`DataError` (exit status 2) when any cannot be read."""
    from oars.errors import DataError
    from video.datasets.check import check_video_list, format_video_report

    report = check_video_list(args.list, args.root, args.backend, args.workers, args.filename_tmpl, args.start_index)
    print(format_video_report(report))
    if report.failures:
        raise DataError(f"{len(report.failures)} of {report.num_files} file(s) in {args.list} cannot be read "
                        "(listed above); fix or remove them, or train with `on_bad_video: skip`")
