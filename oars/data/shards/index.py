"""``index.json``: what a shard folder holds (shard names, samples per shard, the total, the classes and other
metainfo, the dataset type and the task scope it came from), read before any shard is opened.

Why an index: a stream cannot be counted without reading it, and a DataLoader must know its length, every rank its
share and every worker its shards before the first byte; the scope lets :class:`~oars.data.shards.ShardDataset`
refuse shards of another task by name instead of failing deep in a transform.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from oars.data import storage
from oars.data.shards.codec import decode_value
from oars.errors import DataError, DataFileNotFoundError

INDEX_NAME = "index.json"
FORMAT = "oars-webdataset-shards"
VERSION = 1
MAKE_HINT = "make them with tools/make_shards.py -c CONFIG --split SPLIT --out FOLDER"


@dataclass
class ShardIndex:
    """The parsed index of a shard folder (see the module docstring).

    Attributes:
        root: the folder or URL holding the shards.
        shards: shard file names, in order; counts: samples in each.
        split, dataset_type, scope: where the shards came from.
        metainfo: the source dataset's metainfo (classes, palette, ...), decoded.
        metainfo_files: metainfo keys whose value is a file copied beside the index -> that file's name.
        sizes: each shard's bytes as written (None where the index does not say), so a small shard can be read
            whole (one call).
    """

    root: str
    shards: list[str]
    counts: list[int]
    split: str = ""
    dataset_type: str = ""
    scope: str | None = None
    metainfo: dict = field(default_factory=dict)
    metainfo_files: dict = field(default_factory=dict)
    sizes: list[int | None] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Samples in all shards."""
        return int(sum(self.counts))

    def url(self, name: str) -> str:
        """The path or URL of a file of the folder."""
        return storage.join(self.root, name)


def read_index(root: str) -> ShardIndex:
    """The index of the shard folder ``root`` (a local folder or a URL), validated.

    Raises:
        DataFileNotFoundError: no ``index.json`` there (not a shard folder, or ``make_shards`` did not finish).
        DataError: an index that is not one of ours, or whose counts do not add up.
    """
    root = storage.absolute(str(root)).rstrip("/") if storage.is_url(str(root)) else storage.absolute(str(root))
    path = storage.join(root, INDEX_NAME)
    try:
        with storage.open_file(path, "r", encoding="utf-8") as f:
            raw = json.load(f)
    except FileNotFoundError:
        raise DataFileNotFoundError(f"{path}: no shard index here ({root} is not a shard folder, or the "
                                    f"tools/make_shards.py run that wrote it did not finish); {MAKE_HINT}") from None
    except ValueError as err:
        raise DataError(f"{path}: not a shard index (invalid JSON: {err}); {MAKE_HINT}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise DataError(f"{path}: not an oars shard index (format {found!r}, expected {FORMAT!r}); {MAKE_HINT}")
    if raw.get("version") != VERSION:
        raise DataError(f"{path}: shard index version {raw.get('version')!r}; this oars reads version {VERSION}; "
                        f"{MAKE_HINT}")
    shards = raw.get("shards")
    if not isinstance(shards, list) or not shards or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("samples"), int)
            and s["samples"] > 0 for s in shards):
        raise DataError(f"{path}: 'shards' must be a non-empty list of {{name, samples > 0}}; {MAKE_HINT}")
    counts = [int(s["samples"]) for s in shards]
    sizes = [s["bytes"] if isinstance(s.get("bytes"), int) and s["bytes"] >= 0 else None for s in shards]
    if raw.get("total") != sum(counts):
        raise DataError(f"{path}: total {raw.get('total')!r} is not the sum of the shards' samples ({sum(counts)}); "
                        f"{MAKE_HINT}")
    return ShardIndex(root=root, shards=[s["name"] for s in shards], counts=counts, split=str(raw.get("split", "")),
                      dataset_type=str(raw.get("dataset_type", "")), scope=raw.get("scope"),
                      metainfo=decode_value(raw.get("metainfo") or {}),
                      metainfo_files=dict(raw.get("metainfo_files") or {}), sizes=sizes)
