"""``feature_classes``: frame-feature classifiers (``.npz`` / ``.pkl`` files), whose deploy.yaml has a
``features`` section.

Validation: :func:`oars_deploy.predictors.feature_classes.config.validate_features`. Run:
:func:`oars_deploy.predictors.feature_classes.predictor.run_features` (the top-k printed per file and
``predictions.json``),
one :class:`~.records.FeatureClassesRecord` per file. Flag: ``--topk``.
"""

from __future__ import annotations

import argparse

from oars_deploy.failures import Failures
from oars_deploy.plugins import PredictorPlugin, PredictorRun, register_predictor
from oars_deploy.predictors.clip_classes import add_topk
from oars_deploy.records import ResultRecord


@register_predictor("feature_classes")
class FeatureClasses(PredictorPlugin):
    """Top-k classes per feature file (see the module docstring)."""

    section = "features"
    describes = "feature classifiers"

    def validate(self, deploy: dict, path: str) -> None:
        """The ``features`` section and the packed input (:mod:`oars_deploy.predictors.feature_classes.config`)."""
        from oars_deploy.predictors.feature_classes.config import validate_features

        validate_features(deploy, path)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--topk``."""
        add_topk(parser)

    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """:func:`oars_deploy.predictors.feature_classes.predictor.run_features` with its failures and records
        collected."""
        from oars_deploy.predictors.feature_classes.predictor import list_feature_files, run_features

        failures = Failures(what="feature files", verb="could not be classified")
        results: list[ResultRecord] = []
        run_features(args, failures=failures, results=results)
        return PredictorRun(records=results, failures=failures, total=len(list_feature_files(args.input)))

    def served_model(self) -> type:
        """:class:`~.served.FeatureModel`."""
        from oars_deploy.predictors.feature_classes.served import FeatureModel

        return FeatureModel

    def list_inputs(self, spec: str) -> list[str]:
        """The feature files of ``spec`` (:func:`~.predictor.list_feature_files`)."""
        from oars_deploy.predictors.feature_classes.predictor import list_feature_files

        return list_feature_files(spec)
