"""Checkpoint files as the engine uses them: a path or a hub name, and atomic writing.

The safe reading of a file (``weights_only=True``, zip CRCs checked first, ``OARS_UNSAFE_LOAD``) is
:mod:`oars.checkpoint_file`'s, shared with the hub; this module adds hub names (``torchvision://``,
``oars://``: fetched and converted by :mod:`oars.hub.loading`), mmengine's ``CheckpointLoader`` schemes (so
``load_from``, ``resume`` and backbones' ``init.checkpoint`` take the same path) and the atomic file backend:
writing goes through :func:`oars_deploy.atomic.atomic_write` so a kill mid-write never leaves a torn checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmengine.fileio import register_backend
from mmengine.fileio.backends import LocalBackend
from mmengine.runner.checkpoint import CheckpointLoader

# the file primitives, re-exported: this module is where the engine's callers import them from
from oars.checkpoint_file import UNSAFE_ENV as UNSAFE_ENV
from oars.checkpoint_file import CheckpointError as CheckpointError
from oars.checkpoint_file import check_local_checkpoint, load_local_checkpoint
from oars.checkpoint_file import checkpoint_meta as checkpoint_meta
from oars.checkpoint_file import state_dict_from_checkpoint as state_dict_from_checkpoint
from oars.checkpoint_file import verify_checkpoint as verify_checkpoint
from oars.engine.checkpoint_mismatch import checkpoint_mismatch as checkpoint_mismatch
from oars.hub.entries import SCHEMES as HUB_SCHEMES
from oars.hub.loading import hub_file, load_hub_checkpoint
from oars_deploy.atomic import atomic_write


def load_checkpoint_file(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load ``path`` safely (:func:`oars.checkpoint_file.load_local_checkpoint`: ``weights_only``, CRCs checked,
    full unpickling only with ``OARS_UNSAFE_LOAD=1``).

    A hub name (``torchvision://resnet50``, ``oars://NAME``) is fetched into the hub cache and converted by its
    entry's converter (:func:`oars.hub.loading.load_hub_checkpoint`).
    """
    if isinstance(path, str) and path.startswith(HUB_SCHEMES):
        return load_hub_checkpoint(path, map_location)
    return load_local_checkpoint(path, map_location)


def check_checkpoint_file(path: str | Path) -> str:
    """Fail early (without reading the whole file) when ``path`` is missing, truncated or not a torch.save file.
    A hub name is fetched into the hub cache (or its one message raised) and its file checked; the name is returned,
    since loading it goes through its converter (:func:`load_checkpoint_file`)."""
    if isinstance(path, str) and path.startswith(HUB_SCHEMES):
        check_local_checkpoint(hub_file(path)[1])
        return path
    return check_local_checkpoint(path)


@CheckpointLoader.register_scheme(prefixes=HUB_SCHEMES, force=True)
def _load_from_hub(filename: str, map_location: Any) -> Any:
    """mmengine's ``torchvision://`` loader replaced by the hub's (its cache, hash check and offline message)."""
    return load_checkpoint_file(filename, map_location)


@CheckpointLoader.register_scheme(prefixes="", force=True)
def _load_from_local(filename: str, map_location: Any) -> Any:
    """mmengine's loader for local paths, replaced by the safe one (used by load_from / resume)."""
    return load_checkpoint_file(filename, map_location)


class AtomicLocalBackend(LocalBackend):
    """Local file backend whose writes are atomic: temp file in the same folder, then rename."""

    def put(self, obj: bytes, filepath: str | Path) -> None:
        atomic_write(filepath, obj)

    def put_text(self, obj: str, filepath: str | Path, encoding: str = "utf-8") -> None:
        self.put(obj.encode(encoding), filepath)


register_backend("atomic_local", AtomicLocalBackend, force=True)
