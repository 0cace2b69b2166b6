"""Snippet features of long videos from a trained recognizer, for temporal action localisation (BMN):
tools/extract_features.py -c RECOGNIZER_CFG -w CKPT -i VIDEOS -o OUT [--snippet N] [--stride S] [--workers W]
[--batch-size B] [--device cpu] [-o key=value ...].

Snippet k covers frames [k*S, k*S + N) and is sampled, resized and cropped as the config's test pipeline takes a
clip; its features (the recognizer's pooled features before the classifier) become row k of OUT/<video_id>.npy
(float32 T x C), OUT/<video_id>.scores.npy its class probabilities (float32 [K]: the recognizer's prediction
averaged over the snippets, for ActivityNet-style detection: LoadVideoClassScores), and OUT/videos.json records
each video's duration_second, num_frames, fps and feature_frame.
Default N: the frames one test sample spans (clip_len x frame_interval x num_clips); default S: N. A rerun
skips the videos already done. An unreadable video does not stop the others: they are written, and the tool ends
with the list of those it could not read (exit status 2). -o may not be or lie inside -i.
"""

import argparse
from collections.abc import Sequence

from oars.cli import run_cli
from oars.config.check import load_checked_config
from oars.tasks import tool_command


def main(argv: Sequence[str] | None = None) -> None:
    command = tool_command("extract_features")  # given by the task whose recognizers read videos (oars.tasks)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    command.add_arguments(parser)
    args = parser.parse_args(argv)
    # a misspelt type or key is named before any video is read (-o also takes the output folder: no '=')
    load_checked_config(args.config, [v for v in args.values if "=" in v])
    command.run(args)


if __name__ == "__main__":
    run_cli(main)
