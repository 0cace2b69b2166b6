"""Where outputs may go: the one rule behind every tool that writes files next to what the user gave it.

Outputs never replace inputs: an output folder that is the input folder, holds it, or lies inside it is refused
before anything is read or written (``-i images -o images`` would write ``<stem>.png`` label maps over the
images); for a glob pattern or a ``.txt`` list of files, every folder holding a listed file is protected the same
way. Output names are unique (:func:`output_stems`): two inputs never write the same output file. A single file
(a converter's COCO json, a converted checkpoint) is never replaced unless the user says ``--overwrite``. Training
code (``tools/*.py``, ``oars.inference``, the converters) and the torch-free predictor call the same functions, so
the rule cannot drift between entry points.
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Sequence

import yaml

from oars_deploy.errors import UserError
from oars_deploy.image_files import describe_input, listed_files

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
        inputs: what the outputs are made from (a file, a folder, a glob pattern or a ``.txt``/``.lst`` list of
            files, :func:`oars_deploy.image_files.listed_files`), or ``None`` (noise GANs read nothing).
        flag: how the user named ``path`` (``-o``, ``--out``, ``--show-dir``), for the message.
        input_flag: how the user named ``inputs``, for the message.

    Returns:
        ``path`` unchanged.

    Raises:
        OutputPathError: ``path`` (or a folder above it) is an existing file; or the outputs could replace an
            input: for a folder of inputs, ``path`` is that folder, holds it, or lies inside it; for one input
            file, ``path`` is the folder that holds the file or a folder above it; for a glob pattern or a list,
            ``path`` is, holds or lies inside a folder holding one of the files it names (the message names one).
    """
    probe = osp.abspath(path)
    while not osp.exists(probe) and osp.dirname(probe) != probe:
        probe = osp.dirname(probe)
    if osp.exists(probe) and not osp.isdir(probe):
        where = "is a file" if probe == osp.abspath(path) else f"is inside {probe}, which is a file"
        raise OutputPathError(f"{flag} {path}: {where}; the output must be a folder (the files are written into it)")
    if inputs is None:
        return path
    files = listed_files(inputs, input_flag)
    if files:
        _check_listed(path, inputs, files, flag, input_flag)
    if not osp.exists(inputs):
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


def _check_listed(path: str, inputs: str, files: list[str], flag: str, input_flag: str) -> None:
    """The folder rule for the files a glob pattern or a list names: ``path`` may not be, hold or lie inside a
    folder holding one of them (``-i 'imgs/*.png' -o imgs`` would write label maps over the photos)."""
    out = _real(path)
    seen: set[str] = set()
    for file in files:
        folder = _real(osp.dirname(file) or ".")
        if folder in seen:
            continue
        seen.add(folder)
        if _is_within(out, folder) or _is_within(folder, out):
            relation = ("is" if out == folder else "is inside" if _is_within(out, folder) else "holds")
            raise OutputPathError(
                f"{flag} {path} {relation} the folder of the input file {file} ({describe_input(inputs, input_flag)}"
                "): the outputs could replace or mix with the input files; choose an output folder outside every "
                "folder holding an input")


def output_stems(paths: Sequence[str], names: Sequence[str] = ("{stem}_vis.png",), nested: bool = True,
                 input_flag: str = "-i") -> dict[str, str]:
    """The output name (without suffix, relative to the output folder) of each input file: unique, so two inputs
    never write the same output file. One rule for every mode of ``oars-infer`` (a folder, ``--ray`` over a glob or
    a list) and every plug-in that names files after its inputs.

    The name keeps the file's path below the inputs' common folder: ``twins/a/x.png`` and ``twins/b/x.png`` give
    ``a/x`` and ``b/x`` (the outputs ``a/x_vis.png``, ``b/x_vis.png``: what MMDetection and ultralytics users
    expect of a folder walked recursively); the files of one folder give their own stems. Files of one folder that
    differ only in their suffix (``x.png`` and ``x.jpg``) would still share a name: each of them gets its suffix
    appended (``x_png``, ``x_jpg``), the others keep their plain stem. A name that still collides (``x.png``,
    ``x.jpg`` and ``x_png.bmp``; an input ``x_vis.png`` beside ``x.png`` when the plug-in writes ``{stem}_vis.png``
    and ``{stem}.png``) is refused, naming both inputs.

    Args:
        paths: the input files, as the user spelled them (two spellings of one path, ``a/x.png`` and
            ``./a/x.png``, are one file with one name).
        names: the files a plug-in writes per input, as ``str.format`` templates of ``stem``; every one of them
            must be unique across the inputs.
        nested: False for a plug-in that names its outputs after the file's own stem only (its ``write`` takes
            no stem): then the stems are the file stems, and any two equal ones are refused.
        input_flag: how the user named the inputs, for the message.

    Returns:
        ``{path: stem}`` for every path in ``paths`` (``os.sep`` between folders of a nested stem).

    Raises:
        OutputPathError: two inputs would write the same output file.
    """
    unique = list(dict.fromkeys(paths))
    if not unique:
        return {}
    absolute = {p: osp.abspath(p) for p in unique}
    if nested:
        root = osp.commonpath([osp.dirname(a) for a in absolute.values()])
        base = {p: osp.relpath(osp.splitext(a)[0], root) for p, a in absolute.items()}
    else:
        base = {p: osp.splitext(osp.basename(a))[0] for p, a in absolute.items()}
    files: dict[str, set[str]] = {}  # stem -> the files (absolute paths) that have it; two spellings are one file
    for p, stem in base.items():
        files.setdefault(stem, set()).add(absolute[p])
    stems = {}
    for p, stem in base.items():
        suffix = osp.splitext(p)[1].lstrip(".")
        stems[p] = f"{stem}_{suffix}" if nested and len(files[stem]) > 1 and suffix else stem
    writer: dict[str, str] = {}
    for p, stem in stems.items():
        for template in names:
            name = template.format(stem=stem)
            other = writer.setdefault(name, p)
            if absolute[other] != absolute[p]:
                raise OutputPathError(
                    f"{input_flag}: the inputs {other} and {p} would both be written as {name}; rename one of them, "
                    "or predict them into different output folders")
    return stems


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
