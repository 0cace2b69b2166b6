"""Checkpoints a user registers under a name (``oars://NAME`` in a config): a JSON file in the oars home folder.

``$OARS_HOME/hub.json`` (default ``~/.cache/oars/hub.json``) maps each name to the checkpoint's absolute path, its
sha256 (checked whenever the name is loaded: a file replaced since registering is refused, not silently used),
its parameter count and, when given, the config it was trained with. Written atomically.
"""

from __future__ import annotations

import datetime
import difflib
import json
import os
import os.path as osp
import re
from collections.abc import Iterable
from typing import Any

from oars_deploy.atomic import atomic_write

from .verify import HubError, check_hash, registered_advice, sha256_file

HOME_ENV = "OARS_HOME"
LOCAL_SCHEME = "oars://"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def home_dir() -> str:
    """``$OARS_HOME``, else ``~/.cache/oars``."""
    return osp.expanduser(os.environ.get(HOME_ENV) or osp.join("~", ".cache", "oars"))


def registry_path() -> str:
    """The registry file: ``<home_dir()>/hub.json``."""
    return osp.join(home_dir(), "hub.json")


def read_registry() -> dict[str, dict[str, Any]]:
    """Name -> record of every registered checkpoint (empty when the file does not exist yet).

    Raises:
        HubError: the file is not a JSON object of objects (the message names the file).
    """
    path = registry_path()
    if not osp.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise HubError(f"{path}: not a readable hub registry ({err}); fix or remove it") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "path" in v for v in data.values()):
        raise HubError(f"{path}: expected a JSON object of name -> {{path, sha256, ...}}")
    return data


def _num_params(path: str) -> int | None:
    """Elements of every tensor in the checkpoint's state dict (memory-mapped, nothing copied); None if unreadable."""
    import torch

    from oars.checkpoint_file import state_dict_from_checkpoint

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = state_dict_from_checkpoint(ckpt)
    except Exception:  # noqa: BLE001 - the count is information only; the file itself was checked already
        return None
    return int(sum(v.numel() for v in state.values() if isinstance(v, torch.Tensor)))


def _config_scope(config: str) -> str | None:
    from oars.config import load_config

    return load_config(config).get("default_scope")


def register(name: str, path: str, config: str | None = None, force: bool = False) -> dict[str, Any]:
    """Record ``path`` under ``name`` (loadable as ``oars://NAME``).

    Args:
        name: letters, digits and ``_.+-``.
        path: the checkpoint (relative paths resolve from the current folder; the absolute path is stored).
        config: the config it was trained with (stored absolute; its ``default_scope`` becomes the entry's task).
        force: replace an existing registration of ``name`` (without it, that is an error).

    Returns:
        the stored record: ``path``, ``sha256``, ``num_params``, ``config``, ``task``, ``registered``.

    Raises:
        HubError: a bad name, a missing or unreadable checkpoint or config, or a name already taken.
    """
    if not _NAME.match(name):
        raise HubError(f"register: name {name!r} must start with a letter or digit and hold only letters, digits "
                       "and _ . + -")
    registry = read_registry()
    if name in registry and not force:
        raise HubError(f"register: {name!r} is already registered ({registry[name]['path']}); pass --force to "
                       f"replace it, or choose another name (registry: {registry_path()})")
    from oars.checkpoint_file import CheckpointError, check_local_checkpoint  # torch: after the cheap checks

    try:
        path = osp.abspath(check_local_checkpoint(path))
    except CheckpointError as err:
        raise HubError(f"register {name}: {err}") from None
    record: dict[str, Any] = {"path": path, "sha256": sha256_file(path), "num_params": _num_params(path),
                              "config": None, "task": None,
                              "registered": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if config is not None:
        if not osp.isfile(config):
            raise HubError(f"register {name}: --config {config}: no such file")
        record["config"] = osp.abspath(config)
        record["task"] = _config_scope(config)
    registry[name] = record
    atomic_write(registry_path(), json.dumps(registry, indent=2, sort_keys=True) + "\n")
    return record


def close_names(name: str, candidates: Iterable[str]) -> str:
    """``"; close names: a, b"`` for the candidates most like ``name`` (empty when none is close)."""
    found = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.6)
    return f"; close names: {', '.join(found)}" if found else ""


def registered_record(name: str) -> dict[str, Any]:
    """The registry's record of ``name`` (``path``, ``sha256``, ``config``, ...), as ``tools/hub.py register`` wrote
    it; nothing is checked on disk here.

    Raises:
        HubError: the name is not registered (close names listed, and how to register one).
    """
    registry = read_registry()
    if name not in registry:
        raise HubError(f"{LOCAL_SCHEME}{name} is not registered in {registry_path()}{close_names(name, registry)}; "
                       "add it with: python tools/hub.py register NAME PATH")
    return registry[name]


def local_file(name: str) -> str:
    """The registered checkpoint of ``name``, its sha256 checked against the one recorded
    (:func:`oars.hub.verify.check_hash`, the check every named load goes through).

    Raises:
        HubError: unknown name (close names listed), a file that is gone, or a record without its sha256.
        WeightsHashError: the file changed since registering.
    """
    record = registered_record(name)
    path = record["path"]
    if not osp.isfile(path):
        raise HubError(f"{LOCAL_SCHEME}{name}: its file {path} no longer exists (registry: {registry_path()})")
    expected = record.get("sha256")
    if not isinstance(expected, str) or len(expected) != 64:  # register always records it: a hand-edited registry
        raise HubError(f"{LOCAL_SCHEME}{name}: its record in {registry_path()} has no sha256 to check {path} "
                       f"against; register it again: python tools/hub.py register {name} {path} --force")
    return check_hash(path, expected, f"{LOCAL_SCHEME}{name}", registered_advice(f"{LOCAL_SCHEME}{name}", path))
