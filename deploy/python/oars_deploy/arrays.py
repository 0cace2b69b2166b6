"""NumPy or CuPy: the array module the pre/post-processing runs with.

CuPy is optional: it is used only when it imports and sees a GPU, so the same code runs everywhere, and the
two paths give the same numbers (the resize runs in OpenCV on the host either way, see preprocess.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from oars_deploy.errors import DeployError


def cupy_or_none() -> ModuleType | None:
    """The ``cupy`` module when it is installed and a CUDA device is visible, else None."""
    try:
        import cupy
    except Exception:  # not installed, or a broken CUDA install: NumPy then
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


def array_module(name: str | None, device: str = "cpu") -> ModuleType:
    """``'numpy'`` -> numpy, ``'cupy'`` -> cupy (an error if unusable), None -> cupy when ``device`` is cuda and
    CuPy can run, else numpy."""
    if name == "numpy":
        return np
    if name == "cupy":
        cp = cupy_or_none()
        if cp is None:
            raise DeployError("array module 'cupy' asked for, but cupy is not installed or sees no CUDA device "
                              "(pip install cupy-cuda12x on a machine with a GPU), or use 'numpy'")
        return cp
    if name is not None:
        raise DeployError(f"array module must be 'numpy', 'cupy' or None (auto), got {name!r}")
    if device.startswith("cuda"):
        return cupy_or_none() or np
    return np


def module_of(x) -> ModuleType:
    """numpy for NumPy arrays, cupy for CuPy arrays."""
    if isinstance(x, np.ndarray):
        return np
    import cupy

    return cupy


def to_numpy(x: Any) -> np.ndarray:
    """A host NumPy array from a NumPy or CuPy array (anything else through ``np.asarray``)."""
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)
    return get() if callable(get) else np.asarray(x)
