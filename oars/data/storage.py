"""One place that opens a data path: a local file, or a URL on object storage (``s3://``, ``gs://``, ``https://``,
``memory://``, ``file://``) through fsspec.

Why fsspec: it is the storage layer pandas, Hugging Face datasets and Ray Data already use (s3fs, gcsfs, HTTP), so
a bucket that works there works here, with the same ``storage_options``; nothing home-made speaks a protocol.

Rules:
- A local path goes straight to the existing code (``open``, ``os.path``): no fsspec call, no behaviour change.
- ``storage_options`` come from the dataset's config (``dataset.storage_options: {endpoint_url: ..., anon: ...}``);
  a dataset registers them for its ``data_root`` with :func:`register_options`, and every read of a URL under that
  root (in the main process and in forked or spawned DataLoader workers) uses them.
- Credentials come only from the environment or the standard files (``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE``, ``~/.aws/credentials``, ``GOOGLE_APPLICATION_CREDENTIALS``): an
  option named like a secret (``key``, ``secret``, ``token``, ``password``, ``aws_secret_access_key`` ...) is
  refused, so that it is never written into a run's ``config.yaml`` or logs.
- ``cache: simplecache`` (or ``filecache``, which re-checks each object's ETag) keeps a local copy of every file
  read, under ``cache_dir`` (default ``~/.cache/oars/storage``).
- Every error is one line naming the URL: a missing object, access denied, a timeout, an unreachable endpoint, an
  unknown protocol (naming the package or extra to install).
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from oars.errors import DataError, DataFileNotFoundError, OarsError

#: the oars keys of ``storage_options`` (the others go to the fsspec filesystem)
CACHE_KEYS = ('cache', 'cache_dir')
CACHE_KINDS = ('simplecache', 'filecache')
#: where the registered options travel to spawned DataLoader workers (non-secret by construction)
_ENV = 'OARS_STORAGE_OPTIONS'
_URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.\-]+://|::')
_SECRET = re.compile(r'(^|_)(key|secret|token|password|passwd|credentials?|session)(_|$)|secret|password|token',
                     re.IGNORECASE)
_INSTALL_HINT = {
    's3': 's3fs (pip install "oars[data]")', 's3a': 's3fs (pip install "oars[data]")',
    'gs': 'gcsfs (pip install gcsfs)', 'gcs': 'gcsfs (pip install gcsfs)',
    'az': 'adlfs (pip install adlfs)', 'abfs': 'adlfs (pip install adlfs)',
    'http': 'aiohttp (pip install aiohttp)', 'https': 'aiohttp (pip install aiohttp)',
}
CREDENTIALS_HINT = ('credentials come from the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or '
                    'AWS_PROFILE) or the standard files (~/.aws/credentials, GOOGLE_APPLICATION_CREDENTIALS)')

_registered: dict[str, dict] = {}
_listings: dict[tuple[str, str], set[str]] = {}  # (folder URL, options) -> file names


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL (``scheme://...`` or a chained ``a::b`` fsspec URL) rather than a local path."""
    return isinstance(path, str) and bool(_URL.search(path))


def protocol(url: str) -> str:
    """The protocol of ``url`` (``s3`` for ``s3://b/k``, the outer one of a chained URL)."""
    return url.split('::', 1)[0].split('://', 1)[0] if '://' in url else url.split('::', 1)[0]


