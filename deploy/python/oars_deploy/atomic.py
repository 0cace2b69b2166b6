"""Atomic file writing: the one implementation behind every file oars writes for users to keep.

Checkpoints, ``last_checkpoint``, ``config.yaml``, ``metrics.json``, ``deploy.yaml``, ``report.html`` and
``detections.json`` are written to a temporary file in the destination folder and renamed over the target, so a
kill or a full disk never leaves a torn file where a good one was. Temporary files carry one prefix so that the
next run can remove what a killed run left behind (:func:`remove_stale_temp_files`).
"""

from __future__ import annotations

import errno
import os
import os.path as osp
import shutil
import tempfile
import uuid

from oars_deploy.errors import UserError

TEMP_PREFIX = ".oars-tmp-"
# Prefixes earlier versions used for their temporary files; cleaned up the same way.
LEGACY_TEMP_PREFIXES = (".tmp_", ".deploy-", ".report-", ".config.yaml.", ".model.onnx.tmp", ".model_fp16.onnx.tmp",
                        ".model_int8.onnx.tmp")


class FileWriteError(UserError, OSError):
    """A file could not be written (read-only folder, disk full, ...); names the path and what was needed.

    An ``OSError`` (callers that catch ``OSError`` still do) whose text is the message alone, without OSError's
    ``[Errno N]`` prefix, since the tools print it as the whole explanation.
    """

    def __str__(self) -> str:
        return self.strerror if self.strerror else super().__str__()


def _normal_mode() -> int:
    """``0o666`` minus the process umask: the permissions ``open()`` would give a new file
    (``mkstemp`` makes files private, 0600, which is wrong for results meant to be shared)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, data: bytes | str, *, encoding: str = "utf-8") -> str:
    """Write ``data`` to ``path`` atomically and return the path.

    Args:
        path: destination file; its parent folders are created.
        data: the whole content; ``str`` is encoded with ``encoding``.
        encoding: text encoding for ``str`` data.

    Returns:
        ``path`` as a string.

    Raises:
        FileWriteError: the folder is not writable or the disk is full. The message names the path and, for a
            full disk, how many bytes were needed and how many were free. Nothing is left behind: the old file,
            if any, is unchanged and the temporary file is removed.
    """
    path = os.fspath(path)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    folder = osp.dirname(osp.abspath(path))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{osp.basename(path)}.", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _normal_mode())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise _explain(err, path, len(payload)) from None
    finally:
        if tmp is not None and osp.exists(tmp):
            os.remove(tmp)
    return path


def temp_path(path: str | os.PathLike) -> str:
    """A fresh temporary name beside ``path`` (not created), for writers that need a file name rather than
    bytes (``torch.onnx.export``, ``onnx.save``, a quantiser): write there, then ``os.replace`` it over
    ``path``. It carries :data:`TEMP_PREFIX`, so :func:`remove_stale_temp_files` finds it after a kill."""
    path = os.fspath(path)
    folder = osp.dirname(osp.abspath(path))
    return osp.join(folder, f"{TEMP_PREFIX}{osp.basename(path)}.{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _explain(err: OSError, path: str, size: int) -> FileWriteError:
    """One clear message for the ways writing fails in practice."""
    if isinstance(err, FileWriteError):
        return err
    if err.errno == errno.ENOSPC:
        free = _free_bytes(osp.dirname(osp.abspath(path)))
        free_txt = f", {_human(free)} free" if free is not None else ""
        return FileWriteError(err.errno, f"cannot write {path}: the disk is full (needed {_human(size)}{free_txt}); "
                              "free some space or choose another --work-dir / output folder")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FileWriteError(err.errno, f"cannot write {path}: {err.strerror.lower()} "
                              "(the folder is read-only or belongs to another user); choose another "
                              "--work-dir / output folder")
    return FileWriteError(err.errno, f"cannot write {path}: {err.strerror or err}")


def _free_bytes(folder: str) -> int | None:
    while folder and not osp.isdir(folder):
        folder = osp.dirname(folder)
    try:
        return shutil.disk_usage(folder or ".").free
    except OSError:
        return None


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def remove_stale_temp_files(folder: str | os.PathLike) -> list[str]:
    """Remove temporary files a killed run left in ``folder`` (not recursive); returns the removed paths.

    Call it only where no other process is writing into ``folder`` (the start of a run in its own work dir).
    """
    folder = os.fspath(folder)
    if not osp.isdir(folder):
        return []
    removed = []
    for name in os.listdir(folder):
        if name.startswith((TEMP_PREFIX, *LEGACY_TEMP_PREFIXES)):
            full = osp.join(folder, name)
            if osp.isfile(full):
                os.remove(full)
                removed.append(full)
    return removed
