"""Fixtures shared by the deploy tests."""

from __future__ import annotations

import pytest
from cpp_cases import build_oars_infer_ort


@pytest.fixture(scope="session")
def oars_infer_ort() -> str:
    """oars_infer with its ONNX Runtime backend, built once per session (skipped without OARS_ONNXRUNTIME_ROOT)."""
    return build_oars_infer_ort()
