"""Where outputs may go: the one rule behind every tool that writes files next to what the user gave it.

Outputs never replace inputs: an output folder that is the input folder, holds it, or lies inside it is refused
before anything is read or written (``-i images -o images`` would write ``<stem>.png`` label maps over the
images). A single file (a converter's COCO json, a converted checkpoint) is never replaced unless the user says
``--overwrite``. Training code (``tools/*.py``, ``oars.inference``, the converters) and the torch-free predictor
call the same functions, so the rule cannot drift between entry points.
"""

from __future__ import annotations

import os
import os.path as osp

import yaml

from oars_deploy.errors import UserError

EXPORT_FILES = ("deploy.yaml", "model.onnx", "model_fp16.onnx", "model_int8.onnx", "model.engine")


class OutputPathError(UserError):
    """An output path that would replace the user's files, or cannot hold outputs; the message says which and why."""


def _real(path: str) -> str:
    """Absolute path with symlinks resolved (an output folder reached through a link is still the same folder)."""
    return osp.realpath(osp.abspath(path))


def _is_within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both already real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_output_folder(path: str, inputs: str | None = None, flag: str = "-o", input_flag: str = "-i") -> str:
    """Raise :class:`OutputPathError` when ``path`` cannot be the output folder; return ``path``.

    Args:
        path: the output folder (need not exist; nothing is created, so a tool can check before its slow work).
        inputs: what the outputs are made from (a file or a folder), or ``None`` (noise GANs read nothing).
        flag: how the user named ``path`` (``-o``, ``--out``, ``--show-dir``), for the message.
        input_flag: how the user named ``inputs``, for the message.

    Returns:
        ``path`` unchanged.

    Raises:
        OutputPathError: ``path`` (or a folder above it) is an existing file; or the outputs could replace an
            input: for a folder of inputs, ``path`` is that folder, holds it, or lies inside it; for one input
            file, ``path`` is the folder that holds the file or a folder above it.
    """
    probe = osp.abspath(path)
    while not osp.exists(probe) and osp.dirname(probe) != probe:
        probe = osp.dirname(probe)
    if osp.exists(probe) and not osp.isdir(probe):
        where = "is a file" if probe == osp.abspath(path) else f"is inside {probe}, which is a file"
        raise OutputPathError(f"{flag} {path}: {where}; the output must be a folder (the files are written into it)")
    if inputs is None or not osp.exists(inputs):
        return path
    out = _real(path)
    source = _real(inputs)
    if osp.isdir(source):
        if _is_within(out, source) or _is_within(source, out):
            relation = ("is" if out == source else "is inside" if _is_within(out, source) else "holds")
            raise OutputPathError(
                f"{flag} {path} {relation} the input folder {input_flag} {inputs}: the outputs could replace or mix "
                "with the input files; choose an output folder outside the input")
    elif _is_within(osp.dirname(source), out):
        raise OutputPathError(
            f"{flag} {path} holds the input file {input_flag} {inputs}: an output could replace it; choose an output "
            "folder that does not hold the input")
    return path


def check_new_file(path: str, overwrite: bool, flag: str = "--out", inputs: tuple[str, ...] = ()) -> str:
    """Raise :class:`OutputPathError` when writing the file ``path`` would replace something; return ``path``.

    Args:
        path: the output file.
        overwrite: the user asked to replace an existing output file (``--overwrite``).
        flag: how the user named ``path``, for the message.
        inputs: the files the output is made from; it may never be one of them, ``overwrite`` or not.

    Returns:
        ``path`` unchanged.

    Raises:
        OutputPathError: ``path`` is a folder, is one of ``inputs``, or exists and ``overwrite`` is false.
    """
    if osp.isdir(path):
        raise OutputPathError(f"{flag} {path} is a folder; expected the path of the file to write")
    out = _real(path)
    for source in inputs:
        if source and _real(source) == out:
            raise OutputPathError(f"{flag} {path} is an input of this conversion ({source}); choose another output "
                                  "path")
    if osp.exists(path) and not overwrite:
        raise OutputPathError(f"{flag} {path} exists already; nothing was written (pass --overwrite to replace it, "
                              "or choose another path)")
    return path


def describe_export(out_dir: str) -> str | None:
    """What export ``out_dir`` holds, in words (its files, and the model name and ``exported_at`` time from its
    deploy.yaml when readable), or None when it holds none of :data:`EXPORT_FILES`."""
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


def check_export_folder(out_dir: str, overwrite: bool, flag: str = "-o",
                        error: type[Exception] = OutputPathError) -> str:
    """Raise ``error`` when an export may not be written into ``out_dir``: it is a file (or inside one), or it holds
    another export and ``overwrite`` is false (exports never replace exports unasked); returns ``out_dir``.

    Args:
        out_dir: the export folder (need not exist).
        overwrite: the user passed ``--overwrite``.
        flag: how the user named ``out_dir``, for the message.
        error: the exception class (the exporter raises its ExportError).
    """
    check_output_folder(out_dir, flag=flag)
    existing = describe_export(out_dir)
    if existing and not overwrite:
        raise error(f"{out_dir} already holds an export: {existing}; nothing was written (pass --overwrite to "
                    f"replace it, or choose another {flag} folder)")
    return out_dir