def check_options(options: Mapping | None, owner: str = 'storage_options') -> dict:
    """``options`` validated: a mapping without secrets and with a known ``cache``.

    Args:
        options: the config's ``storage_options`` (None: none).
        owner: who gave them, for messages (e.g. ``'CocoDataset: storage_options'``).

    Returns:
        A plain dict copy.

    Raises:
        DataError: not a mapping, a key named like a secret (anywhere inside), or an unknown ``cache``.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise DataError(f'{owner} must be a mapping such as {{endpoint_url: http://host:9000, anon: false}}, '
                        f'got {options!r}')
    secrets = sorted(_secret_keys(options))
    if secrets:
        raise DataError(f'{owner}: {", ".join(secrets)}: a credential in the config is refused so that it is never '
                        f'written into a run\'s config.yaml or logs: {CREDENTIALS_HINT}')
    cache = options.get('cache')
    if cache not in (None, False, 'none', *CACHE_KINDS):
        raise DataError(f'{owner}: cache must be one of {list(CACHE_KINDS)} or none, got {cache!r}')
    return json.loads(json.dumps(dict(options)))  # a plain copy; also refuses what cannot travel to workers


def _secret_keys(options: Mapping, where: str = '') -> Iterator[str]:
    for key, value in options.items():
        name = f'{where}{key}'
        if isinstance(key, str) and _SECRET.search(key):
            yield name
        if isinstance(value, Mapping):
            yield from _secret_keys(value, f'{name}.')


def register_options(root: str, options: Mapping | None, owner: str = 'storage_options') -> None:
    """Use ``options`` for every URL under ``root`` (a dataset's ``data_root``), in this process and in the
    DataLoader workers it starts (forked ones inherit the table, spawned ones read it from the environment).
    Nothing is registered for a local root (its options are refused: they would do nothing)."""
    checked = check_options(options, owner)
    if not is_url(root):
        if checked:
            raise DataError(f'{owner} apply to a URL data_root (s3://, gs://, https://, memory://, file://); '
                            f'data_root {root!r} is a local path')
        return
    _registered[root.rstrip('/')] = checked
    os.environ[_ENV] = json.dumps(_registered)


def options_for(url: str) -> dict:
    """The options registered for the longest root that ``url`` lies under (``{}`` if none)."""
    if not _registered and os.environ.get(_ENV):
        _registered.update(json.loads(os.environ[_ENV]))
    best = max((r for r in _registered if url == r or url.startswith(r + '/')), key=len, default=None)
    return dict(_registered[best]) if best is not None else {}


def absolute(path: str) -> str:
    """``os.path.abspath`` of a local path; a URL as it is."""
    return path if is_url(path) else os.path.abspath(path)


def join(base: str, *parts: str) -> str:
    """``os.path.join`` for local paths; for a URL, ``/``-joined (a part that is itself a URL or starts with
    ``/`` replaces what came before, as ``os.path.join`` does)."""
    if not is_url(base) and not any(is_url(p) for p in parts):
        return os.path.join(base, *parts)
    out = base
    for part in parts:
        part = str(part)
        if is_url(part):
            out = part
        elif part:
            out = f'{out.rstrip("/")}/{part.lstrip("/")}' if not part.startswith('/') else _root_of(out) + part
    return out


def _root_of(url: str) -> str:
    scheme, rest = url.split('://', 1)
    return f'{scheme}://{rest.split("/", 1)[0]}'


def _filesystem(url: str, storage_options: Mapping | None):
    """(fsspec filesystem, path inside it) for ``url``, wrapped in the requested local cache."""
    import fsspec  # noqa: PLC0415 - the data extra; a local path never gets here

    options = dict(options_for(url) if storage_options is None else check_options(storage_options))
    cache = options.pop('cache', None)
    cache_dir = options.pop('cache_dir', None)
    fs, path = fsspec.core.url_to_fs(url, **options)
    if cache in CACHE_KINDS:
        storage = os.path.expanduser(cache_dir or default_cache_dir())
        extra = {'check_files': True} if cache == 'filecache' else {}
        fs = fsspec.filesystem(cache, fs=fs, cache_storage=storage, **extra)
    return fs, path


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/oars/storage`` (``~/.cache/oars/storage``): where ``cache:`` keeps its copies."""
    return os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'oars', 'storage')


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Turn what fsspec and its backends raise for ``url`` into one line naming it (see :func:`storage_error`)."""
    try:
        yield
    except OarsError:
        raise
    except Exception as err:  # noqa: BLE001 - every backend's error is translated or re-raised below
        translated = storage_error(err, url)
        if translated is None:
            raise
        raise translated from None


def storage_error(err: BaseException, url: str) -> OarsError | None:
    """The one-line error for ``err`` raised while reading ``url``, or None for an error that is not about
    storage (a bug, which keeps its traceback)."""
    detail = f'{type(err).__name__}: {err}'.strip().rstrip(':')
    status = _http_status(err)
    name = type(err).__name__
    if isinstance(err, FileNotFoundError) or status == 404 or name in ('NoSuchKey', 'NoSuchBucket'):
        return DataFileNotFoundError(f'{url}: not found (no such object, folder or bucket: {detail})')
    if isinstance(err, PermissionError) or status in (401, 403) or 'AccessDenied' in str(err) \
            or 'InvalidAccessKeyId' in str(err) or 'SignatureDoesNotMatch' in str(err):
        return DataError(f'{url}: access denied ({detail}); {CREDENTIALS_HINT}')
    if isinstance(err, TimeoutError) or 'Timeout' in name:
        return DataError(f'{url}: timed out ({detail}); check the endpoint and the network, or set '
                         'storage_options.config_kwargs.{connect_timeout, read_timeout} (s3fs)')
    if isinstance(err, ConnectionError) or 'Connect' in name or 'Endpoint' in name:
        return DataError(f'{url}: cannot reach the storage endpoint ({detail}); check storage_options.endpoint_url')
    if isinstance(err, ValueError) and 'Protocol not known' in str(err):
        return DataError(f'{url}: unknown protocol {protocol(url)!r} (fsspec knows e.g. s3://, gs://, az://, '
                         'https://, memory://, file://); check the data_root or ann_file URL')
    if isinstance(err, ImportError):
        proto = protocol(url)
        need = _INSTALL_HINT.get(proto, f"the fsspec implementation of '{proto}'")
        return DataError(f'{url}: reading {proto}:// URLs needs {need} ({err})')
    if isinstance(err, OSError):
        return DataError(f'{url}: {detail}')
    return None


def _http_status(err: BaseException) -> int | None:
    response = getattr(err, 'response', None)
    if isinstance(response, dict):
        status = response.get('ResponseMetadata', {}).get('HTTPStatusCode')
        return int(status) if isinstance(status, int) else None
    status = getattr(err, 'status', None) or getattr(err, 'code', None)
    return status if isinstance(status, int) else None


def _require_fsspec(url: str) -> None:
    try:
        import fsspec  # noqa: F401, PLC0415
    except ImportError:
        raise DataError(f'{url}: reading URLs needs fsspec (pip install "oars[data]": fsspec and s3fs)') from None


@contextmanager
def open_file(path_or_url: str, mode: str = 'rb', storage_options: Mapping | None = None,
              encoding: str | None = None) -> Iterator[IO[Any]]:
    """An open file: ``open()`` for a local path, the fsspec file (through the cache, if set) for a URL.

    Args:
        path_or_url: a local path or a URL.
        mode: ``'rb'``, ``'r'`` (text), ``'wb'`` ...
        storage_options: the options to use; None: those registered for the URL's root.
        encoding: for text mode (default utf-8 for URLs).

    Raises:
        DataFileNotFoundError / DataError: for a URL, one line naming it (:func:`storage_error`). Local paths
            raise what ``open()`` raises, as before.
    """
    if not is_url(path_or_url):
        with open(path_or_url, mode, encoding=encoding) as f:
            yield f
        return
    _require_fsspec(path_or_url)
    with storage_errors(path_or_url):
        fs, path = _filesystem(path_or_url, storage_options)
        binary = 'b' in mode
        f = fs.open(path, mode if binary else mode.replace('t', '') + 'b')
    if not binary:
        import io  # noqa: PLC0415

        f = io.TextIOWrapper(f, encoding=encoding or 'utf-8')
    try:
        with storage_errors(path_or_url):
            yield f
    finally:
        f.close()


def _remote(url: str, storage_options: Mapping | None, call: Callable[[Any, str], Any]) -> Any:
    """``call(filesystem, path)`` for ``url`` on its fsspec filesystem, its errors one line naming the URL: what
    every reader below does for a URL (a local path never comes here)."""
    _require_fsspec(url)
    with storage_errors(url):
        fs, path = _filesystem(url, storage_options)
        return call(fs, path)


def read_bytes(path_or_url: str, storage_options: Mapping | None = None) -> bytes:
    """The whole file; a URL's errors are one line naming it (image decoding reads this, ``cv2.imdecode``)."""
    if not is_url(path_or_url):
        with open(path_or_url, 'rb') as f:
            return f.read()
    return _remote(path_or_url, storage_options, lambda fs, path: fs.cat_file(path))


