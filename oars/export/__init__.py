"""The export primitives: ONNX / TensorRT graphs with a deploy.yaml (the pipeline that runs them, ``tools/export.py``
in-process, is :func:`oars.pipelines.export.export_model`).

Light at import: ``deploy_config`` and the errors load without torch (deploy.yaml is read by
``oars_deploy.deploy_config``, the predictor's runtime); the spec classes load on first use.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from oars.export.deploy_config import preprocess_steps, write_deploy_yaml
from oars.export.errors import ExportCheckError, ExportError
from oars_deploy.deploy_config import read_deploy_yaml

__all__ = [
    "ExportCheckError", "ExportError", "ExportOptions", "ExportSpec", "preprocess_steps", "read_deploy_yaml",
    "write_deploy_yaml",
]

_LAZY = {"ExportOptions": "oars.export.spec", "ExportSpec": "oars.export.spec"}
# old names kept working for code outside oars (nothing inside the package imports them: that would reach up)
_MOVED = {"export_model": "oars.pipelines.export"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(f"oars.export.{name} moved to {_MOVED[name]}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'oars.export' has no attribute {name!r}")
