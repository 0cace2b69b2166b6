"""Checks made before an export starts: the output folder does not hold another export (or the user said
``--overwrite``), and the ONNX opset asked for is one the exporter can write.

Both are cheap and fail before the model is built, so a user learns about them in a second, not after a long trace.
Every task's export (the core's and the ones with their own graphs, GANs) calls :func:`check_export_target`.
"""

from __future__ import annotations

import os.path as osp
from datetime import datetime, timezone

import yaml

from oars.export.errors import ExportError
from oars_deploy.output_paths import check_output_folder

# The torch 2.14 dynamo exporter writes opset 18 and converts down; below 16 that conversion fails for common ops
# (Identity, Resize), and opset 16 is where ONNX RoiAlign gained the coordinate mode the two-stage graphs need.
MIN_OPSET = 16
DEFAULT_OPSET = 18  # what the exporter writes itself: no conversion that could fail
EXPORT_FILES = ("deploy.yaml", "model.onnx", "model_fp16.onnx", "model_int8.onnx", "model.engine")


def max_opset() -> int:
    """The newest opset the installed ``onnx`` package defines (ONNX Runtime 1.32 runs up to it)."""
    import onnx

    return int(onnx.defs.onnx_opset_version())


def check_opset(opset: int) -> int:
    """``opset`` as an int when the exporter can write it; else :class:`ExportError` with the supported range."""
    high = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= high:
        raise ExportError(f"--opset {opset} is not supported: the exporter writes ONNX opsets {MIN_OPSET} to {high} "
                          f"(default {DEFAULT_OPSET})")
    return opset


def describe_export(out_dir: str) -> str | None:
    """What export ``out_dir`` holds, in words (model name and ``exported_at`` from its deploy.yaml when readable),
    or None when it holds none of :data:`EXPORT_FILES`."""
    present = [name for name in EXPORT_FILES if osp.isfile(osp.join(out_dir, name))]
    if not present:
        return None
    what = ", ".join(present)
    try:
        with open(osp.join(out_dir, "deploy.yaml"), encoding="utf-8") as f:
            model = (yaml.safe_load(f) or {}).get("model") or {}
        name, when = model.get("name"), model.get("exported_at")
        if name:
            article = "an" if str(name)[:1].lower() in "aeiou" else "a"
            what += f" ({article} {name} export" + (f" of {when}" if when else "") + ")"
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        pass  # a missing or damaged deploy.yaml still counts as an export there: the file list says what is there
    return what


def exported_at() -> str:
    """Now, UTC, to the second (ISO 8601): deploy.yaml's ``model.exported_at``, which tells exports apart."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def check_export_target(out_dir: str, overwrite: bool, opset: int) -> None:
    """Raise :class:`ExportError` (or the runtime's OutputPathError) before any work when the export cannot go to
    ``out_dir``: it is a file, it already holds an export and ``overwrite`` is false, or ``opset`` is unsupported."""
    check_opset(opset)
    check_output_folder(out_dir)
    existing = describe_export(out_dir)
    if existing and not overwrite:
        raise ExportError(f"{out_dir} already holds an export: {existing}; nothing was written (pass --overwrite to "
                          "replace it, or choose another -o folder)")
