"""Plain-text tables of evaluation results for the terminal, and the one number format every table shares.

The unit convention (docs/training.md, "Metrics"): every score that is a proportion (AP, AR, IoU, Dice, accuracy,
recall, AUC, ...) is a fraction in [0, 1], as pycocotools, ultralytics and the Paddle suites report it, written with
three decimals. The terminal tables here and the HTML report (``oars.visualization.html_report``) both format
numbers with ``format_number`` so that a value reads the same in the log, the report and ``metrics.json``.
"""

from __future__ import annotations

import math

FRACTION_NOTE = "all metrics are fractions 0–1"
"""The caption that labels a table of fractions (per-class tables, the metrics table of a report)."""
VALUE_HEADER = "value (AP/IoU/accuracy as fractions 0–1)"
"""The value column's header of a summary table that may mix fractions with other units (PSNR in dB, FID)."""


def format_number(value: float) -> str:
    """A float as tables show it: three decimals (``0.512``); NaN as ``-``; values too small for three decimals
    (a learning rate, 1e-05) keep three significant digits instead of reading ``0.000``."""
    v = float(value)
    if math.isnan(v):
        return "-"
    if v != 0.0 and abs(v) < 0.0005:
        return f"{v:.3g}"
    return f"{v:.3f}"


def format_table(header: list[str], rows: list[list[object]]) -> str:
    """A fixed-width table; floats as ``format_number`` writes them (NaN shown as ``-``)."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return format_number(v)
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    out = [line, fmt.format(*header), line]
    out += [fmt.format(*r) for r in cells]
    out.append(line)
    return "\n".join(out)


def format_metrics(result: dict) -> str:
    """The summary metrics and, when present, each per-class table in ``result['details']`` (with its caption,
    which names the unit)."""
    metrics = result.get("metrics", {})
    parts = [format_table(["metric", VALUE_HEADER], [[k, v] for k, v in metrics.items()])]
    for name, table in (result.get("details") or {}).items():
        if isinstance(table, dict) and "header" in table and "rows" in table:
            caption = f" ({table['caption']})" if table.get("caption") else ""
            parts.append(f"{name}{caption}:\n" + format_table(table["header"], table["rows"]))
    return "\n".join(parts)
