"""Video hooks (registered in ``video.registry.HOOKS`` on import): pictures for ``--show-dir`` and the HTML
report for ``--report`` (also registered under the task-neutral name ``EvaluationReportHook``)."""

from video.registry import HOOKS

from .prediction_pictures_hook import PredictionPicturesHook
from .report_hook import VideoReportHook

HOOKS.register_module(name='EvaluationReportHook', module=VideoReportHook)

__all__ = ['PredictionPicturesHook', 'VideoReportHook']
