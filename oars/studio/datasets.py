"""The Datasets room's state: the registered data sets (table ``datasets`` of the index) and
what a scan of one found (the ``tools/check_data.py`` problems, class counts, sizes, one entry per sample).

A data set is a config's split, optionally pointed at other data: a folder (the split's ``data_root``), a URL of
one (``s3://bucket/set``, ``memory://``, ``https://`` ...: read through :mod:`oars.data.storage` with the split's
``storage_options`` from the config), a shards folder or URL (holding ``tools/make_shards.py``'s ``index.json``: read
as a ``ShardDataset`` with the split's pipeline) or a dataset description file (``--data``,
:mod:`oars.config.data_description`). A data set on a URL or in shards of more than :data:`SCAN_SAMPLE` samples is
scanned on a seeded random sample of that many (``tools/check_data.py --sample``'s rule). A scan reads it the ways
the tools do:
:func:`oars.data.check.check_config` lists every problem per file, then each sample goes through the split's
pipeline once more for its labels (the same dataset object the grid draws). The scan is kept as JSON under
``<workspace>/datasets/<id>/`` so pages read it without touching the data again. The configs offered are the Train
page's catalogue (:mod:`oars.studio.configs`). A scan runs in a background process, except for a ``memory://`` data
set: that store lives only in the studio's own process (another process sees an empty one), so it is scanned in
the request, here (:data:`IN_PROCESS_SCHEMES`).
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from oars.data import storage
from oars.studio.dataset_urls import (  # noqa: F401  (data_location, check_url: this module's API too)
    DESCRIPTION_SUFFIXES,
    REMOTE_SCHEMES,
    SHARD_INDEX,
    check_url,
    data_location,
    entry_storage_options,
    split_storage_options,
    url_holds_shard_index,
)
from oars.studio.security import NotFound, StudioError
from oars.studio.workspace import Workspace

SPLITS = ("train", "val", "test")
_TABLE = ("CREATE TABLE IF NOT EXISTS datasets (id TEXT PRIMARY KEY, config TEXT NOT NULL, split TEXT NOT NULL, "
          "data TEXT, added REAL NOT NULL)")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")
#: URL schemes whose data only this process sees: scanned in the request, not by a background process
IN_PROCESS_SCHEMES = ("memory",)
SCAN_SAMPLE = 2000  # a URL or shards data set of more samples is scanned on a random sample of this many
SCAN_SEED = 0  # the sample's seed (the same samples at each scan, as check_data.py --seed 0)


@dataclass(frozen=True)
class DatasetEntry:
    """One registered data set: ``config`` (absolute), ``split``, ``data`` (a folder or a description file, or
    None for the config's own data)."""

    id: str
    config: str
    split: str
    data: str | None
    added: float

    def is_url(self) -> bool:
        """Whether ``data`` is a URL (read through the storage layer, scanned on a sample when large)."""
        return storage.is_url(self.data)

    def shards(self) -> bool:
        """Whether ``data`` is a shards folder or URL (it holds ``index.json``)."""
        return bool(self.data) and self.description() is None and holds_shard_index(self)

    def overrides(self) -> list[str]:
        """The ``-o`` overrides a folder or URL ``data`` means: the split's dataset ``data_root`` (none for shards:
        :func:`load_entry_config` replaces the dataset)."""
        if self.data and not self.data.endswith(DESCRIPTION_SUFFIXES) and not self.shards():
            return [f"{self.split}_dataloader.dataset.data_root={self.data}"]
        return []

    def description(self) -> str | None:
        """The dataset description file, when ``data`` is one."""
        return self.data if self.data and self.data.endswith(DESCRIPTION_SUFFIXES) else None

    def source(self) -> str:
        """What the data set is, in one line (the tables show it)."""
        where = f" on {self.data}" if self.data else ""
        return f"{Path(self.config).name} ({self.split}){where}"


class DatasetIndex:
    """The ``datasets`` table of a workspace and the scans kept under ``<workspace>/datasets/``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        workspace.ensure_table(_TABLE)
        self.root = workspace.root / "datasets"

    def folder(self, dataset_id: str) -> Path:
        """Where a data set's scan and sample pictures are kept (inside the workspace: ids are slugs)."""
        return self.root / dataset_id

    def add(self, config: Path, split: str, data: Path | str | None) -> DatasetEntry:
        """Register ``config``'s ``split`` (on ``data`` when given: a local path, or a URL checked by
        :func:`data_location`); an identical registration returns the same id.

        Raises:
            StudioError: an unknown split, ``data`` that is neither a folder nor a description file, or a URL with
                nothing there or that cannot be read (the storage's one line, naming the URL).
        """
        if split not in SPLITS:
            raise StudioError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
        if isinstance(data, str):
            check_url(config, split, data)
        elif data is not None and not (data.is_dir() or (data.is_file() and data.suffix in DESCRIPTION_SUFFIXES)):
            raise StudioError(f"data {data}: expected a folder (the split's data_root) or a dataset description "
                              "file (.yaml: format, root, train/val/test, names)")
        data_text = str(data) if data is not None else None
        with self.workspace.connect() as db:
            row = db.execute("SELECT id FROM datasets WHERE config = ? AND split = ? AND data IS ?",
                             (str(config), split, data_text)).fetchone()
            if row:
                return self.get(row[0])
            stem = (Path(data.rstrip("/")).stem if isinstance(data, str) else data.stem) if data is not None \
                else config.stem
            base = _SLUG.sub("_", f"{stem}-{split}").strip("_") or "dataset"
            dataset_id, n = base, 1
            while db.execute("SELECT 1 FROM datasets WHERE id = ?", (dataset_id,)).fetchone():
                n += 1
                dataset_id = f"{base}_{n}"
            db.execute("INSERT INTO datasets (id, config, split, data, added) VALUES (?, ?, ?, ?, ?)",
                       (dataset_id, str(config), split, data_text, time.time()))
        return self.get(dataset_id)

    def get(self, dataset_id: str) -> DatasetEntry:
        """The registered data set ``dataset_id`` (raises ``NotFound`` naming it)."""
        with self.workspace.connect() as db:
            row = db.execute("SELECT id, config, split, data, added FROM datasets WHERE id = ?",
                             (dataset_id,)).fetchone()
        if not row:
            raise NotFound(f"data set {dataset_id!r}: not registered in this studio (see the Datasets page)")
        return DatasetEntry(*row)

    def all(self) -> list[DatasetEntry]:
        """Every registered data set, newest first."""
        with self.workspace.connect() as db:
            rows = db.execute("SELECT id, config, split, data, added FROM datasets ORDER BY added DESC").fetchall()
        return [DatasetEntry(*row) for row in rows]

    def scan_file(self, dataset_id: str) -> Path:
        return self.folder(dataset_id) / "scan.json"

    def scan(self, entry: DatasetEntry) -> dict:
        """Check and read ``entry`` here and now (see :func:`scan_into`; the pages run :meth:`start_scan`)."""
        return scan_into(entry, self.folder(entry.id))

    def start_scan(self, entry: DatasetEntry, python: str | None = None) -> dict:
        """Check and read ``entry`` in a background job (:mod:`oars.studio.background`, as evaluations and exports
        run): a large data set takes minutes, a request must not. Its status (``done`` of ``total`` samples read)
        is ``<folder>/status.json``; a scan already running is left to finish. A ``memory://`` data set is scanned
        here instead (:func:`scans_in_process`). Returns the job's status."""
        from oars.studio.background import read_status, start_job

        folder = self.folder(entry.id)
        status = read_status(folder)
        if status and status.get("state") == "running":
            return status
        if scans_in_process(entry):
            return self._scan_here(entry)
        args = ["scan-dataset", "--config", entry.config, "--split", entry.split]
        return start_job(folder, args + (["--data", entry.data] if entry.data else []), python)

    def _scan_here(self, entry: DatasetEntry) -> dict:
        """Scan ``entry`` in this process, with the status a background job writes (finished, or failed with the
        one-line message)."""
        from oars.studio.background import write_status
        from oars_deploy.errors import UserError, user_message

        folder = self.folder(entry.id)
        folder.mkdir(parents=True, exist_ok=True)
        base = {"state": "running", "started": time.time(), "in_process": True}
        write_status(folder, **base)
        try:
            result = self.scan(entry)
        except UserError as err:
            status = {**base, "state": "failed", "message": user_message(err), "ended": time.time()}
        else:
            status = {**base, "state": "finished", "ended": time.time(),
                      "result": {"samples": len(result["samples"]), "problems": len(result["problems"])}}
        write_status(folder, **status)
        return status

    def scan_status(self, entry: DatasetEntry) -> dict | None:
        """The status of ``entry``'s last background scan, or None when none ran."""
        from oars.studio.background import read_status

        return read_status(self.folder(entry.id))

    def read_scan(self, entry: DatasetEntry) -> dict | None:
        """The kept scan of ``entry``, or None before its first scan."""
        try:
            return json.loads(self.scan_file(entry.id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


def scans_in_process(entry: DatasetEntry) -> bool:
    """Whether ``entry``'s data lives only in this process (a ``memory://`` URL): a background scan would see an
    empty store, so it is scanned in the request."""
    return bool(entry.data) and storage.is_url(entry.data) and storage.protocol(entry.data) in IN_PROCESS_SCHEMES


def holds_shard_index(entry: DatasetEntry) -> bool:
    """Whether ``entry.data`` (a folder or URL) holds ``tools/make_shards.py``'s ``index.json`` (a URL is asked once
    per process: :func:`url_holds_shard_index`)."""
    data = str(entry.data)
    if not storage.is_url(data):
        return Path(data, SHARD_INDEX).is_file()
    return url_holds_shard_index(data, entry.config, entry.split)


def load_entry_config(entry: DatasetEntry) -> Any:
    """``entry``'s config loaded and checked as the tools load it (``-o`` for a folder or URL, ``--data`` for a file;
    for shards, the split's dataset replaced by a ``ShardDataset`` with its pipeline, in ``test_mode``: every sample
    once, in order).

    Raises:
        OarsError: the config's or the description's one message (a bad key, a missing split, a missing path).
    """
    from oars.config.check import load_checked_config
    from oars.data.check import leaf_dataset_configs

    description = entry.description()
    cfg = load_checked_config(entry.config, entry.overrides(), data=description,
                              data_splits=(entry.split,) if description else None)
    loader = cfg.get(f"{entry.split}_dataloader")
    if entry.shards() and loader and isinstance(loader.get("dataset"), dict):
        leaf = leaf_dataset_configs(copy.deepcopy(loader["dataset"]))[0]
        shards = {"type": "ShardDataset", "shards": entry.data, "pipeline": leaf.get("pipeline") or [],
                  "test_mode": True}
        if leaf.get("storage_options"):
            shards["storage_options"] = dict(leaf["storage_options"])
        loader["dataset"] = shards
        loader["sampler"] = None
    return cfg


def build_entry_dataset(entry: DatasetEntry) -> tuple[Any, Any]:
    """``(cfg, dataset)``: the split's dataset built as ``tools/check_data.py`` builds it (the first dataset a
    wrapper holds; an annotation problem that stops loading is skipped so that the other samples are shown).

    Raises:
        StudioError: the split has no dataset, or it cannot be built at all (its message).
    """
    from oars.data.check import SplitReport, build_collecting, leaf_dataset_configs
    from oars.tasks import activate

    cfg = load_entry_config(entry)
    loader = cfg.get(f"{entry.split}_dataloader") or {}
    if not isinstance(loader.get("dataset"), dict):
        raise StudioError(f"{entry.config}: no {entry.split}_dataloader.dataset to read")
    scope = cfg.get("default_scope")
    activate(scope)
    leaf = leaf_dataset_configs(copy.deepcopy(loader["dataset"]))[0]
    report = SplitReport(entry.split, str(leaf.get("type")))
    dataset = build_collecting(leaf, scope, f"{entry.split} dataset {leaf.get('type')}", report)
    if dataset is None:
        raise StudioError(f"{entry.config}: the {entry.split} dataset cannot be built: {report.failures[0][1]}")
    return cfg, dataset


@lru_cache(maxsize=4)
def cached_dataset(entry: DatasetEntry, _stamp: float) -> tuple[Any, Any]:
    """:func:`build_entry_dataset`, kept for the grid's pictures (``_stamp``: the scan's time, a new scan rebuilds)."""
    return build_entry_dataset(entry)


def scan_into(entry: DatasetEntry, folder: Path, progress: Callable[[int, int], None] | None = None) -> dict:
    """Check and read ``entry`` (:func:`scan_dataset`), keep the result as
    ``folder/scan.json`` (written whole: pages never read half a scan) and return it."""
    from oars_deploy.atomic import atomic_write

    folder.mkdir(parents=True, exist_ok=True)
    result = scan_dataset(entry, folder, progress)
    atomic_write(str(folder / "scan.json"), json.dumps(result))
    return result


def scan_dataset(entry: DatasetEntry, folder: Path, progress: Callable[[int, int], None] | None = None) -> dict:
    """Check ``entry`` and read its labels (``progress(done, total)`` after each sample read for its labels, the
    second pass; the check before it reports no count). Shards are read once, the check and the labels together.

    Returns:
        ``{"time", "classes", "problems": [{"files", "reason"}], "summary", "samples": [{"files", "classes",
        "problem", "index"} (+ "shard", "key" for shards)], "counts": {class: n}, "sizes": [...], "size_kind",
        "histogram": file name or None, "sampled": {"read", "total", "seed"} or None}``. ``sizes`` are box sizes
        (sqrt of the area, pixels) or mask areas (fraction of the image), from the packed samples; ``index`` is the
        sample's index in the dataset (in the stream, for shards).
    """
    from oars.data.check import check_config, format_reports, sample_indices
    from oars.studio.dataset_scan import count_labels, dataset_reads, shard_reads

    cfg = load_entry_config(entry)
    result: dict[str, Any] = {"time": time.time(), "summary": [], "problems": [], "samples": [], "classes": [],
                              "counts": {}, "sizes": [], "size_kind": None, "histogram": None, "sampled": None}
    shards = entry.shards()
    try:
        _, dataset = build_entry_dataset(entry)
        total = dataset.index.total if shards else len(dataset)
    except Exception as err:  # noqa: BLE001 - the check lists why (shards: this message); the page shows no grid
        dataset, total, result["build_error"] = None, 0, str(err)
    sample = SCAN_SAMPLE if (entry.is_url() or shards) and total > SCAN_SAMPLE else None
    if not shards:
        reports = check_config(cfg, [entry.split], num_workers=0, sample=sample, seed=SCAN_SEED)
        result["summary"] = format_reports(reports).splitlines()[-1:]
        result["problems"] = [{"files": files, "reason": reason} for r in reports for files, reason in r.failures]
    if dataset is None:
        return result
    classes = [str(c) for c in (dataset.metainfo.get("classes") or [])]
    result["classes"] = classes
    counts = [0] * len(classes)
    indices = sample_indices(total, sample, SCAN_SEED)
    reads = shard_reads(dataset, indices, result) if shards else dataset_reads(dataset, indices, result)
    wanted = len(indices)
    for done, (entry_out, packed) in enumerate(reads):
        if progress is not None:
            progress(done, wanted)
        if packed is not None:
            count_labels(packed, entry_out, counts, result)
        result["samples"].append(entry_out)
    if progress is not None:
        progress(wanted, wanted)
    if sample is not None:
        result["sampled"] = {"read": len(result["samples"]), "total": total, "seed": SCAN_SEED}
    if shards:
        bad = len(result["problems"])
        read = (f"{len(result['samples'])} of {total} sample(s) read (a random sample, seed {SCAN_SEED})"
                if result["sampled"] else f"{len(result['samples'])} sample(s) read")
        result["summary"] = [f"{entry.split} (ShardDataset): {read}, {bad} bad"]
    result["counts"] = dict(zip(classes, counts))
    if result["sizes"]:
        from oars.studio.sample_stats import histogram_png

        histogram_png(result["sizes"], result["size_kind"], folder / "sizes.png")
        result["histogram"] = "sizes.png"
    return result
