"""Decode every video (or frame folder) of an annotation list and list the unreadable ones before training:
tools/check_videos.py LIST [--root DIR] [--backend pyav|torchcodec|rawframes] [--workers N]. Exit status 2 when any
file cannot be read."""

import argparse

from oars.cli import run_cli
from oars.errors import DataError


def main() -> None:
    from video.datasets.check import CHECK_BACKENDS, check_video_list, format_video_report

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("list", help="annotation list: `path label ...` lines (`frame_dir total_frames label` for "
                        "rawframes)")
    parser.add_argument("--root", default="", help="folder the list's paths are relative to (default: the list's)")
    parser.add_argument("--backend", choices=CHECK_BACKENDS, default="pyav")
    parser.add_argument("--workers", type=int, default=0, help="processes decoding in parallel (default: 0, this one)")
    parser.add_argument("--filename-tmpl", default="img_{:05d}.jpg", help="frame file names (rawframes)")
    parser.add_argument("--start-index", type=int, default=1, help="number of the first frame file (rawframes)")
    args = parser.parse_args()
    report = check_video_list(args.list, args.root, args.backend, args.workers, args.filename_tmpl, args.start_index)
    print(format_video_report(report))
    if report.failures:
        raise DataError(f"{len(report.failures)} of {report.num_files} file(s) in {args.list} cannot be read "
                        "(listed above); fix or remove them, or train with `on_bad_video: skip`")


if __name__ == "__main__":
    run_cli(main)