def exists(path_or_url: str, storage_options: Mapping | None = None) -> bool:
    """Whether a file or folder exists (``os.path.exists`` for a local path)."""
    if not is_url(path_or_url):
        return os.path.exists(path_or_url)
    return _remote(path_or_url, storage_options, lambda fs, path: fs.exists(path))


def isfile(path_or_url: str, storage_options: Mapping | None = None) -> bool:
    """Whether a file (an object) exists (``os.path.isfile`` for a local path)."""
    if not is_url(path_or_url):
        return os.path.isfile(path_or_url)
    return _remote(path_or_url, storage_options, lambda fs, path: fs.isfile(path))


def isdir(path_or_url: str, storage_options: Mapping | None = None) -> bool:
    """Whether a folder exists (``os.path.isdir`` for a local path; on object storage: a prefix with objects)."""
    if not is_url(path_or_url):
        return os.path.isdir(path_or_url)
    return _remote(path_or_url, storage_options, lambda fs, path: fs.isdir(path))


def list_dir(folder: str, storage_options: Mapping | None = None) -> list[str]:
    """Every file under ``folder`` (recursive), as sorted ``/``-separated paths relative to it; one listing
    request per folder on object storage, not one request per file (``os.walk`` for a local folder)."""
    if not is_url(folder):
        out = []
        for root, dirs, files in os.walk(folder, followlinks=True):
            dirs.sort()
            rel = os.path.relpath(root, folder)
            out.extend(name if rel == '.' else os.path.join(rel, name) for name in files)
        return sorted(out)
    return _remote(folder, storage_options,
                   lambda fs, path: sorted(posixpath.relpath(p, path.rstrip('/')) for p in fs.find(path.rstrip('/'))))


