"""The Datasets room's state: the registered data sets (table ``datasets`` of the index) and
what a scan of one found (the ``tools/check_data.py`` problems, class counts, sizes, one entry per sample).

A data set is a config's split, optionally pointed at other data: a folder (the split's ``data_root``) or a
dataset description file (``--data``, :mod:`oars.config.data_description`). A scan reads it the ways the tools do:
:func:`oars.data.check.check_config` lists every problem per file, then each sample goes through the split's
pipeline once more for its labels (the same dataset object the grid draws). The scan is kept as JSON under
``<workspace>/datasets/<id>/`` so pages read it without touching the data again. The configs offered are the Train
page's catalogue (:mod:`oars.studio.configs`).
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

from oars.studio.security import NotFound, StudioError
from oars.studio.workspace import Workspace

SPLITS = ("train", "val", "test")
_TABLE = ("CREATE TABLE IF NOT EXISTS datasets (id TEXT PRIMARY KEY, config TEXT NOT NULL, split TEXT NOT NULL, "
          "data TEXT, added REAL NOT NULL)")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")
DESCRIPTION_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class DatasetEntry:
    """One registered data set: ``config`` (absolute), ``split``, ``data`` (a folder or a description file, or
    None for the config's own data)."""

    id: str
    config: str
    split: str
    data: str | None
    added: float

    def overrides(self) -> list[str]:
        """The ``-o`` overrides a folder ``data`` means: the split's dataset ``data_root``."""
        if self.data and not self.data.endswith(DESCRIPTION_SUFFIXES):
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

    def add(self, config: Path, split: str, data: Path | None) -> DatasetEntry:
        """Register ``config``'s ``split`` (on ``data`` when given); an identical registration returns the same id.

        Raises:
            StudioError: an unknown split, or ``data`` that is neither a folder nor a description file.
        """
        if split not in SPLITS:
            raise StudioError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
        if data is not None and not (data.is_dir() or (data.is_file() and data.suffix in DESCRIPTION_SUFFIXES)):
            raise StudioError(f"data {data}: expected a folder (the split's data_root) or a dataset description "
                              "file (.yaml: format, root, train/val/test, names)")
        data_text = str(data) if data is not None else None
        with self.workspace.connect() as db:
            row = db.execute("SELECT id FROM datasets WHERE config = ? AND split = ? AND data IS ?",
                             (str(config), split, data_text)).fetchone()
            if row:
                return self.get(row[0])
            stem = data.stem if data is not None else config.stem
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
        is ``<folder>/status.json``; a scan already running is left to finish. Returns the job's status."""
        from oars.studio.background import read_status, start_job

        folder = self.folder(entry.id)
        status = read_status(folder)
        if status and status.get("state") == "running":
            return status
        args = ["scan-dataset", "--config", entry.config, "--split", entry.split]
        return start_job(folder, args + (["--data", entry.data] if entry.data else []), python)

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


def load_entry_config(entry: DatasetEntry) -> Any:
    """``entry``'s config loaded and checked as the tools load it (``-o`` for a folder, ``--data`` for a file).

    Raises:
        OarsError: the config's or the description's one message (a bad key, a missing split, a missing path).
    """
    from oars.config.check import load_checked_config

    description = entry.description()
    return load_checked_config(entry.config, entry.overrides(), data=description,
                               data_splits=(entry.split,) if description else None)


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
    """Check and read ``entry`` (:func:`scan_dataset`), keep the result as ``folder/scan.json`` (written whole:
    pages never read half a scan) and return it."""
    from oars_deploy.atomic import atomic_write

    folder.mkdir(parents=True, exist_ok=True)
    result = scan_dataset(entry, folder, progress)
    atomic_write(str(folder / "scan.json"), json.dumps(result))
    return result


def scan_dataset(entry: DatasetEntry, folder: Path, progress: Callable[[int, int], None] | None = None) -> dict:
    """Check ``entry`` and read its labels (``progress(done, total)`` after each sample read for its labels, the
    second pass; the check before it reports no count).

    Returns:
        ``{"time", "classes", "problems": [{"files", "reason"}], "summary", "samples": [{"files", "classes",
        "problem"}], "counts": {class: n}, "sizes": [...], "size_kind", "histogram": file name or None}``. ``sizes``
        are box sizes (sqrt of the area, pixels) or mask areas (fraction of the image), from the packed samples.
    """
    from oars.data.check import check_config, format_reports
    from oars.data.dataset import sample_files
    from oars.studio.sample_stats import histogram_png, sample_labels

    cfg = load_entry_config(entry)
    reports = check_config(cfg, [entry.split], num_workers=0)
    problems = [{"files": files, "reason": reason} for r in reports for files, reason in r.failures]
    result: dict[str, Any] = {"time": time.time(), "summary": format_reports(reports).splitlines()[-1:],
                              "problems": problems, "samples": [], "classes": [], "counts": {}, "sizes": [],
                              "size_kind": None, "histogram": None}
    try:
        _, dataset = build_entry_dataset(entry)
    except Exception as err:  # noqa: BLE001 - the check listed why; the page shows it without a grid
        result["build_error"] = str(err)
        return result
    classes = [str(c) for c in (dataset.metainfo.get("classes") or [])]
    result["classes"] = classes
    bad_files = {p["files"]: p["reason"] for p in problems}
    counts = [0] * len(classes)
    total = len(dataset)
    for i in range(total):
        if progress is not None:
            progress(i, total)
        try:
            info = dataset.get_data_info(i)
        except Exception as err:  # noqa: BLE001 - recorded per sample
            result["samples"].append({"files": f"sample {i}", "classes": [], "problem": str(err)})
            continue
        files = " + ".join(sample_files(info)) or f"sample {i}"
        entry_out = {"files": files, "classes": [], "problem": bad_files.get(files)}
        try:
            packed = dataset.pipeline(copy.deepcopy(info))
        except Exception as err:  # noqa: BLE001 - the same failure the check recorded (or a new one)
            entry_out["problem"] = entry_out["problem"] or f"{type(err).__name__}: {err}"
            packed = None
        if packed is not None:
            ids, kind, sizes = sample_labels(packed)
            entry_out["classes"] = sorted(set(ids))
            for c in ids:
                if 0 <= c < len(counts):
                    counts[c] += 1
            if kind:
                result["size_kind"] = kind
                result["sizes"] += sizes
        result["samples"].append(entry_out)
    if progress is not None:
        progress(total, total)
    result["counts"] = dict(zip(classes, counts))
    if result["sizes"]:
        histogram_png(result["sizes"], result["size_kind"], folder / "sizes.png")
        result["histogram"] = "sizes.png"
    return result
