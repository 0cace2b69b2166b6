"""What a folder holds, byte for byte: the tests that promise nothing the user had is changed compare it before and
after a run."""

from __future__ import annotations

import hashlib
import os
import os.path as osp


def digest(folder) -> dict[str, str]:
    """Every file under ``folder`` (its path relative to ``folder``) and the sha1 of its bytes."""
    out = {}
    for base, _, files in os.walk(folder):
        for name in files:
            with open(osp.join(base, name), "rb") as f:
                out[osp.relpath(osp.join(base, name), folder)] = hashlib.sha1(f.read()).hexdigest()
    return out
