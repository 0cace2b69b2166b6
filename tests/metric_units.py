"""One unit everywhere (issue 37): a metric's value in metrics.json, in report.html's metrics table and in the logged
line of the same run agree, and proportions are fractions 0-1 with the unit named (docs/training.md, "Metrics")."""

from __future__ import annotations

import html as html_lib
import json
import math
import re
from pathlib import Path

from oars.evaluation.report import FRACTION_NOTE, format_number


def report_cell(report: str, key: str) -> str:
    """The value cell of ``key``'s row in the report's metrics table (the report writes ``<td>key</td><td>v</td>``)."""
    found = re.search(rf"<tr><td>{re.escape(html_lib.escape(key))}</td><td>([^<]*)</td>", report)
    assert found, f"{key!r} is not a row of the report's metrics table"
    return found.group(1)


def logged_value(log: str, key: str) -> float:
    """The last value mmengine logged for ``key`` (``key: 0.1234`` on the Epoch(test) line)."""
    values = re.findall(rf"(?<![\w/@.]){re.escape(key)}: (-?[0-9.]+(?:e-?[0-9]+)?)", log)
    assert values, f"{key!r} was not logged"
    return float(values[-1])


def assert_one_unit(work: Path, log: str, key: str, fraction: bool = True) -> float:
    """``key`` in ``work``/metrics.json equals the report's cell (as ``format_number`` writes it) and the logged
    value (4 decimals); with ``fraction`` it lies in [0, 1], the report says so and every per-class table of
    ``details`` is captioned as fractions with its numbers in [0, 1]. Returns the value."""
    result = json.loads((work / "metrics.json").read_text())
    value = float(result["metrics"][key])
    report = (work / "report.html").read_text()
    assert report_cell(report, key) == format_number(value), (key, value)
    assert abs(logged_value(log, key) - value) <= 5e-5 + 1e-9, (key, value)
    if fraction:
        assert 0.0 <= value <= 1.0, (key, value)
        assert f"<caption>{html_lib.escape(FRACTION_NOTE)}</caption>" in report
        for name, table in (result.get("details") or {}).items():
            assert table.get("caption") == FRACTION_NOTE, name
            numbers = [v for row in table["rows"] for v in row[1:] if isinstance(v, float) and not math.isnan(v)]
            assert all(0.0 <= v <= 1.0 for v in numbers), (name, numbers)
    return value
