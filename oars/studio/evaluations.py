"""The Evaluate room's files: a run's checkpoints, where each evaluation goes (``<run>/eval/<checkpoint>/``:
``metrics.json``, ``report.html``, the job's ``status.json``), and what the report holds, read back from its HTML.

Why read the report: the worst images (prediction vs ground truth, ranked by the task's per-image score: mIoU for
label maps, missed/false boxes for detectors, the true-class probability for clips, PSNR for GAN pairs) and the
confusion matrix exist only there, drawn by the task's report hook; the studio shows them without knowing the task.
Which images fall in each cell of the matrix comes from ``confusion_cells.json`` beside the report
(:mod:`oars.evaluation.confusion_cells`), with each image's picture taken from the report when it drew one.
The report is :func:`oars.visualization.html_report.render_html_report`'s: ``<section><h2>title</h2>`` with tables and
``<figure><img src="data:image/png;base64,..."><figcaption>`` pictures, which :func:`read_report` parses.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

from oars.evaluation.confusion_cells import CELLS_FILE, CellsFileError, ConfusionCells, read_cells
from oars.studio.security import NotFound

EVAL_DIR = "eval"
CHECKPOINT_SUFFIX = ".pth"
WORST_PREFIX = "Worst"  # the report hooks' section of the worst samples ("Worst images", "Worst clips", ...)
CONFUSION_TITLE = "Confusion matrix"


def checkpoints(run_dir: Path) -> list[str]:
    """The checkpoint names of a run (file stems), best first, then the newest."""
    found = sorted(run_dir.glob(f"*{CHECKPOINT_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    return sorted((p.stem for p in found), key=lambda s: not s.startswith("best"))


def checkpoint_path(run_dir: Path, name: str) -> Path:
    """The checkpoint file ``name`` of the run (only names the run has: a request never builds a path).

    Raises:
        NotFound: naming the run's checkpoints.
    """
    names = checkpoints(run_dir)
    if name not in names:
        raise NotFound(f"checkpoint {name!r}: not in {run_dir} (it has: {', '.join(names) or 'no checkpoint'})")
    return run_dir / f"{name}{CHECKPOINT_SUFFIX}"


def eval_folder(run_dir: Path, name: str) -> Path:
    """Where the evaluation of checkpoint ``name`` is written."""
    return run_dir / EVAL_DIR / name


def evaluated(run_dir: Path) -> list[str]:
    """The checkpoints that have an evaluation folder (started or done), newest first."""
    base = run_dir / EVAL_DIR
    if not base.is_dir():
        return []
    folders = [p for p in base.iterdir()
               if p.is_dir() and ((p / "status.json").is_file() or (p / "metrics.json").is_file())]
    return [p.name for p in sorted(folders, key=lambda p: p.stat().st_mtime, reverse=True)]


def read_metrics(folder: Path) -> dict | None:
    """``metrics.json`` of an evaluation (``metrics`` and ``details``: the per-class tables), or None."""
    try:
        return json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class Figure:
    """A picture of the report: PNG bytes and its caption."""

    png: bytes
    caption: str = ""


@dataclass
class Section:
    """A report section: its title, text, tables (``{"header": [...], "rows": [[...]], "caption"}``), pictures."""

    title: str
    text: str = ""
    tables: list[dict] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


class _ReportParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self._text: list[str] | None = None
        self._where = ""
        self._row: list[str] | None = None
        self._table: dict | None = None
        self._figure: Figure | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(Section(""))
        elif not self.sections:
            return
        elif tag in ("h2", "p", "caption", "figcaption", "th", "td"):
            self._text, self._where = [], tag
        elif tag == "table":
            self._table = {"header": [], "rows": [], "caption": ""}
        elif tag == "tr":
            self._row = []
        elif tag == "img" and (attrs.get("src") or "").startswith("data:image/png;base64,"):
            self._figure = Figure(base64.b64decode(attrs["src"].split(",", 1)[1]))

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if not self.sections:
            return
        section = self.sections[-1]
        if tag == self._where and self._text is not None:
            text = "".join(self._text).strip()
            self._text = None
            if tag == "h2":
                section.title = text
            elif tag == "p":
                section.text = text
            elif tag == "caption" and self._table is not None:
                self._table["caption"] = text
            elif tag == "figcaption" and self._figure is not None:
                self._figure.caption = text
            elif tag in ("th", "td") and self._row is not None:
                self._row.append(text)
        elif tag == "tr" and self._row is not None and self._table is not None:
            key = "header" if not self._table["header"] else "rows"
            if key == "header":
                self._table["header"] = self._row
            else:
                self._table["rows"].append(self._row)
            self._row = None
        elif tag == "table" and self._table is not None:
            section.tables.append(self._table)
            self._table = None
        elif tag == "figure" and self._figure is not None:
            section.figures.append(self._figure)
            self._figure = None


def read_report(path: Path) -> list[Section]:
    """The sections of an evaluation report (empty when there is no report); parsed once per version of the file
    (a page asks for each of its pictures separately)."""
    try:
        stat = path.stat()
    except OSError:
        return []
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, size: int) -> list[Section]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    parser = _ReportParser()
    parser.feed(text)
    return parser.sections


def worst_section(sections: list[Section]) -> Section | None:
    """The report's worst-samples section (its pictures in the report's order: worst first)."""
    return next((s for s in sections if s.title.startswith(WORST_PREFIX)), None)


def confusion(sections: list[Section]) -> Section | None:
    """The report's confusion-matrix section (a picture; its counts table when the task writes one)."""
    return next((s for s in sections if s.title.startswith(CONFUSION_TITLE)), None)