def glob(folder: str, pattern: str, storage_options: Mapping | None = None) -> list[str]:
    """The files under ``folder`` (at any depth, as ``Path.rglob``) whose name matches ``pattern`` (``fnmatch``, e.g.
    ``*_gt*_polygons.json``; a pattern holding ``/`` is matched against the path relative to ``folder`` instead), as
    sorted full paths (joined with :func:`join`): one listing (:func:`list_dir`) for a local folder and a URL alike,
    so a format finds its files the same way on a bucket as on disk."""
    def matches(rel: str) -> bool:
        rel = rel.replace(os.sep, '/')
        return fnmatch.fnmatchcase(rel if '/' in pattern else posixpath.basename(rel), pattern)

    return [join(folder, rel) for rel in list_dir(folder, storage_options) if matches(rel)]


def normpath(path: str) -> str:
    """``os.path.normpath`` of a local path; for a URL, ``.`` and ``..`` resolved in the part after the bucket
    (``s3://b/set/sub/../x`` -> ``s3://b/set/x``), the scheme's ``//`` kept."""
    if not is_url(path) or '://' not in path:
        return path if is_url(path) else os.path.normpath(path)
    root = _root_of(path)
    rest = path[len(root):]
    return root + (posixpath.normpath(rest) if rest.strip('/') else '')


def listed_isfile(path_or_url: str, storage_options: Mapping | None = None) -> bool:
    """``os.path.isfile`` for a local path; for a URL, whether its folder's listing holds it. Each folder is listed
    once per process (one request for thousands of images or label maps, instead of one request each), so an
    object added to the bucket after the first check of its folder is not seen until the next run."""
    if not is_url(path_or_url):
        return os.path.isfile(path_or_url)
    folder = path_or_url.rsplit('/', 1)[0]
    key = (folder, json.dumps(options_for(folder) if storage_options is None else dict(storage_options),
                              sort_keys=True))
    if key not in _listings:
        _require_fsspec(folder)
        with storage_errors(folder):
            fs, path = _filesystem(folder, storage_options)
            try:
                entries = fs.ls(path, detail=True)
            except FileNotFoundError:
                entries = []
        _listings[key] = {posixpath.basename(e['name'].rstrip('/')) for e in entries if e.get('type') == 'file'}
    return path_or_url.rsplit('/', 1)[1] in _listings[key]


def local_copy(url: str, storage_options: Mapping | None = None) -> str:
    """A local path holding ``url``'s content, for readers that only take paths (pycocotools' evaluator, FFmpeg):
    ``url`` itself when it is local; else a copy under the cache folder (``cache_dir``; ``filecache``: the object's
    ETag is checked each time, so a changed object is fetched again)."""
    if not is_url(url):
        return url
    _require_fsspec(url)
    import fsspec  # noqa: PLC0415

    options = dict(options_for(url) if storage_options is None else check_options(storage_options))
    options.pop('cache', None)
    cache_dir = os.path.expanduser(options.pop('cache_dir', None) or default_cache_dir())
    with storage_errors(url):
        fs, path = fsspec.core.url_to_fs(url, **options)
        cached = fsspec.filesystem('filecache', fs=fs, cache_storage=cache_dir, check_files=True)
        with cached.open(path, 'rb') as f:
            return f.name


def join_root(data_root: str, ann_file: str, data_prefix: Mapping[str, str]) -> tuple[str, dict]:
    """mmengine's ``BaseDataset._join_prefix`` for a URL ``data_root`` (mmengine's own join sends ``s3://`` to its
    Petrel backend and knows no other scheme): ``ann_file`` and every ``data_prefix`` folder under ``data_root``
    unless it is itself absolute or a URL.

    Returns:
        (the joined ``ann_file``, or ``''`` when none; the joined ``data_prefix``).
    """
    def under_root(path: str) -> str:
        return path if is_url(path) or os.path.isabs(path) else join(data_root, path)

    if not isinstance(data_prefix, Mapping) or not all(isinstance(v, str) for v in data_prefix.values()):
        raise DataError(f'data_prefix must map names to folders (strings), got {data_prefix!r}')
    return (under_root(ann_file) if ann_file else ''), {k: under_root(v) for k, v in data_prefix.items()}
