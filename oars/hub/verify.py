"""The one sha256 check of named weights: every load of a hub name (``torchvision://``, ``oars://``) comes here,
whatever path it takes (a config's ``init.checkpoint`` or ``load_from``, ``-w`` of the tools, ``oars.Model``, a
distillation teacher, ``tools/hub.py download``), so a file that is not the one its name promises is refused with
one message: the file, the expected and the found hash, and what to do.

Which hash: a torchvision file carries the first 8 (a few: 10) hex digits of its sha256 in its name
(``resnet18-f37072fd.pth``), and torchvision publishes no more than that, so that prefix is compared (as
torch.hub's ``check_hash`` does); a registered checkpoint has its full sha256 recorded.

Hashing is remembered in this process only, keyed by the file's real path, device, inode, size, mtime and ctime
(ns): the second load of the same file in one run (the early ``-w`` check, then the load; several backbones from
one file; ``Model.predict`` then ``export``) costs a ``stat``, and a file replaced in between is hashed again (a
rename gives another inode, a write another size or mtime, and even a write that restores the mtime changes the
ctime). As in git's index, a file changed less than ``_RACY_NS`` before it was hashed is not remembered: a file
system whose timestamps tick coarsely could give a write right after the hash the same mtime and ctime.
Nothing is written to disk: a "verified" record kept beside the weights could be written by whatever
planted a file there, and a copy that keeps the mtime (``cp -p``, ``rsync -t``) would pass it in a later run.
One new process hashes each file once: ~0.1-0.5 s for the 45-250 MB files torchvision publishes, small beside
building a model.
"""

from __future__ import annotations

import hashlib
import os
import os.path as osp
import time

from oars.errors import OarsError

_CHUNK = 1 << 20
_FULL = 64  # hex digits of a whole sha256
_RACY_NS = 50_000_000  # 50 ms: coarser than the timestamp tick of the usual file systems (the kernel's coarse clock)
_HASHES: dict[str, tuple[tuple[int, ...], str]] = {}  # real path -> (stat key, sha256 hex)


class HubError(OarsError):
    """A hub name, file or download that cannot be used (the message names the file or URL and the fix)."""


class WeightsHashError(HubError):
    """A named file whose sha256 is not the one its name promises (the message gives both and the fix)."""


def sha256_file(path: str) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks (the file may be hundreds of MB); never cached."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _stat_key(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def cached_sha256(path: str) -> str:
    """:func:`sha256_file`, remembered in this process while the file's device, inode, size, mtime and ctime stay
    the same (a file that changes while it is read, or changed just before, is not remembered)."""
    real = osp.realpath(path)
    key = _stat_key(real)
    known = _HASHES.get(real)
    if known is not None and known[0] == key:
        return known[1]
    started = time.time_ns()
    digest = sha256_file(real)
    if _stat_key(real) == key and started - max(key[-2:]) > _RACY_NS:
        _HASHES[real] = (key, digest)
    else:
        _HASHES.pop(real, None)
    return digest


def check_hash(path: str, expected: str | None, what: str, advice: str = "a corrupt or different file",
               found: str | None = None) -> str:
    """Refuse ``path`` unless its sha256 is ``expected`` (64 hex digits) or starts with it (a published prefix).

    Args:
        path: the file (its hash is computed, or taken from this process's cache, see :func:`cached_sha256`).
        expected: the full sha256 or a prefix of it; None or empty: nothing to compare (a name that carries no hash).
        what: the name the file was asked for (``torchvision://resnet18.IMAGENET1K_V1``, ``oars://NAME``) or a URL.
        advice: the likely cause and what to do, ending the message.
        found: the hash already computed (a download hashes while it writes); None: computed here.

    Returns:
        ``path``.

    Raises:
        WeightsHashError: ``{what}: the sha256 of {path} is {found}, expected {expected} ({advice})``.
    """
    if not expected:
        return path
    expected = expected.lower()
    found = found or cached_sha256(path)
    if (found == expected) if len(expected) >= _FULL else found.startswith(expected):
        return path
    wanted = expected if len(expected) >= _FULL else f"it to start with {expected}"
    raise WeightsHashError(f"{what}: the sha256 of {path} is {found}, expected {wanted} ({advice})")


def published_advice(name: str | None, url: str) -> str:
    """The cause and fix for a published (torchvision) file in the hub cache that fails its hash.

    Args:
        name: the hub name asked for (None: the file was asked for by its URL).
        url: where the file is published.
    """
    again = f"run: python tools/hub.py download {name}" if name else f"download {url} again"
    return f"not the file {name or url} stands for: a corrupt or different file in the hub cache; delete it and {again}"


def registered_advice(name: str, path: str) -> str:
    """The cause and fix for a registered checkpoint that fails its recorded hash."""
    return (f"the file changed since it was registered; put the registered file back, or, if the new file is "
            f"intended, register it again: python tools/hub.py register {name.partition('://')[2] or name} "
            f"{path} --force")
