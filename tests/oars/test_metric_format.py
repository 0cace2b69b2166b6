"""One number format for every table (issue 37): three decimals in the terminal and in report.html, the unit named
in the summary's header and in each per-class table's caption."""

from __future__ import annotations

import math

import pytest

from oars.evaluation.report import FRACTION_NOTE, VALUE_HEADER, format_metrics, format_number, format_table
from oars.visualization import ReportSection, render_html_report


@pytest.mark.parametrize(("value", "text"), [
    (0.51234567, "0.512"), (1.0, "1.000"), (0.0, "0.000"), (-0.25, "-0.250"), (28.73456, "28.735"),
    (2e-05, "2e-05"), (float("nan"), "-"),
])
def test_format_number(value, text):
    assert format_number(value) == text


def test_terminal_and_html_tables_write_the_same_number():
    table = format_table(["class", "AP"], [["cat", 0.75], ["dog", math.nan]])
    assert "| cat   | 0.750 |" in table and "| dog   | -     |" in table
    html = render_html_report("r", [ReportSection("t", tables=[{"header": ["class", "AP"], "rows": [["cat", 0.75]],
                                                                  "caption": FRACTION_NOTE}])])
    assert "<td>0.750</td>" in html and f"<caption>{FRACTION_NOTE}</caption>" in html


def test_format_metrics_names_the_unit():
    text = format_metrics({"metrics": {"mIoU": 0.8393}, "details": {
        "IoUMetric per class": {"header": ["class", "IoU"], "rows": [["a", 0.5]], "caption": FRACTION_NOTE}}})
    assert VALUE_HEADER in text and "0.839" in text and "83.9" not in text
    assert f"IoUMetric per class ({FRACTION_NOTE}):" in text and "| a     | 0.500 |" in text
