"""The stream-only flags of ``oars-infer`` beyond ``--every`` / ``--max-frames``: ``--track`` (detection streams,
:mod:`oars_deploy.track`) and ``--window`` / ``--stride`` (clip classifiers, :mod:`oars_deploy.streams.windows`),
and the check that refuses them where they do not apply, before a model is loaded.
"""

from __future__ import annotations

import argparse
from typing import Any

from oars_deploy.errors import DeployError
from oars_deploy.streams.source import stream_source
from oars_deploy.track.options import TRACK_FLAGS, add_track_arguments, tracker_config
from oars_deploy.track.stream import can_track


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    """``--track`` with its ByteTrack parameters, ``--window`` and ``--stride``."""
    add_track_arguments(parser)
    parser.add_argument("--window", type=int, default=None,
                        help="video classifiers on a stream (-i a video file, URL or camera index): classify the "
                             "last N frames, one record per window, and an annotated video")
    parser.add_argument("--stride", type=int, default=None,
                        help="--window: frames between the ends of two windows (default: the window, no overlap)")


def is_clip_classifier(plugin: Any) -> bool:
    """Whether ``plugin`` classifies clips of decoded frames, window by window on a stream: the plug-in says so
    (:attr:`oars_deploy.plugins.PredictorPlugin.windows`)."""
    return bool(getattr(plugin, "windows", False))


def check_stream_flags(args: argparse.Namespace, plugin: Any) -> None:
    """Refuse ``--track*`` / ``--window`` / ``--stride`` where they do not apply (one message naming the flag).

    Raises:
        DeployError: a ``--track-*`` parameter without ``--track`` or out of its range, ``--stride`` without
            ``--window``, ``--track`` with a model that is not a detector, ``--window`` with one that is not a clip
            classifier, or either with an input that is not a stream (a video file, a URL or a camera index) or
            with ``--ray``; a video classifier on a URL or camera without ``--window``.
    """
    given = [flag for flag, key in TRACK_FLAGS.items() if getattr(args, key, None) is not None]
    track, window = bool(getattr(args, "track", False)), getattr(args, "window", None) is not None
    if given and not track:
        raise DeployError(f"{given[0]} is a tracking parameter: add --track")
    if getattr(args, "stride", None) is not None and not window:
        raise DeployError("--stride applies to --window (sliding-window clip classification)")
    if track and not can_track(plugin):
        raise DeployError(f"--track applies to detection models, not to {plugin.describes or plugin.name} "
                          f"(predictor {plugin.name!r})")
    if window and not is_clip_classifier(plugin):
        raise DeployError(f"--window applies to video classifiers, not to {plugin.describes or plugin.name} "
                          f"(predictor {plugin.name!r})")
    if track:
        tracker_config(args)  # values out of range, before anything is opened or written
    if (track or window) and getattr(args, "ray", False):
        raise DeployError(f"{'--track' if track else '--window'} reads one stream in order; --ray runs a folder of "
                          "files in parallel: use one or the other")
    source = stream_source(args.input)
    if not window and source is not None and source.kind != "file" and is_clip_classifier(plugin):
        raise DeployError(f"-i {args.input}: a video classifier reads a {source.kind} window by window: add "
                          "--window N (frames per clip) and optionally --stride S")
    if (track or window) and source is None:
        flag = "--track" if track else "--window"
        raise DeployError(f"{flag} applies to streams (-i a video file, a URL or a camera index), not to "
                          f"-i {args.input}")
