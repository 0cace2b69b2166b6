"""Video classifiers behind ``oars-serve`` and ``oars-infer --ray`` (the clip plug-in's
:meth:`~oars_deploy.plugins.PredictorPlugin.served_model`): a video file or request body in, the
:class:`~.records.ClipClassesRecord` ``oars-infer`` writes out. Imported by the server only."""

from __future__ import annotations

from oars_deploy.clips.inputs import VIDEO_SUFFIXES
from oars_deploy.predictors.clip_classes.predictor import VideoPredictor
from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
from oars_deploy.serve.models import ScoreModel
from oars_deploy.serve.requests import RAW_VIDEO_TYPES


class ClipModel(ScoreModel):
    """Video classifiers (:class:`~.predictor.VideoPredictor`)."""

    raw_types = RAW_VIDEO_TYPES
    suffixes = VIDEO_SUFFIXES
    default_suffix = ".mp4"
    record_class = ClipClassesRecord
    predictor_class = VideoPredictor
