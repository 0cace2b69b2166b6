"""Plain-text tables of evaluation results for the terminal."""

from __future__ import annotations

import math


def format_table(header: list[str], rows: list[list[object]]) -> str:
    """A fixed-width table; floats with two decimals, NaN shown as ``-``."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.2f}"
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
    """The summary metrics and, when present, each per-class table in ``result['details']``."""
    metrics = result.get("metrics", {})
    parts = [format_table(["metric", "value"], [[k, v] for k, v in metrics.items()])]
    for name, table in (result.get("details") or {}).items():
        if isinstance(table, dict) and "header" in table and "rows" in table:
            parts.append(f"{name}:\n" + format_table(table["header"], table["rows"]))
    return "\n".join(parts)
