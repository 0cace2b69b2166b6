"""The ``Result`` view of segmentors: ``r.label_map``, the class id of every pixel (int64 [H, W], original
pixels): the result's ``label`` under the name the Python API documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def result_views(data: Mapping[str, Any], names: Mapping[int, str]) -> dict[str, object]:
    """``{'label_map': int64 [H, W]}``."""
    return {"label_map": np.asarray(data["label"], np.int64)}
