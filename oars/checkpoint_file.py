"""Reading a checkpoint file on this machine safely: ``weights_only`` unpickling, the zip CRCs checked first.

Why a module of its own, below ``oars.engine`` and ``oars.hub``: both read local checkpoint files (the engine the
user's ``-w``, the hub a fetched or registered file), and the engine also loads hub names through the hub. With the
file reader here, ``oars.engine.checkpoint`` imports the hub and the hub imports only this module, not the engine.

mmengine's local loader silently falls back to full unpickling when a file holds objects outside the allow-list;
that runs arbitrary code from the file. We refuse instead and say how to opt in deliberately. torch.load does not
check the zip CRCs, so a file with flipped bytes loads with wrong weights; we verify them first.
"""

from __future__ import annotations

import os
import os.path as osp
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from mmengine.runner.checkpoint import get_torch_safe_globals

from oars.errors import OarsError

UNSAFE_ENV = "OARS_UNSAFE_LOAD"
_ZIP_MAGIC = b"PK\x03\x04"


class CheckpointError(OarsError):
    """A checkpoint that cannot be used, with the reason and the file."""


def _unsafe_allowed() -> bool:
    return os.environ.get(UNSAFE_ENV, "").lower() in {"1", "true", "yes"}


def check_local_checkpoint(path: str | Path) -> str:
    """Fail early (without reading the whole file) when ``path`` is missing, truncated or not a torch.save file;
    returns the path (``~`` expanded)."""
    path = osp.expanduser(str(path))
    if not osp.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    if zipfile.is_zipfile(path):
        return path
    with open(path, "rb") as f:
        head = f.read(4)
    if head == _ZIP_MAGIC:
        raise CheckpointError(f"{path} is truncated or corrupt: it starts like a PyTorch checkpoint but its zip "
                              f"directory is missing ({osp.getsize(path)} bytes; was the copy or the save "
                              "interrupted?)")
    if not (len(head) >= 2 and head[0] == 0x80 and head[1] >= 2):  # pre-1.6 torch.save: a plain pickle
        raise CheckpointError(f"{path} is not a PyTorch checkpoint (expected a file written by torch.save, "
                              "e.g. work_dirs/<name>/epoch_N.pth)")
    return path


def verify_checkpoint(path: str | Path) -> str:
    """:func:`check_local_checkpoint` plus the CRC of every member of the zip (reads the whole file once).

    Raises:
        CheckpointError: missing, not a checkpoint, truncated, or a member whose bytes changed since saving.
    """
    path = check_local_checkpoint(path)
    if not zipfile.is_zipfile(path):
        return path  # legacy pickle format: nothing to verify
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise CheckpointError(f"{path} is truncated or corrupt: {err}") from None
    if bad is not None:
        raise CheckpointError(f"{path} is corrupt: the bytes of {bad!r} inside it do not match their checksum "
                              "(the file was damaged after saving, e.g. by a disk or copy error); use another "
                              "checkpoint")
    return path


def load_local_checkpoint(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load the file ``path`` with ``torch.load(weights_only=True)`` (plus mmengine's safe globals), its CRCs
    checked first (one extra read), so a damaged file is called corrupt instead of loading wrong weights.

    A file that needs arbitrary unpickling is refused unless ``OARS_UNSAFE_LOAD=1`` is set, because unpickling can
    execute code stored in the file.
    """
    path = verify_checkpoint(path)
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


def checkpoint_meta(path: str | Path) -> dict | None:
    """The ``meta`` dict of a checkpoint without reading its tensors (memory-mapped); ``None`` when unreadable."""
    try:
        with torch.serialization.safe_globals(get_torch_safe_globals()):
            ckpt = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - any failure means "cannot tell": the caller names the file
        return None
    meta = ckpt.get("meta") if isinstance(ckpt, dict) else None
    return meta if isinstance(meta, dict) else {}


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


def checkpoint_mismatch(checkpoint: str, config: str | None, detail: object) -> CheckpointError:
    """The error for a checkpoint whose tensors do not fit the model a config builds."""
    if "qat_graphs." in str(detail):  # oars.compress.qat_model.QAT_STATE_PREFIX: fake quantisers in the checkpoint
        return CheckpointError(f"{checkpoint} is a quantisation-aware-training checkpoint (fake quantisers under "
                               f"qat_graphs.*, batch norms folded) and {config} builds the float model; use the QAT "
                               "run's config.yaml next to the checkpoint, or its export (model_int8.onnx)")
    return CheckpointError(f"{checkpoint} does not fit the model of {config} (was it trained with other -o "
                           f"overrides? The checkpoint stores its training config in meta.config_yaml): {detail}")
