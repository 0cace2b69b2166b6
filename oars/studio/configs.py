"""The Train page's config catalogue: the configs shipped with oars (package ``oars_configs``), grouped by task
(their ``default_scope``) and model folder, each with its parameter count and FLOPs once measured; and the checks
the page runs on a config the user picked or edited.

Why two speeds: the task of a config is read from the YAML files alone (``default_scope``, following ``_base_``;
milliseconds), so the page lists every config at once; the size needs the full-size model built and run once
(seconds for a large detector on the CPU), so it is measured only when asked (the page fetches it after it
renders) and kept in the index (``config_sizes``, keyed by file and modification time).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from oars.studio.security import StudioError
from oars.studio.workspace import Workspace

_SIZES_TABLE = ("CREATE TABLE IF NOT EXISTS config_sizes (path TEXT PRIMARY KEY, mtime REAL NOT NULL, "
                "params INTEGER, flops REAL, problem TEXT)")
_size_lock = threading.Lock()  # one full-size model at a time: they are large


@dataclass
class Entry:
    """One shipped config: ``name`` (``task_folder/model/file`` without ``.yaml``), its file, task and model."""

    name: str
    path: str
    task: str
    model: str


def catalogue() -> list[Entry]:
    """Every shipped config (``_base_`` fragments left out), sorted by task, model and name."""
    from oars.api.model_source import shipped_configs

    entries = []
    for name, path in shipped_configs().items():
        parts = name.split("/")
        entries.append(Entry(name=name, path=path, task=_scope(path) or "(no default_scope)",
                             model=parts[-2] if len(parts) > 1 else ""))
    return sorted(entries, key=lambda e: (e.task, e.model, e.name))


def grouped(entries: Sequence[Entry]) -> dict[str, dict[str, list[Entry]]]:
    """``{task: {model folder: [entries]}}`` in catalogue order (how the page lists them)."""
    out: dict[str, dict[str, list[Entry]]] = {}
    for entry in entries:
        out.setdefault(entry.task, {}).setdefault(entry.model, []).append(entry)
    return out


def _scope(path: str) -> str | None:
    return _scope_cached(path, os.stat(path).st_mtime_ns)


@lru_cache(maxsize=1024)
def _scope_cached(path: str, mtime_ns: int, depth: int = 0) -> str | None:
    """A config's ``default_scope`` from its YAML and its ``_base_`` files (the file's own value wins, then the
    later bases over the earlier, as the loader merges them); None when unreadable or unset."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("default_scope"), str):
        return data["default_scope"]
    bases = data.get("_base_") or []
    bases = [bases] if isinstance(bases, str) else bases
    for base in reversed([b for b in bases if isinstance(b, str)]):
        full = os.path.normpath(os.path.join(os.path.dirname(path), base))
        if depth < 16 and os.path.isfile(full):
            found = _scope_cached(full, os.stat(full).st_mtime_ns, depth + 1)
            if found:
                return found
    return None


def resolve_config(ws: Workspace, raw: str) -> Path:
    """The config file a request names: a shipped config's name (as the catalogue lists it, or its file name), or
    a ``.yaml`` path inside the workspace / data roots.

    Raises:
        StudioError: an unknown name (with the closest shipped names), a path outside (``PathRefused``), or a
            file that is not there.
    """
    from oars.api.model_source import shipped_configs
    from oars.config.registry_lookup import closest

    raw = (raw or "").strip()
    if not raw:
        raise StudioError("config: pick a config from the list (none given)")
    shipped = shipped_configs()
    bare = raw[:-5] if raw.endswith(".yaml") else raw
    if bare in shipped:
        return Path(shipped[bare])
    by_file = [n for n in shipped if n.rsplit("/", 1)[-1] == bare]
    if len(by_file) == 1:
        return Path(shipped[by_file[0]])
    if raw.endswith((".yaml", ".yml")) and ("/" in raw or os.sep in raw):
        path = ws.resolve(raw)
        if not path.is_file():
            raise StudioError(f"config {raw}: no such file (resolved to {path})")
        return path
    near = closest(bare, list(shipped)) or closest(bare.rsplit("/", 1)[-1], [n.rsplit("/", 1)[-1] for n in shipped])
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    raise StudioError(f"config {raw}: not a shipped config nor a .yaml file in the workspace.{hint}")


