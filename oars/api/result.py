"""One input's prediction from the Python API: :class:`oars_deploy.result.Result`, the runtime's class, so
``oars.Model.predict`` and the torch-free ``oars_deploy.Predictor.results`` return the same objects."""

from oars_deploy.result import Result

__all__ = ["Result"]
