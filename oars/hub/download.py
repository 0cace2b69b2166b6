"""Where hub files live and how they arrive: PyTorch's hub cache, the sha256 prefix check (of a download and of
a file already cached: :func:`oars.hub.verify.check_hash`), a download that never leaves a partial or corrupt file
behind, and one message (URL + exact path) when the file cannot be fetched.

Files go where ``torch.hub`` puts them (``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME/hub/checkpoints``),
so weights already fetched by torchvision are found and ours are found by torchvision. ``OARS_HUB_URL`` replaces
the base of every URL (scheme, host and path up to the file name): a mirror, or the test suite's local server.
``OARS_HUB_OFFLINE=1`` never tries the network (the message says where to put the file).
"""

from __future__ import annotations

import hashlib
import os
import os.path as osp
import re
import sys
import urllib.error
import urllib.request
from http.client import HTTPException

from oars_deploy.atomic import temp_path

from .verify import HubError, check_hash, published_advice, sha256_file

__all__ = ["HubError", "HubUnavailableError", "cache_dir", "check_hash", "download", "fetch", "hash_prefix_of",
           "mirrored_url", "sha256_file", "unavailable"]

URL_ENV = "OARS_HUB_URL"
OFFLINE_ENV = "OARS_HUB_OFFLINE"
TIMEOUT_S = 30.0
_CHUNK = 1 << 20
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # torch.hub's: ``<name>-<sha256 prefix>.<ext>``


class HubUnavailableError(HubError):
    """The file is not in the cache and could not be downloaded: the message gives the URL and the exact path."""


def cache_dir() -> str:
    """``torch.hub.get_dir()/checkpoints`` (honours ``TORCH_HOME`` and ``torch.hub.set_dir``)."""
    import torch.hub

    return osp.join(torch.hub.get_dir(), "checkpoints")


def hash_prefix_of(filename: str) -> str | None:
    """The sha256 prefix a published file name carries (``resnet50-11ad3fa6.pth`` -> ``11ad3fa6``), as torch.hub
    reads it; None when the name carries none."""
    found = HASH_REGEX.search(filename)
    return found.group(1) if found and found.group(1) else None


def mirrored_url(url: str) -> str:
    """``url`` with its base (everything before the file name) replaced by ``$OARS_HUB_URL`` when that is set."""
    base = os.environ.get(URL_ENV, "").strip()
    return f"{base.rstrip('/')}/{url.rsplit('/', 1)[-1]}" if base else url


def unavailable(url: str, path: str, reason: str) -> HubUnavailableError:
    """The one message for a file that is not here and cannot be fetched: the URL and the exact path for it."""
    return HubUnavailableError(f"{osp.basename(path)} is not in the hub cache and cannot be downloaded ({reason}). "
                               f"Download {url} on a machine that is online and put it at {path} "
                               f"(or set {URL_ENV} to a mirror that serves {osp.basename(path)})")


def _progress(total: int | None, name: str, enabled: bool):
    """A tqdm bar when asked for (and tqdm is there), else an object whose ``update`` / ``close`` do nothing."""
    if enabled:
        try:
            from tqdm import tqdm

            return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=name, file=sys.stderr)
        except ImportError:
            pass

    class _Silent:
        def update(self, n: int) -> None:
            return None

        def close(self) -> None:
            return None

    return _Silent()


def download(url: str, dst: str, hash_prefix: str | None, progress: bool = False) -> str:
    """Download ``url`` to ``dst``: into a temporary file beside it, size and sha256 prefix checked, then renamed.

    A download that breaks off (fewer bytes than the server announced), fails its hash, or is interrupted leaves
    nothing behind: the temporary file is removed and ``dst`` is untouched.

    Args:
        url: what to fetch (already mirrored).
        dst: the cache path.
        hash_prefix: hex prefix the file's sha256 must start with (None: not checked).
        progress: show a progress bar on stderr.

    Returns:
        ``dst``.

    Raises:
        HubUnavailableError: the server cannot be reached, answers an error, or closes early.
        HubError: the downloaded bytes fail the hash check.
    """
    os.makedirs(osp.dirname(dst) or ".", exist_ok=True)
    tmp = temp_path(dst)
    try:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 (http(s) URLs only)
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                bar = _progress(total, osp.basename(dst), progress)
                received = 0
                digest = hashlib.sha256()
                with open(tmp, "wb") as f:
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        f.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        bar.update(len(chunk))
                    f.flush()
                    os.fsync(f.fileno())
                bar.close()
        except (urllib.error.URLError, HTTPException, OSError, ValueError) as err:
            raise unavailable(url, dst, f"{type(err).__name__}: {getattr(err, 'reason', err)}") from None
        if total is not None and received != total:
            raise unavailable(url, dst, f"the server closed the connection after {received} of {total} bytes")
        check_hash(dst, hash_prefix, url, found=digest.hexdigest(),
                   advice=f"a corrupt download or a wrong mirror: {URL_ENV}={os.environ.get(URL_ENV, '')!r}; "
                          "it was removed, nothing is left at that path")
        os.replace(tmp, dst)
        tmp = None
    finally:
        if tmp is not None and osp.exists(tmp):
            os.remove(tmp)
    return dst


def fetch(url: str, filename: str | None = None, hash_prefix: str | None = None, progress: bool = False,
          name: str | None = None) -> str:
    """The cached file of ``url``, its sha256 checked, downloaded first when it is not there (unless
    ``OARS_HUB_OFFLINE`` is set).

    A file already in the cache is checked too, whoever put it there (an earlier download, torchvision, or a
    person following the offline message), through the one check :func:`oars.hub.verify.check_hash`.

    Args:
        url: the published URL (its base is replaced by ``$OARS_HUB_URL`` when set).
        filename: the cache file name (default: the URL's).
        hash_prefix: sha256 prefix the file must have (default: the one in the file name).
        progress: show a progress bar while downloading.
        name: the hub name asked for (``torchvision://resnet18.IMAGENET1K_V1``), for the messages (default: the URL).

    Returns:
        the path in :func:`cache_dir`.

    Raises:
        HubUnavailableError: not cached and cannot be downloaded; the message gives the URL and the exact path.
        WeightsHashError: the cached file or the download fails its hash check.
    """
    filename = filename or url.rsplit("/", 1)[-1]
    path = osp.join(cache_dir(), filename)
    prefix = hash_prefix if hash_prefix is not None else hash_prefix_of(filename)
    if osp.isfile(path):
        return check_hash(path, prefix, name or url, published_advice(name, url))
    source = mirrored_url(url)
    if os.environ.get(OFFLINE_ENV, "").lower() in {"1", "true", "yes"}:
        raise unavailable(source, path, f"{OFFLINE_ENV} is set")
    return download(source, path, prefix, progress=progress)
