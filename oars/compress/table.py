"""The variant table of a compression work dir: one row per variant (the original, each pruned, QAT or distilled
model), written as ``DIR/compression.json`` (the data) and ``DIR/compression.md`` (for people), printed, and put
into ``DIR/report.html`` as a section when the work dir has a report.

Any compression method adds its row with :func:`add_row`; a row with the same variant name replaces the earlier one
(re-running a method updates its row instead of duplicating it). Every write is atomic.
"""

from __future__ import annotations

import html
import json
import os.path as osp
from typing import Any

from oars.errors import OarsError
from oars.evaluation.report import format_table
from oars_deploy.atomic import atomic_write

JSON_FILE, MD_FILE, REPORT_FILE = "compression.json", "compression.md", "report.html"
# (key, column title): what every row may hold; absent values show as "-".
COLUMNS = (
    ("variant", "variant"),
    ("method", "method"),
    ("params", "params"),
    ("flops", "GFLOPs"),
    ("latency_fp32_ms", "ORT FP32 ms"),
    ("latency_int8_ms", "ORT INT8 ms"),
    ("size_mb", "size MB"),
    ("metric", "metric"),
    ("metric_value", "value"),
)
_MARK_START, _MARK_END = "<!-- oars:compression -->", "<!-- /oars:compression -->"


def read_rows(work_dir: str) -> list[dict[str, Any]]:
    """The rows recorded in ``work_dir`` so far (empty when none).

    Raises:
        OarsError: ``compression.json`` exists but is not the table (names the file).
    """
    path = osp.join(work_dir, JSON_FILE)
    if not osp.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        rows = data["rows"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "variant" in r for r in rows):
            raise ValueError("rows must be a list of objects with a 'variant'")
    except (ValueError, KeyError, TypeError) as err:
        raise OarsError(f"{path}: not a compression table ({err}); move it away to start a new one") from None
    return rows


def add_row(work_dir: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Add (or replace, by ``row['variant']``) one variant and rewrite the table files; returns all rows.

    Args:
        work_dir: the compression work dir.
        row: ``variant`` (required), and any of ``method``, ``params`` (int), ``flops`` (per input, float),
            ``latency_fp32_ms``/``latency_int8_ms`` (ONNX Runtime CPU median), ``size_mb`` (file on disk),
            ``metric``/``metric_value`` (the validation metric), plus free keys kept in the JSON only.

    Raises:
        OarsError: the row has no variant name.
    """
    if not row.get("variant"):
        raise OarsError(f"compression table: a row needs a 'variant' name, got {row!r}")
    rows = [r for r in read_rows(work_dir) if r["variant"] != row["variant"]]
    rows.append(dict(row))
    rows.sort(key=lambda r: (r["variant"] != "original",))  # the original first, then in the order added
    atomic_write(osp.join(work_dir, JSON_FILE), json.dumps({"rows": rows}, indent=2, default=str) + "\n")
    atomic_write(osp.join(work_dir, MD_FILE), "# Compression variants\n\n" + markdown_table(rows) + "\n")
    _update_report(work_dir, rows)
    return rows


def has_row(work_dir: str, variant: str) -> bool:
    """Whether the table already has a row named ``variant``."""
    return any(r["variant"] == variant for r in read_rows(work_dir))


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "flops":
        return f"{float(value) / 1e9:.4g}"
    if key == "params":
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells of the table (shared by the Markdown, terminal and HTML forms). A row whose
    metric was measured on something other than the PyTorch checkpoint (``metric_of``: PTQ's, on its INT8 export)
    says so in the metric cell."""
    def cell(row: dict[str, Any], key: str) -> str:
        text = _cell(key, row.get(key))
        return f"{text} ({row['metric_of']})" if key == "metric" and row.get("metric_of") else text

    return [title for _, title in COLUMNS], [[cell(r, k) for k, _ in COLUMNS] for r in rows]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    header, cells = table_cells(rows)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    return "\n".join(lines)


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width terminal table."""
    header, cells = table_cells(rows)
    return format_table(header, cells)


def html_section(rows: list[dict[str, Any]]) -> str:
    """The table as an HTML section, between markers so a later write replaces it."""
    header, cells = table_cells(rows)
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in cells)
    return (f"{_MARK_START}<section><h2>Compression variants</h2><table>{head}{body}</table>"
            f"<p>FLOPs per input of one forward; latency: ONNX Runtime CPU, median; size: the exported ONNX file "
            f"(else the checkpoint).</p></section>{_MARK_END}")


def _update_report(work_dir: str, rows: list[dict[str, Any]]) -> None:
    """Put the table into ``work_dir/report.html`` when there is one (replacing an earlier table section)."""
    path = osp.join(work_dir, REPORT_FILE)
    if not osp.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = html_section(rows)
    start, end = text.find(_MARK_START), text.find(_MARK_END)
    if start != -1 and end > start:
        text = text[:start] + section + text[end + len(_MARK_END):]
    elif "</body>" in text:
        text = text.replace("</body>", section + "\n</body>", 1)
    else:
        text += section
    atomic_write(path, text)
