"""Check that an output folder can be written before a run starts writing into it.

mmengine creates the work dir and its log file while building the Runner; on a read-only folder or a full
disk that is a raw ``PermissionError``/``OSError`` traceback from deep inside it. Creating the folder and a
probe file first turns it into one message naming the folder.
"""

from __future__ import annotations

import os
import os.path as osp

from oars_deploy.atomic import FileWriteError, atomic_write

PROBE_NAME = ".oars-write-probe"


def check_writable_dir(folder: str, what: str = "output folder") -> None:
    """Create ``folder`` (and parents) and write and remove a small probe file in it.

    Args:
        folder: the folder the run will write to.
        what: how the message names it (``work_dir``, ``--show-dir``).

    Raises:
        FileWriteError: the folder cannot be created or written (read-only, another user's, disk full); the
            message names the folder, the reason and what to do.
    """
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise FileWriteError(err.errno, f"{what} {folder}: cannot create this folder: "
                             f"{(err.strerror or str(err)).lower()}; choose another --work-dir") from None
    probe = osp.join(folder, PROBE_NAME)
    try:
        atomic_write(probe, b"oars")
    except FileWriteError as err:
        raise FileWriteError(err.errno, f"{what} {folder}: cannot write there: {err.strerror or err}") from None
    try:
        os.remove(probe)
    except OSError:
        pass  # written but not removable: harmless, and the run itself will write there
