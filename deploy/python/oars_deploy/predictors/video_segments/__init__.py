"""``video_segments``: temporal action localisers (BMN, C-TCN) exported with the recognizer that extracts their
features, whose deploy.yaml has a ``segments`` section: a video file (or a folder of them) -> timed action segments.

Validation: :func:`oars_deploy.predictors.video_segments.config.validate_segments`. Run:
:func:`oars_deploy.predictors.video_segments.cli.run_segments` (snippet features and class scores from the
recognizer graph, the localiser graph, then BMN's proposals, Soft-NMS and class pairing or C-TCN's anchor decoding,
per-class NMS and Soft-NMS, from :mod:`.segments`: ``segments.localizer`` says which),
one :class:`~oars_deploy.predictors.video_segments.record.VideoSegmentsRecord` and one timeline picture per video.
``--batch-size``: snippets per recognizer run.
"""

from __future__ import annotations

import argparse

from oars_deploy.failures import Failures
from oars_deploy.plugins import PredictorPlugin, PredictorRun, register_predictor
from oars_deploy.records import ResultRecord


@register_predictor("video_segments")
class VideoSegments(PredictorPlugin):
    """Timed action segments per video file (see the module docstring)."""

    section = "segments"
    describes = "temporal action localisers"

    def validate(self, deploy: dict, path: str) -> None:
        """The ``segments`` section, the recognizer's clip input and steps, the localiser's input and outputs."""
        from oars_deploy.predictors.video_segments.config import validate_segments

        validate_segments(deploy, path)

    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """:func:`oars_deploy.predictors.video_segments.cli.run_segments` with its failures and records."""
        from oars_deploy.predictors.video_segments.cli import run_segments

        failures = Failures(what="videos", verb="could not be localised")
        results: list[ResultRecord] = []
        total = run_segments(args, failures, results)
        return PredictorRun(records=results, failures=failures, total=total)
