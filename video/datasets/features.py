"""Frame-level feature files (YouTube-8M style): reading ``.npz`` / ``.pkl`` files and dequantising uint8 features.

YouTube-8M stores per-frame features (``rgb`` 1024-d, ``audio`` 128-d) quantised to uint8 over [-2, 2]; its
readers map them back with ``Dequantize``: ``q * range / 255 + range / 512 + min``. The same formula is used here,
without TensorFlow: the features arrive as ``.npz`` (one array per modality) or ``.pkl`` (a dict of arrays).
"""

from __future__ import annotations

import os
import pickle
import zipfile

import numpy as np

from oars.errors import DataError

FEATURE_SUFFIXES: tuple[str, ...] = ('.npz', '.pkl', '.pickle')


def dequantize(features: np.ndarray, min_quantized_value: float = -2.0,
               max_quantized_value: float = 2.0) -> np.ndarray:
    """uint8 quantised features -> float32, as YouTube-8M's ``Dequantize``.

    Args:
        features: uint8 array of any shape.
        min_quantized_value, max_quantized_value: the range the features were quantised over (YouTube-8M: -2, 2).

    Returns:
        float32 array of the same shape: ``q * (max - min) / 255 + (max - min) / 512 + min``
        (q = 0 -> -1.9921875 and q = 255 -> 2.0078125 for the default range: bin centres, not edges).
    """
    span = float(max_quantized_value) - float(min_quantized_value)
    if span <= 0:
        raise DataError(f'dequantize: max_quantized_value ({max_quantized_value}) must exceed '
                        f'min_quantized_value ({min_quantized_value})')
    scalar = span / 255.0
    bias = span / 512.0 + float(min_quantized_value)
    return (np.asarray(features, dtype=np.float32) * np.float32(scalar) + np.float32(bias)).astype(np.float32)


def read_feature_file(path: str) -> dict[str, np.ndarray]:
    """The arrays of one feature file: ``.npz`` (every array in it) or ``.pkl`` (a dict of arrays).

    Raises:
        DataError: missing file, an unreadable/damaged file, a pickle that is not a dict of arrays.
    """
    if not os.path.isfile(path):
        raise DataError(f'feature file not found: {path}')
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == '.npz':
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        if ext in ('.pkl', '.pickle'):
            with open(path, 'rb') as f:
                data = pickle.load(f)
            if not isinstance(data, dict):
                raise DataError(f'{path}: a feature pickle must hold a dict modality -> array, got '
                                f'{type(data).__name__}')
            return {str(k): np.asarray(v) for k, v in data.items()}
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        raise DataError(f'cannot read feature file {path}: {type(err).__name__}: {err}') from None
    raise DataError(f'{path}: feature files must end with one of {list(FEATURE_SUFFIXES)}')
