"""Frame-level feature files (YouTube-8M style): reading ``.npz`` / ``.pkl`` files and dequantising uint8 features.

YouTube-8M stores per-frame features (``rgb`` 1024-d, ``audio`` 128-d) quantised to uint8 over [-2, 2]; its
readers map them back with ``Dequantize``: ``q * range / 255 + range / 512 + min``. The same formula is used here,
without TensorFlow: the features arrive as ``.npz`` (one array per modality) or ``.pkl`` (a dict of arrays).

The formulas live in the torch-free :mod:`oars_deploy.predictors.feature_classes.files`, which the deployed feature
predictor runs
too; these wrappers raise :class:`oars.errors.DataError` (so that ``on_bad_sample: skip`` can skip a file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from oars.errors import DataError
from oars_deploy.predictors.feature_classes import files as _io
from oars_deploy.predictors.feature_classes.files import FEATURE_SUFFIXES, FeatureFileError

__all__ = ["FEATURE_SUFFIXES", "as_data_error", "dequantize", "read_feature_file"]


@contextlib.contextmanager
def as_data_error() -> Iterator[None]:
    """Re-raise the feature module's :class:`FeatureFileError` as :class:`DataError` (same message)."""
    try:
        yield
    except FeatureFileError as err:
        raise DataError(str(err)) from None


def dequantize(features: np.ndarray, min_quantized_value: float = -2.0,
               max_quantized_value: float = 2.0) -> np.ndarray:
    """uint8 quantised features -> float32 (see :func:`oars_deploy.predictors.feature_classes.files.dequantize`)."""
    with as_data_error():
        return _io.dequantize(features, min_quantized_value, max_quantized_value)


def read_feature_file(path: str) -> dict[str, np.ndarray]:
    """The arrays of one feature file (see :func:`oars_deploy.predictors.feature_classes.files.read_feature_arrays`).

    Raises:
        DataError: missing file, an unreadable/damaged file, a pickle that is not a dict of arrays.
    """
    with as_data_error():
        return _io.read_feature_arrays(path)
