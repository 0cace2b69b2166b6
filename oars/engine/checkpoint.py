"""Checkpoint files: safe loading (``weights_only=True``) and atomic writing.

mmengine's local loader silently falls back to full unpickling when a file holds
objects outside the allow-list; that runs arbitrary code from the file. We refuse
instead and say how to opt in deliberately. Writing goes through a temporary file
and ``os.replace`` so a kill mid-write never leaves a torn checkpoint.
"""

from __future__ import annotations

import os
import os.path as osp
import pickle
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch
from mmengine.fileio import register_backend
from mmengine.fileio.backends import LocalBackend
from mmengine.runner.checkpoint import CheckpointLoader, get_torch_safe_globals

from oars.errors import OarsError

UNSAFE_ENV = "OARS_UNSAFE_LOAD"


class CheckpointError(OarsError):
    """A checkpoint that cannot be used, with the reason and the file."""


def _unsafe_allowed() -> bool:
    return os.environ.get(UNSAFE_ENV, "").lower() in {"1", "true", "yes"}


def load_checkpoint_file(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load ``path`` with ``torch.load(weights_only=True)`` (plus mmengine's safe globals).

    A file that needs arbitrary unpickling is refused unless ``OARS_UNSAFE_LOAD=1``
    is set, because unpickling can execute code stored in the file.
    """
    path = check_checkpoint_file(path)
    try:
        with torch.serialization.safe_globals(get_torch_safe_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "Unsupported global" not in str(err) and "weights_only" not in str(err):
            raise CheckpointError(f"{path} is not a readable PyTorch checkpoint: {err}") from None
        if _unsafe_allowed():
            return torch.load(path, map_location=map_location, weights_only=False)
        raise CheckpointError(
            f"refusing to load {path}: it holds Python objects that only full unpickling can "
            f"restore, and unpickling can run arbitrary code stored in the file ({err}). "
            f"If you trust the file's origin, set {UNSAFE_ENV}=1 to load it anyway, "
            "or re-save it as a plain state dict."
        ) from None
    except (RuntimeError, EOFError, KeyError, ValueError) as err:
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint (truncated or corrupt?): {err}"
        ) from None


def checkpoint_mismatch(checkpoint: str, config: str | None, detail: object) -> CheckpointError:
    """The error for a checkpoint whose tensors do not fit the model a config builds."""
    return CheckpointError(f"{checkpoint} does not fit the model of {config} (was it trained with other -o "
                           f"overrides? The checkpoint stores its training config in meta.config_yaml): {detail}")


def check_checkpoint_file(path: str | Path) -> str:
    """Fail early (without reading the whole file) when ``path`` is missing or not a torch.save file."""
    path = osp.expanduser(str(path))
    if not osp.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    if not _looks_like_torch_file(path):
        raise CheckpointError(f"{path} is not a PyTorch checkpoint (expected a file written by torch.save, "
                              "e.g. work_dirs/<name>/epoch_N.pth)")
    return path


def _looks_like_torch_file(path: str) -> bool:
    """torch.save writes a zip archive (or, before torch 1.6, a pickle starting with protocol 2+)."""
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        head = f.read(2)
    return len(head) == 2 and head[0] == 0x80 and head[1] >= 2


_CKPT_NAME = re.compile(r"^(epoch|iter)_(\d+)\.pth$")


def latest_checkpoint(work_dir: str) -> str | None:
    """The checkpoint to resume from: the one ``last_checkpoint`` names, or, when that pointer is
    missing, empty or stale (mmengine writes it non-atomically), the newest ``epoch_N``/``iter_N``."""
    if not osp.isdir(work_dir):
        return None
    pointer = osp.join(work_dir, "last_checkpoint")
    if osp.isfile(pointer):
        with open(pointer) as f:
            named = f.read().strip()
        if named and osp.isfile(named):
            return named
    found = [(int(m.group(2)), name) for name in os.listdir(work_dir) if (m := _CKPT_NAME.match(name))]
    return osp.join(work_dir, max(found)[1]) if found else None


def state_dict_from_checkpoint(ckpt: Any, prefix: str | None = None) -> dict[str, torch.Tensor]:
    """The tensor dict inside a checkpoint (``state_dict``/``model`` keys or the file itself),
    optionally restricted to keys under ``prefix`` (with the prefix removed)."""
    state = ckpt
    if isinstance(ckpt, dict):
        for key in ("state_dict", "model", "model_state_dict"):
            if key in ckpt and isinstance(ckpt[key], dict):
                state = ckpt[key]
                break
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint holds a {type(state).__name__}, expected a dict of tensors")
    state = {k[7:] if k.startswith("module.") else k: v for k, v in state.items()}
    if prefix:
        p = prefix if prefix.endswith(".") else prefix + "."
        state = {k[len(p) :]: v for k, v in state.items() if k.startswith(p)}
    return state


@CheckpointLoader.register_scheme(prefixes="", force=True)
def _load_from_local(filename: str, map_location: Any) -> Any:
    """mmengine's loader for local paths, replaced by the safe one (used by load_from / resume)."""
    return load_checkpoint_file(filename, map_location)


class AtomicLocalBackend(LocalBackend):
    """Local file backend whose writes are atomic: temp file in the same folder, then rename."""

    def put(self, obj: bytes, filepath: str | Path) -> None:
        folder = osp.dirname(str(filepath)) or "."
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp_", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(obj)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, filepath)
        except BaseException:
            if osp.exists(tmp):
                os.remove(tmp)
            raise

    def put_text(self, obj: str, filepath: str | Path, encoding: str = "utf-8") -> None:
        self.put(obj.encode(encoding), filepath)


register_backend("atomic_local", AtomicLocalBackend, force=True)
