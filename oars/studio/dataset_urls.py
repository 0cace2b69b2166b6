"""Where a registered data set's data is, when it is not a plain local folder: a URL's scheme accepted or refused,
its storage options (from the config only, never the form), whether something is there, and whether it holds a
shards index. Split from :mod:`oars.studio.datasets` (the registry and the scans), which imports these.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

from oars.data import storage
from oars.errors import OarsError
from oars.studio.security import StudioError
from oars.studio.workspace import Workspace

DESCRIPTION_SUFFIXES = (".yaml", ".yml")
#: URL schemes a data set may be read from: object stores and web servers fsspec reads. Its local, caching, archive
#: and chaining wrappers are not (``file://`` is taken as a local path, under the workspace's path rules).
REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "http", "https", "hf", "memory")
SHARD_INDEX = "index.json"


def data_location(workspace: Workspace, raw: str) -> Path | str:
    """What a registration's ``data`` names: a local path (``file://`` URLs included) resolved under the workspace's
    path rules (``PathRefused`` outside the workspace and the data roots), or a URL of a scheme in
    :data:`REMOTE_SCHEMES` that fsspec knows, returned as it is (its existence is checked by :func:`check_url`).

    Raises:
        StudioError / PathRefused: an unknown or refused scheme, a chained URL, a local path outside.
    """
    raw = raw.strip()
    if not storage.is_url(raw):
        return workspace.resolve(raw)
    scheme = storage.protocol(raw)
    if scheme in ("file", "local"):
        return workspace.resolve(raw.split("://", 1)[1])
    try:
        from fsspec.registry import known_implementations
    except ImportError:
        raise StudioError(f"data {raw}: reading URLs needs fsspec (pip install 'oars[data]')") from None
    if "::" in raw or scheme not in REMOTE_SCHEMES or scheme not in known_implementations:
        raise StudioError(f"data {raw}: URL scheme {scheme!r} is not accepted; give a local path, or a URL of "
                          f"{', '.join(s + '://' for s in REMOTE_SCHEMES)} (one store, no '::' chain)")
    if raw.endswith(DESCRIPTION_SUFFIXES):
        raise StudioError(f"data {raw}: a dataset description file must be a local file (its root may be a URL)")
    return raw


def split_storage_options(cfg: Any, split: str) -> dict:
    """The ``storage_options`` the config gives the split's dataset (its first leaf): what a URL of it is read with."""
    from oars.data.check import leaf_dataset_configs

    dataset = (cfg.get(f"{split}_dataloader") or {}).get("dataset")
    if not isinstance(dataset, dict):
        return {}
    return dict(leaf_dataset_configs(copy.deepcopy(dataset))[0].get("storage_options") or {})


@lru_cache(maxsize=64)
def entry_storage_options(config: str, split: str) -> dict:
    """:func:`split_storage_options` of ``config`` as it is (no data override), checked (no credential in it)."""
    from oars.config.check import load_checked_config

    options = split_storage_options(load_checked_config(config, []), split)
    return storage.check_options(options, f"{config}: {split}_dataloader.dataset.storage_options")


def check_url(config: Path | str, split: str, url: str) -> None:
    """Refuse a data URL with nothing there (a folder of objects or a shards index), in one line naming it; read
    with the split's ``storage_options`` from ``config``.

    Raises:
        StudioError: nothing at the URL, or the storage's own one-line error (access denied, no endpoint ...).
        OarsError: the config's own message (its storage options hold a credential, a bad key).
    """
    options = entry_storage_options(str(config), split)
    try:
        found = storage.exists(url, options)
    except OarsError as err:  # the storage's line names the URL
        raise StudioError(str(err)) from None
    if not found:
        raise StudioError(f"data {url}: nothing there (no object under it; give the URL of the split's data_root "
                          "folder or of a shards folder holding index.json)")


@lru_cache(maxsize=64)
def url_holds_shard_index(url: str, config: str, split: str) -> bool:
    """Whether ``url/index.json`` exists, asked with the split's ``storage_options`` (the storage's one-line error
    naming the URL when it cannot be asked)."""
    return storage.isfile(storage.join(url, SHARD_INDEX), entry_storage_options(config, split))
