"""A self-contained HTML report: title, then sections of text, tables and images (PNG embedded as base64).

No external assets, scripts or fonts, so the file can be mailed or archived alone. Written atomically
(temporary file + rename): a reader never sees half a report.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from oars.evaluation.report import format_number
from oars_deploy.atomic import atomic_write

_CSS = """body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:18px;margin-top:28px;
border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;
padding:3px 8px;text-align:right}th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:6px 12px 12px 0;vertical-align:top}figcaption{font-size:13px;color:#555}
img{max-width:100%;border:1px solid #ddd}caption{text-align:left;font-weight:bold;padding:2px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:16px;align-items:start}
.grid figure{margin:0;display:block}.grid img{width:100%;height:auto;image-rendering:auto}"""


@dataclass
class ReportSection:
    """One ``<h2>`` section. ``tables``: ``{'header': [...], 'rows': [[...], ...]}`` (optional ``'caption'``),
    the shape of ``per_class_table()``. ``images``: BGR uint8 arrays or ``(caption, array)`` pairs."""

    title: str
    text: str = ''
    tables: list[Mapping[str, Any]] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)


def _cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return format_number(float(value))  # the terminal tables' format: one number reads the same everywhere
    return html.escape(str(value))


def _table_html(table: Mapping[str, Any]) -> str:
    if 'header' not in table or 'rows' not in table:
        raise ValueError(f"html report: a table must have 'header' and 'rows', got keys {sorted(table)}")
    parts = ['<table>']
    if table.get('caption'):
        parts.append(f"<caption>{html.escape(str(table['caption']))}</caption>")
    parts.append('<tr>' + ''.join(f'<th>{html.escape(str(h))}</th>' for h in table['header']) + '</tr>')
    for row in table['rows']:
        parts.append('<tr>' + ''.join(f'<td>{_cell(v)}</td>' for v in row) + '</tr>')
    parts.append('</table>')
    return '\n'.join(parts)


def png_data_uri(img: np.ndarray) -> str:
    """A BGR (or grayscale) uint8 image as a ``data:image/png;base64,...`` URI."""
    arr = np.asarray(img)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3):
        raise ValueError(f'html report: images must be uint8 (H, W) or (H, W, 3) arrays, got shape '
                         f'{tuple(arr.shape)} dtype {arr.dtype}')
    ok, buf = cv2.imencode('.png', arr)
    if not ok:
        raise ValueError(f'html report: could not encode an image of shape {tuple(arr.shape)} as PNG')
    return 'data:image/png;base64,' + base64.b64encode(buf.tobytes()).decode('ascii')


def _image_html(item: Any) -> str:
    caption, img = item if isinstance(item, tuple) else ('', item)
    cap = f'<figcaption>{html.escape(str(caption))}</figcaption>' if caption else ''
    return f'<figure><img src="{png_data_uri(img)}" alt="{html.escape(str(caption))}">{cap}</figure>'


def render_html_report(title: str, sections: Sequence[ReportSection]) -> str:
    """The report as one HTML string."""
    body = [f'<h1>{html.escape(title)}</h1>']
    for sec in sections:
        body.append(f'<section><h2>{html.escape(sec.title)}</h2>')
        if sec.text:
            body.append(f'<p>{html.escape(sec.text)}</p>')
        body += [_table_html(t) for t in sec.tables]
        if sec.images:  # several pictures (the worst images): a grid of columns at least 360 px wide that fills
            # the page's width, each picture scaled to its column; one picture (a plot) keeps its own size
            opening = '<div class="grid">' if len(sec.images) > 1 else '<div>'
            body.append(opening + ''.join(_image_html(i) for i in sec.images) + '</div>')
        body.append('</section>')
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f'<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n'
            + '\n'.join(body) + '\n</body></html>\n')


def write_html_report(path: str | os.PathLike, title: str, sections: Sequence[ReportSection]) -> str:
    """Write the report to ``path`` atomically (parent folders created, normal permissions); returns the path."""
    return atomic_write(path, render_html_report(title, sections))


MAX_CONFUSION_TABLE = 30  # classes up to which a confusion matrix's counts are also written as a table


def confusion_section(confusion: np.ndarray, names: Sequence[str], title: str, row_label: str,
                      text: str) -> ReportSection:
    """The report's confusion-matrix section (detection, segmentation and video share it): the matrix normalised
    per row as a picture and, up to ``MAX_CONFUSION_TABLE`` classes, its counts as a table.

    Args:
        confusion: int [C, C] counts, rows = ground truth / true class, columns = prediction.
        names: the C class names.
        title: the picture's title; row_label: the table's corner label (e.g. ``'gt \\\\ pred'``); text: the caption.
    """
    from .plots import plot_confusion_matrix

    image = plot_confusion_matrix(np.asarray(confusion), list(names), normalize=True, title=title)
    tables = []
    if len(names) <= MAX_CONFUSION_TABLE:
        rows = [[n, *row] for n, row in zip(names, np.asarray(confusion).tolist())]
        tables.append({'header': [row_label, *names], 'rows': rows, 'caption': 'counts'})
    return ReportSection('Confusion matrix', text=text, tables=tables, images=[image])
