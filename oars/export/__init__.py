"""Export trained models to ONNX / TensorRT with a deploy.yaml (see ``tools/export.py``).

Light at import: ``deploy_config`` and the errors load without torch (deploy.yaml is read by
``oars_deploy.deploy_config``, the predictor's runtime); the exporter and the spec classes load on first use.
"""

from __future__ import annotations

from typing import Any

from oars.export.deploy_config import preprocess_steps, write_deploy_yaml
from oars.export.errors import ExportCheckError, ExportError
from oars_deploy.deploy_config import read_deploy_yaml

__all__ = [
    "ExportCheckError", "ExportError", "ExportOptions", "ExportSpec", "export_model", "preprocess_steps",
    "read_deploy_yaml", "write_deploy_yaml",
]

_LAZY = {"export_model": "oars.export.onnx_export", "ExportOptions": "oars.export.spec",
         "ExportSpec": "oars.export.spec"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'oars.export' has no attribute {name!r}")
