"""What ``tools/make_shards.py`` does: build a split's dataset from a config (as the Runner builds it, through the
task registry: the core names no task), and write every sample - its files' bytes and its data info as JSON -
into WebDataset tar shards of at most ``shard_size`` bytes, then ``index.json``.

Atomic: the index is written last (one put on object storage, a rename on disk), so a run that fails leaves no
index, and the shards it wrote are removed; a folder that already holds files is refused without ``overwrite``.
Shards are reproducible: members carry no time, owner or mode of the machine that wrote them.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from typing import Any

from oars.data import storage
from oars.data.shards.codec import RECORD_EXT, encode_record, encode_value, file_fields, is_local_file, member_suffix
from oars.data.shards.index import FORMAT, INDEX_NAME, VERSION
from oars.errors import DataError, OarsError

SPLITS = ("train", "val", "test")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_BLOCK = 512


def parse_size(value: str, flag: str = "--shard-size") -> int:
    """Bytes of a size such as ``1GB``, ``500MB``, ``64MiB`` or ``1000000``.

    Raises:
        OarsError: not such a size, or not positive, naming ``flag``.
    """
    match = _SIZE.match(str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or float(match.group(1)) * _UNITS[unit] < 1:
        raise OarsError(f"{flag} {value!r}: expected a positive size such as 1GB, 500MB or 64MiB (units: "
                        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return int(float(match.group(1)) * _UNITS[unit])


def shard_name(split: str, number: int) -> str:
    """``<split>-000000.tar``."""
    return f"{split}-{number:06d}.tar"


def _filesystem(url: str):
    import fsspec  # noqa: PLC0415 - the data extra; only for URLs

    return fsspec.core.url_to_fs(url, **{k: v for k, v in storage.options_for(url).items()
                                          if k not in storage.CACHE_KEYS})


def _remove(path: str) -> None:
    if storage.is_url(path):
        with storage.storage_errors(path):
            fs, inner = _filesystem(path)
            if fs.exists(inner):
                fs.rm(inner)
    elif os.path.exists(path):
        os.remove(path)


def _existing(out: str) -> list[str]:
    if not storage.exists(out):
        return []
    if not storage.isdir(out):
        raise OarsError(f"--out {out}: is a file; expected a folder (or a URL prefix) for the shards")
    return storage.list_dir(out)


def prepare_output(out: str, overwrite: bool) -> None:
    """Refuse a non-empty ``out`` unless ``overwrite``; with it, remove its index first (so that no index ever
    describes a mix of old and new shards), then its shards and copied metainfo files."""
    files = _existing(out)
    if files and not overwrite:
        shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
        raise OarsError(f"--out {out}: the folder is not empty ({len(files)} file(s): {shown}); pass --overwrite to "
                        "replace its shards, or choose another folder")
    ours = re.compile(r"^[^/]+-\d{6}\.tar$|^[^/]+-meta\.[^/]+$")
    if INDEX_NAME in files:
        _remove(storage.join(out, INDEX_NAME))
    for name in files:
        if ours.match(name.replace(os.sep, "/")):
            _remove(storage.join(out, name))


def build_split_dataset(cfg: Any, split: str) -> Any:
    """The dataset of ``cfg.<split>_dataloader.dataset`` (the one that reads files when a wrapper holds one),
    built in the config's scope through the task registry, annotations read.

    Raises:
        OarsError: no such dataloader, or a wrapper of several datasets.
    """
    from mmengine.registry import DATASETS, DefaultScope  # noqa: PLC0415

    from oars.data.check import leaf_dataset_configs  # noqa: PLC0415
    from oars.tasks import activate  # noqa: PLC0415

    ds_cfg = (cfg.get(f"{split}_dataloader") or {}).get("dataset")
    if not isinstance(ds_cfg, dict):
        have = [s for s in SPLITS if isinstance((cfg.get(f"{s}_dataloader") or {}).get("dataset"), dict)]
        raise OarsError(f"{cfg.filename}: no {split}_dataloader.dataset (--split {split}); the config has "
                        f"{', '.join(have) or 'no dataloaders'}")
    leaves = leaf_dataset_configs(copy.deepcopy(ds_cfg))
    if len(leaves) != 1:
        raise OarsError(f"{cfg.filename}: {split}_dataloader.dataset combines {len(leaves)} datasets "
                        f"({', '.join(str(d.get('type')) for d in leaves)}); make shards of each one (-o to pick it)")
    scope = cfg.get("default_scope")
    activate(scope)
    with DefaultScope.overwrite_default_scope(scope):
        dataset = DATASETS.build(leaves[0])
    if hasattr(dataset, "full_init"):
        dataset.full_init()
    return dataset


def _tar_bytes(content: int) -> int:
    """The size of a tar holding ``content`` bytes of headers and padded data: plus the two end blocks, rounded up
    to tar's 10 kB record."""
    return -(-(content + 2 * _BLOCK) // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


class _ShardWriter:
    """Tar shards of at most ``limit`` bytes under ``out``: each built in a local temporary file, then moved
    (a local folder) or uploaded (a URL)."""

    def __init__(self, out: str, split: str, limit: int) -> None:
        self.out, self.split, self.limit = out, split, limit
        self.written: list[dict] = []
        self._tmp: Any = None
        self._tar: tarfile.TarFile | None = None
        self._size = 0
        self._samples = 0

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        size = sum(_BLOCK + -(-len(data) // _BLOCK) * _BLOCK for _, data in members)
        if self._tar is not None and self._samples and _tar_bytes(self._size + size) > self.limit:
            self.close_shard()
        if self._tar is None:
            self._tmp = tempfile.TemporaryFile()
            self._tar = tarfile.open(fileobj=self._tmp, mode="w", format=tarfile.USTAR_FORMAT)
        for suffix, data in members:
            info = tarfile.TarInfo(f"{key}.{suffix}")
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
            self._tar.addfile(info, io.BytesIO(data))
        self._size += size
        self._samples += 1

    def close_shard(self) -> None:
        if self._tar is None:
            return
        self._tar.close()
        name = shard_name(self.split, len(self.written))
        dest = storage.join(self.out, name)
        size = self._tmp.tell()
        self._tmp.seek(0)
        if storage.is_url(dest):
            with storage.open_file(dest, "wb") as f:
                shutil.copyfileobj(self._tmp, f, 1 << 20)
        else:
            part = dest + ".part"
            with open(part, "wb") as f:
                shutil.copyfileobj(self._tmp, f, 1 << 20)
            os.replace(part, dest)
        self._tmp.close()
        self.written.append({"name": name, "samples": self._samples, "bytes": size})
        self._tar, self._tmp, self._size, self._samples = None, None, 0, 0

    def abort(self) -> None:
        if self._tar is not None:
            self._tmp.close()
            self._tar = None
        for shard in self.written:
            try:
                _remove(storage.join(self.out, shard["name"]))
            except OarsError:
                pass


def _write_text(path: str, text: str) -> None:
    if storage.is_url(path):
        with storage.open_file(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _copy_file(src: str, dest: str) -> None:
    with open(src, "rb") as fin, storage.open_file(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def make_shards(cfg: Any, split: str, out: str, shard_size: int, overwrite: bool = False,
                storage_options: Mapping | None = None, progress: bool = True) -> dict:
    """Write the shards of ``cfg``'s ``split`` dataset and their index into ``out`` (see the module docstring).

    Args:
        cfg: the loaded config; split: ``train``, ``val`` or ``test``.
        out: the output folder or URL; shard_size: the most bytes a shard holds (a sample larger than that gets a
            shard of its own).
        overwrite: replace what ``out`` holds; storage_options: fsspec options for a URL ``out``.
        progress: show a tqdm bar.

    Returns:
        The index written.
    """
    from mmengine.registry import DefaultScope  # noqa: PLC0415
    from tqdm import tqdm  # noqa: PLC0415

    if split not in SPLITS:
        raise OarsError(f"--split {split!r}: expected one of {', '.join(SPLITS)}")
    out = storage.absolute(out).rstrip("/") if storage.is_url(out) else os.path.abspath(out)
    storage.register_options(out, storage_options, "--storage-options")
    dataset = build_split_dataset(cfg, split)
    if len(dataset) == 0:
        raise OarsError(f"{cfg.filename}: the {split} dataset is empty; no shards to make")
    prepare_output(out, overwrite)
    if not storage.is_url(out):
        os.makedirs(out, exist_ok=True)
    writer = _ShardWriter(out, split, shard_size)
    owner = type(dataset).__name__
    try:
        width = max(9, len(str(len(dataset))))
        with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
            for i in tqdm(range(len(dataset)), desc=f"make_shards {split}", unit="sample", disable=not progress,
                          dynamic_ncols=True):
                info = dataset.get_data_info(i)
                key = f"{i:0{width}d}"
                fields = file_fields(info, f"{owner} sample {i}")
                members = {field: member_suffix(field, path) for field, path in fields.items()}
                payload = [(RECORD_EXT, encode_record(info, members))]
                payload += [(members[f], storage.read_bytes(path)) for f, path in fields.items()]
                writer.add(key, payload)
        writer.close_shard()
        metainfo = dict(getattr(dataset, "metainfo", {}) or {})
        metainfo_files = {}
        for k, v in metainfo.items():
            if is_local_file(v):
                name = f"{split}-meta.{k}{os.path.splitext(v)[1]}"
                _copy_file(v, storage.join(out, name))
                metainfo_files[k] = name
        index = {
            "format": FORMAT, "version": VERSION, "split": split, "dataset_type": owner,
            "scope": cfg.get("default_scope"), "total": sum(s["samples"] for s in writer.written),
            "shards": writer.written,
            "metainfo": encode_value({k: v for k, v in metainfo.items() if k not in metainfo_files}),
            "metainfo_files": metainfo_files,
        }
        _write_text(storage.join(out, INDEX_NAME), json.dumps(index, indent=1))
    except BaseException:
        writer.abort()
        raise
    if index["total"] != len(dataset):
        raise DataError(f"wrote {index['total']} of {len(dataset)} samples")  # a bug, not a user error
    return index
