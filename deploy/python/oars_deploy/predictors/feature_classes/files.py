"""Frame-level feature files (YouTube-8M style): reading ``.npz`` / ``.pkl``, dequantising uint8 features and
choosing the frames a feature model sees (torch-free).

One implementation for training and deployment: ``video.datasets.LoadFeatures`` calls :func:`load_features` (and
``video.datasets.dequantize`` / ``read_feature_file`` are this module's functions with ``oars.errors.DataError``),
and so does the deployed feature predictor (:mod:`oars_deploy.predictors.feature_classes.predictor`) with deploy.yaml's
``features`` section, so that the model input of a deployed model is the test pipeline's.

- Dequantisation (YouTube-8M's ``Dequantize``): uint8 ``q`` -> ``q * range / 255 + range / 512 + min`` over
  ``[min_quantized_value, max_quantized_value]`` (default -2..2); float arrays are used as they are.
- Frame selection: a sequence of at most ``max_frames`` frames is kept whole; a longer one is cut into
  ``max_frames`` equal segments and one frame kept per segment, at its centre (test mode) or at a random place in
  it (training).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Sequence

import numpy as np

from oars_deploy.clips.inputs import FEATURE_SUFFIXES, not_a_feature_file
from oars_deploy.errors import DeployError


class FeatureFileError(DeployError, ValueError):
    """A feature file that cannot be read or does not hold the expected [T, D] arrays (the message names it)."""


def dequantize(features: np.ndarray, min_quantized_value: float = -2.0,
               max_quantized_value: float = 2.0) -> np.ndarray:
    """uint8 quantised features -> float32, as YouTube-8M's ``Dequantize``.

    Args:
        features: uint8 array of any shape.
        min_quantized_value, max_quantized_value: the range the features were quantised over (YouTube-8M: -2, 2).

    Returns:
        float32 array of the same shape: ``q * (max - min) / 255 + (max - min) / 512 + min``
        (q = 0 -> -1.9921875 and q = 255 -> 2.0078125 for the default range: bin centres, not edges).

    Raises:
        FeatureFileError: ``max_quantized_value <= min_quantized_value``.
    """
    span = float(max_quantized_value) - float(min_quantized_value)
    if span <= 0:
        raise FeatureFileError(f"dequantize: max_quantized_value ({max_quantized_value}) must exceed "
                               f"min_quantized_value ({min_quantized_value})")
    scalar = span / 255.0
    bias = span / 512.0 + float(min_quantized_value)
    return (np.asarray(features, dtype=np.float32) * np.float32(scalar) + np.float32(bias)).astype(np.float32)


def uniform_indices(total: int, num: int, test_mode: bool, rng: np.random.Generator | None = None) -> np.ndarray:
    """``num`` sorted indices spread uniformly over ``[0, total)`` (``num < total``): ``total`` is cut into ``num``
    equal segments and one index taken per segment, at its centre (``test_mode``, deterministic) or at a random
    place in it (training, TSN-style).

    Returns:
        np.int64 [num].
    """
    edges = np.arange(num + 1, dtype=np.float64) * (total / num)
    if test_mode:
        pos = (edges[:-1] + edges[1:]) / 2.0
    else:
        rng = rng or np.random.default_rng(np.random.randint(0, 2**31 - 1))
        pos = edges[:-1] + rng.random(num) * (edges[1:] - edges[:-1])
    return np.minimum(np.floor(pos).astype(np.int64), total - 1)


def kept_frame_indices(total: int, max_frames: int, test_mode: bool = True,
                       rng: np.random.Generator | None = None) -> np.ndarray:
    """The frames kept of a ``total``-frame sequence: all of them when ``total <= max_frames``, else
    :func:`uniform_indices` (``max_frames`` of them). Returns np.int64 [min(total, max_frames)]."""
    if total > max_frames:
        return uniform_indices(total, max_frames, test_mode, rng)
    return np.arange(total, dtype=np.int64)


def read_feature_arrays(path: str) -> dict[str, np.ndarray]:
    """The arrays of one feature file: ``.npz`` (every array in it) or ``.pkl`` (a dict of arrays).

    Raises:
        FeatureFileError: missing file, an unreadable/damaged file, a pickle that is not a dict of arrays, a file
            of another kind (a still image, a video: the message says which).
    """
    if not os.path.isfile(path):
        raise FeatureFileError(f"feature file not found: {path}")
    why = not_a_feature_file(path)  # a still image (whatever its suffix) or a video in a feature list: say so
    if why is not None:
        raise FeatureFileError(why)
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        if ext in (".pkl", ".pickle"):
            with open(path, "rb") as f:
                data = pickle.load(f)
            if not isinstance(data, dict):
                raise FeatureFileError(f"{path}: a feature pickle must hold a dict modality -> array, got "
                                       f"{type(data).__name__}")
            return {str(k): np.asarray(v) for k, v in data.items()}
    except FeatureFileError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        raise FeatureFileError(f"cannot read feature file {path}: {type(err).__name__}: {err}") from None
    raise FeatureFileError(f"{path}: feature files must end with one of {list(FEATURE_SUFFIXES)}")


def as_float_features(path: str, name: str, arr: np.ndarray, min_quantized_value: float = -2.0,
                      max_quantized_value: float = 2.0) -> np.ndarray:
    """One modality's [T, D] array as float32: uint8 dequantised (:func:`dequantize`), float as it is.

    Raises:
        FeatureFileError: not 2-D, or neither uint8 nor float.
    """
    if arr.ndim != 2:
        raise FeatureFileError(f"{path}: {name!r} features must be [T, D] (one row per frame), got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return dequantize(arr, min_quantized_value, max_quantized_value)
    if np.issubdtype(arr.dtype, np.floating):
        return np.ascontiguousarray(arr, dtype=np.float32)
    raise FeatureFileError(f"{path}: {name!r} features must be uint8 (quantised) or float, got {arr.dtype}")


def load_features(path: str, arrays: dict[str, np.ndarray], modalities: Sequence[str], max_frames: int,
                  test_mode: bool = True, min_quantized_value: float = -2.0, max_quantized_value: float = 2.0,
                  rng: np.random.Generator | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """The features a model sees of one file's ``arrays`` (what ``LoadFeatures`` does after reading).

    Args:
        path: the file (for messages).
        arrays: its arrays (:func:`read_feature_arrays`).
        modalities: the ones to load, all with the same T.
        max_frames: the most frames kept (:func:`kept_frame_indices`).
        test_mode: deterministic frame selection (segment centres).
        min_quantized_value, max_quantized_value: the dequantisation range of uint8 arrays.

    Returns:
        (modality -> float32 [T', D] with ``T' = min(T, max_frames)``, the kept frames np.int64 [T'], T).

    Raises:
        FeatureFileError: a missing modality, modalities of different T, no frames, bad shapes or dtypes.
    """
    missing = [m for m in modalities if m not in arrays]
    if missing:
        raise FeatureFileError(f"{path}: no {missing} features (the file has {sorted(arrays)}); set LoadFeatures "
                               "modalities to the ones present")
    feats = {m: as_float_features(path, m, arrays[m], min_quantized_value, max_quantized_value) for m in modalities}
    lengths = {m: f.shape[0] for m, f in feats.items()}
    if len(set(lengths.values())) != 1:
        raise FeatureFileError(f"{path}: the modalities have different numbers of frames {lengths}")
    total = next(iter(lengths.values()))
    if total == 0:
        raise FeatureFileError(f"{path}: the feature arrays have no frames")
    inds = kept_frame_indices(total, max_frames, test_mode, rng)
    return {m: (f if inds.size == total else f[inds]) for m, f in feats.items()}, inds, int(total)
