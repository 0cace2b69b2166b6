"""Checks made before an export starts: the output folder does not hold another export (or the user said
``--overwrite``), and the ONNX opset asked for is one the exporter can write.

Both are cheap and fail before the model is built, so a user learns about them in a second, not after a long trace.
Every task's export (the core's and the ones with their own graphs, GANs) calls :func:`check_export_target`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from oars.export.errors import ExportError
from oars.extras import require_extra
from oars_deploy.output_paths import check_export_folder

# The torch 2.14 dynamo exporter writes opset 18 and converts down; below 16 that conversion fails for common ops
# (Identity, Resize), and opset 16 is where ONNX RoiAlign gained the coordinate mode the two-stage graphs need.
MIN_OPSET = 16
DEFAULT_OPSET = 18  # what the exporter writes itself: no conversion that could fail
EXPORT_FEATURE = "tools/export.py"  # what a missing package of the deploy extra is told to be needed by


def max_opset() -> int:
    """The newest opset the installed ``onnx`` package defines (ONNX Runtime 1.32 runs up to it)."""
    onnx = require_extra("onnx", EXPORT_FEATURE)
    return int(onnx.defs.onnx_opset_version())


def check_opset(opset: int) -> int:
    """``opset`` as an int when the exporter can write it; else :class:`ExportError` with the supported range."""
    high = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= high:
        raise ExportError(f"--opset {opset} is not supported: the exporter writes ONNX opsets {MIN_OPSET} to {high} "
                          f"(default {DEFAULT_OPSET})")
    return opset


def exported_at() -> str:
    """Now, UTC, to the second (ISO 8601): deploy.yaml's ``model.exported_at``, which tells exports apart."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def check_export_target(out_dir: str, overwrite: bool, opset: int) -> None:
    """Raise :class:`ExportError` (or the runtime's OutputPathError) before any work when the export cannot go to
    ``out_dir``: it is a file, it already holds an export and ``overwrite`` is false
    (:func:`oars_deploy.output_paths.check_export_folder`, the rule deploy/cpp/opencv_compat.py follows too), or
    ``opset`` is unsupported."""
    check_opset(opset)
    check_export_folder(out_dir, overwrite, error=ExportError)


def require_export_packages(check: bool, precision: str) -> None:
    """Import the packages of the ``deploy`` extra that the export will use, before any work, so that a missing one
    is one line naming the extra (:func:`oars.extras.require_extra`) and not an error after a long trace.

    Args:
        check: whether the ONNX Runtime self-check runs (``--no-check`` skips it and its onnxruntime).
        precision: ``fp32``, ``fp16`` (``--half``) or ``int8`` (``--int8``): the reduced ones are converted and
            compared with ONNX Runtime.

    Raises:
        MissingExtraError: ``"tools/export.py needs onnx, from the 'deploy' extra: pip install -e '.[deploy]'"``;
            onnxscript is what torch's exporter writes the graph with.
    """
    require_extra("onnx", EXPORT_FEATURE)
    require_extra("onnxscript", EXPORT_FEATURE)
    if precision != "fp32":
        require_extra("onnxruntime", f"{EXPORT_FEATURE} --{'half' if precision == 'fp16' else 'int8'}")
    elif check:
        require_extra("onnxruntime", f"{EXPORT_FEATURE}'s check against PyTorch (--no-check skips it)")
