"""GAN hooks (registered in ``gan.registry.HOOKS`` on import): progress grids while training (``SampleGridHook``),
pictures for ``tools/eval.py --show-dir`` (``PredictionPicturesHook``) and the HTML report for ``--report``
(``EvaluationReportHook``)."""

from .prediction_pictures_hook import PredictionPicturesHook
from .report_hook import EvaluationReportHook
from .sample_grid_hook import SampleGridHook

__all__ = ["EvaluationReportHook", "PredictionPicturesHook", "SampleGridHook"]