def worst_figure(folder: Path, n: int) -> tuple[Figure, int]:
    """Picture ``n`` (0 = worst) of the worst-samples section of ``folder``'s report, and how many there are.

    Raises:
        NotFound: no report, or fewer pictures.
    """
    section = worst_section(read_report(folder / "report.html"))
    figures = section.figures if section else []
    if not 0 <= n < len(figures):
        raise NotFound(f"worst image {n}: the report of {folder.name} has {len(figures)}")
    return figures[n], len(figures)


# which images fall in each confusion cell: the evaluation's confusion_cells.json (oars.evaluation.confusion_cells)
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")
MAX_TABLE = 30  # classes up to which the page shows the whole clickable matrix; beyond, the largest confusions
NOT_RECORDED = ("this evaluation has no {file} (it was made before the evaluation recorded which images fall in "
                "each cell, or its task's report has no per-image matrix): cells are not clickable; evaluate the "
                "checkpoint again to click them")


def read_confusion_cells(folder: Path) -> tuple[ConfusionCells | None, str]:
    """The evaluation's cells and, when there are none, why (a line for the page).

    Returns:
        ``(cells, "")``, or ``(None, reason)``: no file (an evaluation from before the file existed), a file older
        than the report (left by an earlier evaluation whose report had a matrix) or a file the reader refuses
        (its message).
    """
    path = folder / CELLS_FILE
    try:
        stat = path.stat()
    except OSError:
        return None, NOT_RECORDED.format(file=CELLS_FILE)
    try:
        report_time = (folder / "report.html").stat().st_mtime_ns
    except OSError:
        report_time = 0
    if stat.st_mtime_ns < report_time:  # the hooks write the cells right after the report: this one is older
        return None, (f"{CELLS_FILE} is older than report.html (left by an earlier evaluation in {folder}; this "
                      "report has no per-image matrix): cells are not clickable")
    try:
        return _cells(str(path), stat.st_mtime_ns, stat.st_size), ""
    except CellsFileError as err:
        return None, f"{err}; cells are not clickable"


@lru_cache(maxsize=8)
def _cells(path: str, mtime_ns: int, size: int) -> ConfusionCells:
    return read_cells(path)


def cell_index(raw: str, name: str, cells: ConfusionCells) -> int:
    """A row or column number from a request (``i`` / ``j``), checked against the matrix.

    Raises:
        NotFound: not a whole number in ``0..C-1``.
    """
    n = len(cells.classes)
    value = int(raw) if raw.isdigit() else -1
    if not 0 <= value < n:
        raise NotFound(f"{name}={raw!r}: the confusion matrix has {n} rows and columns; {name} must be a number "
                       f"from 0 to {n - 1}")
    return value


def largest_cells(cells: ConfusionCells, count: int = 20) -> list[tuple[int, int, int, int]]:
    """The ``count`` off-diagonal cells with the most counts: ``(i, j, count, images)`` (for large matrices)."""
    off = [(i, j, c, k) for (i, j), (c, k) in cells.totals.items() if i != j and c > 0]
    return sorted(off, key=lambda t: -t[2])[:count]


@dataclass
class CellPicture:
    """Where a cell's image is shown from: the report's worst-images picture, a ``--show-dir`` picture in the
    evaluation folder, or the image file itself (nothing drawn); ``kind`` is None when there is none (and ``why``
    says why)."""

    kind: str | None
    png: bytes | None = None
    path: str = ""
    why: str = ""


def _caption_name(caption: str) -> str:
    """The file name a report caption starts with (``im0.png: mIoU 0.3``, ``img1.png (id 1): 2 missed``)."""
    return caption.split(": ", 1)[0].split(" (", 1)[0].strip()


def cell_picture(folder: Path, image: str) -> CellPicture:
    """How the page can show ``image`` (a path the evaluation recorded) of an evaluation in ``folder``."""
    base = Path(image).name
    section = worst_section(read_report(folder / "report.html"))
    for figure in section.figures if section else []:
        if base and _caption_name(figure.caption) == base:
            return CellPicture("report", png=figure.png)
    stem = Path(image).stem
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        shown = sub / f"{stem}.png"
        if stem and shown.is_file():
            return CellPicture("show-dir", path=str(shown))
    if Path(image).suffix.lower() not in PICTURE_SUFFIXES:
        return CellPicture(None, why="not a picture file (nothing to show)")
    return CellPicture("image", path=image)
