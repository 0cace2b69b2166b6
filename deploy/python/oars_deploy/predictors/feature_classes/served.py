"""Frame-feature classifiers behind ``oars-serve`` and ``oars-infer --ray`` (the feature plug-in's
:meth:`~oars_deploy.plugins.PredictorPlugin.served_model`): a feature file or request body in, the
:class:`~.records.FeatureClassesRecord` ``oars-infer`` writes out. Imported by the server only."""

from __future__ import annotations

from oars_deploy.predictors.feature_classes.predictor import FeaturePredictor
from oars_deploy.predictors.feature_classes.records import FeatureClassesRecord
from oars_deploy.serve.models import ScoreModel


class FeatureModel(ScoreModel):
    """Frame-feature classifiers; a request body must be an ``.npz`` (read without pickle: a pickle from the
    network could run code, so ``.pkl`` files are for ``oars-infer`` on trusted files only)."""

    raw_types = ("application/octet-stream", "application/x-npz", "application/zip")
    suffixes = (".npz",)
    default_suffix = ".npz"
    record_class = FeatureClassesRecord
    predictor_class = FeaturePredictor
