"""``tools/compress.py`` in-process: a compression method looked up by name in :data:`METHODS`, run on a trained
config + checkpoint, and its variant added to the work dir's table beside the original model's row.

Why a registry: every method is one entry (its runner and the optional packages it needs), found the same way;
the tool has no table of module names and no branch for one method. A runner takes ``(cfg, checkpoint, work_dir,
options, overrides)`` and returns its record, with ``row`` (the table's row of the variant, or None when the table
already holds a current one).
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mmengine.config import Config

from oars.compress.table import add_row, format_rows, has_row, read_rows
from oars.errors import OarsError
from oars.extras import require_extra

from .auto_prune import run_auto_prune
from .distill import run_distill
from .prune import run_prune
from .ptq import run_ptq
from .qat import run_qat
from .sensitivity import run_sensitivity
from .variants import measure_variant

Runner = Callable[[Config, str, str, dict, Sequence[str]], dict]


@dataclass(frozen=True)
class CompressMethod:
    """One compression method: ``run`` (see the module docstring) and the optional packages it imports
    (pyproject.toml's extras; :func:`oars.extras.require_extra` names the one that installs each)."""

    name: str
    run: Runner
    packages: tuple[str, ...] = ()


METHODS: dict[str, CompressMethod] = {}


def register_method(method: CompressMethod) -> CompressMethod:
    """Add ``method`` under its name; a second method of the same name is an error, not an overwrite."""
    if method.name in METHODS:
        raise OarsError(f"compression method {method.name!r} is registered already")
    METHODS[method.name] = method
    return method


register_method(CompressMethod("prune", run_prune, ("torch_pruning",)))
register_method(CompressMethod("auto-prune", run_auto_prune, ("torch_pruning",)))
register_method(CompressMethod("sensitivity", run_sensitivity, ("torch_pruning",)))
register_method(CompressMethod("ptq", run_ptq, ("onnx", "onnxruntime")))
register_method(CompressMethod("qat", lambda cfg, ckpt, work, opts, _overrides: run_qat(cfg, ckpt, work, opts),
                               ("torchao",)))
register_method(CompressMethod("distill", lambda cfg, ckpt, work, opts, _overrides: run_distill(cfg, ckpt, work,
                                                                                                  opts)))


def compress(cfg: Config, checkpoint: str, work_dir: str, options: dict[str, Any],
             overrides: Sequence[str] = ()) -> dict:
    """Run ``options['method']`` and record its variant (:func:`record`); returns the method's record.

    Raises:
        OarsError: an unknown method (naming the known ones); a missing optional package (one line naming the
            extra), before anything slow.
    """
    name = options.get("method")
    method = METHODS.get(name) if isinstance(name, str) else None
    if method is None:
        raise OarsError(f"--method must be one of {list(METHODS)} (or compress.method in the config), got {name!r}")
    for package in method.packages:  # before anything slow: one line naming the extra, not a traceback
        require_extra(package, f"tools/compress.py --method {name}")
    result = method.run(cfg, checkpoint, work_dir, options, list(overrides))
    record(work_dir, result, cfg.filename, checkpoint, overrides, options)
    return result


def record(work_dir: str, result: object, config: str, weights: str, overrides: Sequence[str],
           options: dict) -> None:
    """A method's returned row (``result['row']``) goes into the table, replacing the row of an earlier run of the
    same variant, and the original model's row is measured once for every method (the row each variant is
    compared with); the table is printed."""
    if not has_row(work_dir, "original"):
        add_row(work_dir, measure_variant(config, weights, osp.join(work_dir, "original"), "original", "-",
                                          list(overrides), options))
    row = result.get("row") if isinstance(result, dict) else None
    if isinstance(row, dict) and row.get("variant"):  # a re-run replaces its row (measured again, e.g. resumed)
        add_row(work_dir, row)
    rows = read_rows(work_dir)
    if rows:
        print(format_rows(rows))
