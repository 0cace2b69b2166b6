"""Frame-level feature files (YouTube-8M style): reading ``.npz`` / ``.pkl`` files and dequantising uint8 features.

YouTube-8M stores per-frame features (``rgb`` 1024-d, ``audio`` 128-d) quantised to uint8 over [-2, 2]; its
readers map them back with ``Dequantize``: ``q * range / 255 + range / 512 + min``. The same formula is used here,
without TensorFlow: the features arrive as ``.npz`` (one array per modality) or ``.pkl`` (a dict of arrays).

The formulas live in the torch-free :mod:`oars_deploy.predictors.feature_classes.files`, which the deployed feature
predictor runs
too; these wrappers raise :class:`oars.errors.DataError` (so that ``on_bad_sample: skip`` can skip a file). A feature
file on a URL (``s3://``, ``memory://`` ...) is read through ``oars.data.storage`` (one request for its bytes), then
parsed by the same reader from a scratch copy that is removed at once (that reader takes a path); every message
names the URL.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

import numpy as np

from oars.data import storage
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
    """The arrays of one feature file (see :func:`oars_deploy.predictors.feature_classes.files.read_feature_arrays`),
    a local path or a URL.

    Raises:
        DataError: missing file, an unreadable/damaged file, a pickle that is not a dict of arrays (naming the path
            or the URL); a storage failure of a URL (access denied, a timeout ...) as its one line naming the URL.
    """
    if not storage.is_url(path):
        with as_data_error():
            return _io.read_feature_arrays(path)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        raise DataError(f"feature file not found: {path}") from None
    fd, scratch = tempfile.mkstemp(prefix="oars-features-", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            return _io.read_feature_arrays(scratch)
        except FeatureFileError as err:
            raise DataError(str(err).replace(scratch, path)) from None
    finally:
        os.remove(scratch)