def edited_copy(text: str, original: Path, folder: Path) -> Path:
    """Write YAML ``text`` (the page's editor, a copy of ``original`` the user changed) as ``folder/<name>.yaml``
    with its ``_base_`` paths made absolute (they were relative to ``original``'s folder).

    Raises:
        StudioError: the text is not a YAML mapping (naming the line), or its ``_base_`` is not a path list.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise StudioError(f"{original.name} (edited): not valid YAML{where}: "
                          f"{getattr(err, 'problem', None) or err}") from None
    if not isinstance(data, dict):
        raise StudioError(f"{original.name} (edited): expected a YAML mapping (key: value lines), got "
                          f"{type(data).__name__}")
    bases = data.get("_base_")
    if bases is not None:
        listed = [bases] if isinstance(bases, str) else bases
        if not isinstance(listed, list) or not all(isinstance(b, str) for b in listed):
            raise StudioError(f"{original.name} (edited): _base_ must be a file path or a list of them, got {bases!r}")
        data["_base_"] = [os.path.normpath(os.path.join(original.parent, os.path.expanduser(b))) for b in listed]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / original.name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def check_problems(config: Path, overrides: Sequence[str] = (), shown_as: str | None = None) -> list[str]:
    """Every problem the config checker (the one ``tools/train.py`` runs before training) finds in ``config``
    with ``overrides``: unknown keys, types and arguments with their did-you-mean; [] when it is fine.

    Args:
        config: the YAML file.
        overrides: ``key=value`` strings.
        shown_as: the name messages use for ``config`` (an edited copy is named after its original).
    """
    from oars.config.check import config_problems
    from oars.config.load import load_config
    from oars.errors import OarsError

    try:
        problems = config_problems(load_config(config, list(overrides)))
    except OarsError as err:
        problems = [str(err)]
    if shown_as:
        problems = [p.replace(str(config), shown_as) for p in problems]
    return problems


def checked_with_edit(text: str, original: Path, overrides: Sequence[str] = ()) -> list[str]:
    """:func:`check_problems` of the editor's text (written to a temporary copy beside nothing of the user's)."""
    with tempfile.TemporaryDirectory(prefix="oars-studio-check-") as tmp:
        try:
            path = edited_copy(text, original, Path(tmp))
        except StudioError as err:
            return [str(err)]
        return check_problems(path, overrides, shown_as=f"{original.name} (edited)")


def config_values(config: Path) -> dict:
    """The values the override form starts from: epochs or iterations, batch size, lr, load_from, and whether the
    loop counts epochs; missing ones are None (the loaded config, bases merged)."""
    from oars.config.load import load_config
    from oars.errors import OarsError

    try:
        cfg = load_config(config)
    except OarsError as err:
        raise StudioError(str(err)) from None
    train_cfg = cfg.get("train_cfg") or {}
    optimizer = (cfg.get("optim_wrapper") or {}).get("optimizer") or {}
    loader = cfg.get("train_dataloader") or {}
    by_epoch = "max_epochs" in train_cfg
    return {"by_epoch": by_epoch, "length": train_cfg.get("max_epochs" if by_epoch else "max_iters"),
            "batch_size": loader.get("batch_size"), "lr": optimizer.get("lr"), "load_from": cfg.get("load_from")}


def size(ws: Workspace, config: Path) -> dict:
    """``{"params", "flops", "problem"}`` of ``config``'s full-size model, measured once per file version and kept
    in the index (``oars.analysis``: the model built and its export graph run once, as ``get_flops`` does)."""
    ws.ensure_table(_SIZES_TABLE)
    mtime = config.stat().st_mtime
    with ws.connect() as db:
        row = db.execute("SELECT params, flops, problem FROM config_sizes WHERE path = ? AND mtime = ?",
                         (str(config), mtime)).fetchone()
    if row:
        return {"params": row[0], "flops": row[1], "problem": row[2]}
    with _size_lock:
        params, flops, problem = _measure(config)
    with ws.connect() as db:
        db.execute("INSERT OR REPLACE INTO config_sizes (path, mtime, params, flops, problem) VALUES (?, ?, ?, ?, ?)",
                   (str(config), mtime, params, flops, problem))
    return {"params": params, "flops": flops, "problem": problem}


def _measure(config: Path) -> tuple[int | None, float | None, str | None]:
    from oars.analysis.config_model import build_count_target
    from oars.analysis.flops import count_flops
    from oars.config.check import load_checked_config
    from oars.errors import OarsError

    try:
        cfg = load_checked_config(str(config))
        target = build_count_target(cfg)
        report = count_flops(target.module, target.inputs, target.input_names)
    except (OarsError, RuntimeError, ValueError, TypeError, ImportError) as err:
        return None, None, str(err).splitlines()[0][:300]
    return report.model_params, float(report.flops), None


def cached_sizes(ws: Workspace) -> dict[str, dict]:
    """``{config file: size}`` of every size already measured (the catalogue shows these without waiting)."""
    ws.ensure_table(_SIZES_TABLE)
    with ws.connect() as db:
        return {row[0]: {"params": row[1], "flops": row[2], "problem": row[3]}
                for row in db.execute("SELECT path, params, flops, problem FROM config_sizes")}
