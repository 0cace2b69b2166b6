"""``clip_classes``: video (clip) classifiers, whose deploy.yaml has a ``sampling`` section.

Validation: :func:`oars_deploy.predictors.clip_classes.config.validate_video`. Run:
:func:`oars_deploy.predictors.clip_classes.cli.run_video` (decode,
sample, preprocess, classify; the top-k printed per video and ``predictions.json``), one
:class:`.records.ClipClassesRecord` per video. Flag: ``--topk``. On a stream (``--window N``) it classifies window
by window (:meth:`ClipClasses.run_windows`); ``oars-serve`` serves it with :mod:`.served`.
"""

from __future__ import annotations

import argparse
from typing import Any

from oars_deploy.classifiers import check_classify_args
from oars_deploy.failures import Failures
from oars_deploy.plugins import PredictorPlugin, PredictorRun, add_flag, register_predictor
from oars_deploy.predictors.clip_classes.views import result_views
from oars_deploy.records import ResultRecord
from oars_deploy.streams.windows import run_windows

DEFAULT_TOPK = 5


def add_topk(parser: argparse.ArgumentParser) -> None:
    """``--topk`` (shared by the clip and feature classifiers)."""
    add_flag(parser, "--topk", type=int, default=DEFAULT_TOPK, help="video models: how many labels to print and write")


@register_predictor("clip_classes")
class ClipClasses(PredictorPlugin):
    """Top-k classes per video file (see the module docstring)."""

    section = "sampling"
    describes = "video classifiers"
    windows = True  # oars-infer --window: a stream classified window by window
    result_views = staticmethod(result_views)  # Result.probs: oars_deploy.result

    def validate(self, deploy: dict, path: str) -> None:
        """The ``sampling`` section, the clip input and the video steps
        (:mod:`oars_deploy.predictors.clip_classes.config`)."""
        from oars_deploy.predictors.clip_classes.config import validate_video

        validate_video(deploy, path)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--topk``."""
        add_topk(parser)

    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """:func:`oars_deploy.predictors.clip_classes.cli.run_video` with its failures and records collected."""
        from oars_deploy.predictors.clip_classes.cli import list_videos, run_video

        failures = Failures(what="videos", verb="could not be classified")
        results: list[ResultRecord] = []
        run_video(args, failures=failures, results=results)
        return PredictorRun(records=results, failures=failures, total=len(list_videos(args.input)))

    def run_windows(self, args: argparse.Namespace, source: Any) -> PredictorRun:
        """The export's :class:`~.predictor.VideoPredictor` over the stream, window by window
        (:func:`oars_deploy.streams.windows.run_windows`)."""
        from oars_deploy.predictors.clip_classes.predictor import VideoPredictor

        check_classify_args(args, "clip")  # before the model loads
        return run_windows(args, source, VideoPredictor(args.model_dir, device=args.device, backend=args.backend))

    def served_model(self) -> type:
        """:class:`~.served.ClipModel`."""
        from oars_deploy.predictors.clip_classes.served import ClipModel

        return ClipModel

    def list_inputs(self, spec: str) -> list[str]:
        """The videos of ``spec`` (:func:`~.cli.list_videos`)."""
        from oars_deploy.predictors.clip_classes.cli import list_videos

        return list_videos(spec)
