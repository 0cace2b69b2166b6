"""Experiment tracking: ``tools/train.py --logger mlflow|wandb|tensorboard|clearml`` or a config's ``loggers:``.

Each name adds one of mmengine's visualisation backends to ``visualizer.vis_backends`` (oars' subclasses where
the run's files must be uploaded at the end: ``oars.visualization.tracking_backends``). What a name adds, the
package it needs and how to install it live in ``configs/_base_/loggers.yaml``, not here. :func:`resolve_loggers`
runs inside the engine's one resolve step (``oars.engine.resolve``), so ``config.yaml`` and ``--print-config``
show every added backend with its source (the flag or the config key).
"""

from __future__ import annotations

import copy
import os.path as osp
from collections.abc import Iterable, Sequence
from typing import Any

import yaml
from mmengine.config import Config

import oars.visualization.tracking_backends as _backends  # noqa: F401 - registers the Oars*VisBackend classes
from oars.config import cfg_provenance, source_of
from oars.config.resolved import record
from oars.errors import OarsError
from oars.extras import is_installed

LOGGERS_FILE = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), "configs", "_base_",
                        "loggers.yaml")
_ENTRY_KEYS = ("module", "install", "backend")


def logger_names(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """The tracker names of repeated ``--logger`` flags and/or comma lists, in order, each once.

    Args:
        values: e.g. ``["mlflow,wandb", "tensorboard"]``, a single string, or None.

    Returns:
        ``("mlflow", "wandb", "tensorboard")``: lower-cased, stripped, duplicates dropped.
    """
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        for name in str(value).split(","):
            name = name.strip().lower()
            if name and name not in out:
                out.append(name)
    return tuple(out)


def load_logger_table(path: str = LOGGERS_FILE) -> dict[str, dict[str, Any]]:
    """The trackers ``--logger`` knows: name -> ``{module, install, backend}`` (``configs/_base_/loggers.yaml``).

    Args:
        path: the YAML file.

    Returns:
        A fresh dict per call (callers may change it).

    Raises:
        OarsError: the file is missing or an entry lacks ``module``/``install``/``backend`` (with a ``type``).
    """
    if not osp.isfile(path):
        raise OarsError(f"{path}: the trackers' defaults file is missing (it ships with oars in configs/_base_/)")
    with open(path, encoding="utf-8") as f:
        table = (yaml.safe_load(f) or {}).get("loggers")
    if not isinstance(table, dict) or not table:
        raise OarsError(f"{path}: expected a mapping `loggers: {{NAME: {{module, install, backend}}}}`")
    for name, entry in table.items():
        missing = [k for k in _ENTRY_KEYS if not isinstance(entry, dict) or k not in entry]
        if missing or not isinstance(entry["backend"], dict) or "type" not in entry["backend"]:
            raise OarsError(f"{path}: loggers.{name}: expected keys {', '.join(_ENTRY_KEYS)} and backend.type; "
                            f"missing {missing or ['backend.type']}")
    return copy.deepcopy(table)


def missing_package_message(name: str, entry: dict[str, Any], source: str) -> str | None:
    """Why tracker ``name`` cannot run here (its package is not importable), or None when it can.

    Args:
        name: the tracker (``mlflow``).
        entry: its row of :func:`load_logger_table`.
        source: what asked for it (``--logger flag``), for the message.

    Returns:
        One line naming the package and the pip command, or None.
    """
    module = entry["module"]
    if is_installed(module):  # False for a broken install, or sys.modules[module] = None
        return None
    return f"{source}: {name} needs the Python package {module!r}, which is not installed: {entry['install']}"


def resolve_loggers(cfg: Config, flags: Sequence[str] = (), config_name: str = "run",
                    check_packages: bool = True) -> None:
    """Add the backends of the config's ``loggers`` and of ``--logger`` to ``visualizer.vis_backends``, recorded.

    A backend of the same ``type`` already in the list is kept as the config wrote it (so re-running a run's
    ``config.yaml`` adds nothing twice). ``cfg.loggers`` becomes the union, so ``config.yaml`` repeats the choice.

    Args:
        cfg: the config being resolved; ``cfg.work_dir`` must be set (paths of the file stores).
        flags: tracker names from ``--logger`` (see :func:`logger_names`).
        config_name: the config file's name, the experiment/project name (``{config_name}``).
        check_packages: refuse a tracker whose package is missing (off for ``--print-config``).

    Raises:
        OarsError: a ``loggers`` value that is not a list of names, an unknown name, or a missing package.
    """
    where = source_of(cfg_provenance(cfg), "loggers") or cfg.filename or "<config>"
    written = cfg.get("loggers")
    if written is not None and not (isinstance(written, (list, tuple, str))
                                    and all(isinstance(n, str) for n in ([written] if isinstance(written, str)
                                                                         else written))):
        raise OarsError(f"{where}: loggers: expected a list of tracker names (e.g. [mlflow, wandb]), got {written!r}")
    asked = [(n, f"config ({where}): loggers") for n in logger_names(written)]
    asked += [(n, "--logger flag") for n in logger_names(flags) if n not in dict(asked)]
    if not asked:
        return
    table = load_logger_table()
    for name, source in asked:
        if name not in table:
            raise OarsError(f"{source}: unknown tracker {name!r}; expected one of {', '.join(table)} "
                            f"(defined in {LOGGERS_FILE})")
        problem = missing_package_message(name, table[name], source) if check_packages else None
        if problem:
            raise OarsError(problem)
    names = [n for n, _ in asked]
    if list(logger_names(written)) != names:
        cfg.loggers = names
        record(cfg, "loggers", names, "--logger flag")
    _add_backends(cfg, [(table[n]["backend"], n, s) for n, s in asked], config_name)


def _fill(value: Any, values: dict[str, str]) -> Any:
    """``{work_dir}``/``{config_name}`` placeholders of the defaults file replaced in every string."""
    if isinstance(value, str):
        for key, text in values.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _add_backends(cfg: Config, wanted: list[tuple[dict, str, str]], config_name: str) -> None:
    visualizer = cfg.get("visualizer")
    if visualizer is None:  # mmengine's own default, written out so the list can grow
        visualizer = {"type": "Visualizer", "vis_backends": [{"type": "LocalVisBackend"}]}
        cfg.visualizer = visualizer
        record(cfg, "visualizer", copy.deepcopy(visualizer), "engine: mmengine's default Visualizer, to add trackers")
        visualizer = cfg.visualizer  # the Config holds a copy
    backends = list(visualizer.get("vis_backends") or [])
    present = {b.get("type"): i for i, b in reversed(list(enumerate(backends))) if isinstance(b, dict)}
    values = {"work_dir": str(cfg.work_dir), "config_name": config_name}
    written_in = source_of(cfg_provenance(cfg), "visualizer") or cfg.filename or "<config>"
    for default, name, source in wanted:
        if default["type"] in present:
            i = present[default["type"]]
            record(cfg, f"visualizer.vis_backends[{i}]", backends[i],
                   f"config ({written_in}); {source} asks for {name} too", replace=False)
            continue
        backends.append(_fill(copy.deepcopy(default), values))
        record(cfg, f"visualizer.vis_backends[{len(backends) - 1}]", backends[-1],
               f"{source}: {name} tracker (defaults: configs/_base_/loggers.yaml)")
    visualizer["vis_backends"] = backends
