"""The studio's state on disk: a workspace folder with the work dirs it launched, exports, uploads and a SQLite index.

The index only points at folders; what a run *is* (its config, curves, metrics, report) is read from the files
the tools write, so a run started in a terminal and registered here looks the same as one the studio launched, and
deleting the index loses nothing but the list. Each room of the studio adds its own tables with
:meth:`Workspace.ensure_table`.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from oars.studio.security import NotFound, resolve_inside

_RUNS_TABLE = ("CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, work_dir TEXT UNIQUE NOT NULL, "
               "config TEXT, added REAL NOT NULL)")
#: work dirs the user removed from the index (their folders kept): the scan of runs/ must not bring them back
_FORGOTTEN_TABLE = "CREATE TABLE IF NOT EXISTS forgotten_runs (work_dir TEXT PRIMARY KEY)"
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


class Workspace:
    """One studio's folder and its index.

    Args:
        root: the workspace folder (created with ``runs/``, ``exports/``, ``uploads/`` when missing).
        data_roots: folders outside it that requests may name.
    """

    def __init__(self, root: Path, data_roots: tuple[Path, ...] = ()) -> None:
        self.root = Path(root).resolve()
        self.data_roots = tuple(Path(p).resolve() for p in data_roots)
        for sub in ("runs", "exports", "uploads"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.index = self.root / "studio.sqlite"
        self.ensure_table(_RUNS_TABLE)
        self.ensure_table(_FORGOTTEN_TABLE)

    @property
    def runs_dir(self) -> Path:
        """Where the studio's own training runs get their work dirs."""
        return self.root / "runs"

    @property
    def exports_dir(self) -> Path:
        """Where the studio's exports go."""
        return self.root / "exports"

    @property
    def uploads_dir(self) -> Path:
        """Where "try it" uploads are kept (size-bounded by the settings)."""
        return self.root / "uploads"

    def roots(self) -> list[Path]:
        """Every folder a request may name: the workspace, the registered data roots, and registered run folders."""
        with self.connect() as db:
            run_dirs = [Path(row[0]) for row in db.execute("SELECT work_dir FROM runs")]
        return [self.root, *self.data_roots, *run_dirs]

    def resolve(self, raw: str) -> Path:
        """A path from a request, resolved and checked against :meth:`roots` (raises ``PathRefused``)."""
        return resolve_inside(raw, self.roots(), self.root)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection to the index, committed on success (SQLite: one file, no server, safe across processes)."""
        db = sqlite3.connect(self.index, timeout=10)
        try:
            yield db
            db.commit()
        finally:
            db.close()

    def ensure_table(self, create_sql: str) -> None:
        """Create a table of the index if it is missing (each room of the studio owns its tables)."""
        with self.connect() as db:
            db.execute(create_sql)

    # runs: an id per work dir
    def register_run(self, work_dir: Path, config: str | None = None) -> str:
        """Add a work dir to the index (or return its id when already there); one removed earlier comes back.

        Returns:
            The run's id: the folder's name, made unique with a numeric suffix; used in the studio's URLs.
        """
        work_dir = Path(work_dir).resolve()
        with self.connect() as db:
            row = db.execute("SELECT id FROM runs WHERE work_dir = ?", (str(work_dir),)).fetchone()
            if row:
                return row[0]
            db.execute("DELETE FROM forgotten_runs WHERE work_dir = ?", (str(work_dir),))
            base = _SLUG.sub("_", work_dir.name).strip("_") or "run"
            run_id, n = base, 1
            while db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                n += 1
                run_id = f"{base}_{n}"
            db.execute("INSERT INTO runs (id, work_dir, config, added) VALUES (?, ?, ?, ?)",
                       (run_id, str(work_dir), config, time.time()))
        return run_id

    def unregister_run(self, run_id: str) -> Path:
        """Remove run ``run_id`` from the index (its folder is left as it is) and keep the scan of ``runs/`` from
        adding it again; returns its work dir."""
        work_dir = self.run_dir(run_id)
        with self.connect() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            db.execute("INSERT OR IGNORE INTO forgotten_runs (work_dir) VALUES (?)", (str(work_dir),))
        return work_dir

    def run_dir(self, run_id: str) -> Path:
        """The work dir of run ``run_id`` (raises ``NotFound`` naming it)."""
        with self.connect() as db:
            row = db.execute("SELECT work_dir FROM runs WHERE id = ?", (run_id,)).fetchone()
        if not row:
            raise NotFound(f"run {run_id!r}: not in this studio's index (see the Runs page)")
        return Path(row[0])

    def run_ids(self) -> list[str]:
        """Every indexed run's id, newest first."""
        with self.connect() as db:
            return [row[0] for row in db.execute("SELECT id FROM runs ORDER BY added DESC")]

    def discover_runs(self) -> list[str]:
        """Index every work dir under ``runs/`` that holds a ``config.yaml`` (runs the studio launched, or copied
        there), except those the user removed from the index, and return the ids of those newly added."""
        known = set(self.run_ids())
        with self.connect() as db:
            forgotten = {row[0] for row in db.execute("SELECT work_dir FROM forgotten_runs")}
        added = []
        for config in sorted(self.runs_dir.glob("*/config.yaml")):
            if str(config.parent.resolve()) in forgotten:
                continue
            run_id = self.register_run(config.parent)
            if run_id not in known:
                added.append(run_id)
        return added
