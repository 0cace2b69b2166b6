"""The self-contained HTML report and the PR-curve plot it embeds."""

import base64
import re

import cv2
import numpy as np
import pytest

from oars.visualization import ReportSection, plot_pr_curves, render_html_report, write_html_report


def test_report_embeds_tables_and_images(tmp_path):
    img = np.zeros((20, 30, 3), np.uint8)
    img[5:10, 5:25] = (0, 0, 255)
    sections = [
        ReportSection('Metrics <all>', text='a & b', tables=[{'header': ['metric', 'value'],
                                                              'rows': [['mAP', 0.51234567], ['x', float('nan')],
                                                                       ['lr', 2e-05]],
                                                              'caption': 'summary'}]),
        ReportSection('Pictures', images=[img, ('second <img>', img[..., 0])]),
    ]
    out = write_html_report(tmp_path / 'sub' / 'report.html', 'Report <1>', sections)
    text = (tmp_path / 'sub' / 'report.html').read_text()
    assert out.endswith('report.html') and text.startswith('<!DOCTYPE html>')
    assert '<h1>Report &lt;1&gt;</h1>' in text and 'Metrics &lt;all&gt;' in text and 'a &amp; b' in text
    assert '<td>0.512</td>' in text and '<td>2e-05</td>' in text  # 3 decimals; too small for them: 3 digits
    assert '<td>-</td>' in text and '<caption>summary</caption>' in text
    assert 'second &lt;img&gt;' in text
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(uris) == 2
    back = cv2.imdecode(np.frombuffer(base64.b64decode(uris[0]), np.uint8), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(back, img)
    assert 'http' not in text.lower().replace('http-equiv', '')  # no external assets
    assert not list((tmp_path / 'sub').glob('.report-*'))  # temporary file renamed away


def test_report_errors():
    with pytest.raises(ValueError, match="'header' and 'rows'"):
        render_html_report('t', [ReportSection('s', tables=[{'rows': []}])])
    with pytest.raises(ValueError, match='uint8'):
        render_html_report('t', [ReportSection('s', images=[np.zeros((4, 4, 3), np.float32)])])


def test_pr_curves_plot(tmp_path):
    r = np.linspace(0, 1, 11)
    curves = {'cat': (r, 1 - 0.5 * r), 'dog': (r, np.full(11, np.nan)), 'bird': (np.array([]), np.array([]))}
    out = tmp_path / 'pr.png'
    img = plot_pr_curves(curves, ap={'cat': 0.75, 'dog': float('nan')}, out_path=out)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert cv2.imread(str(out)).shape == img.shape
    with pytest.raises(ValueError, match='empty'):
        plot_pr_curves({})
    with pytest.raises(ValueError, match='recall'):
        plot_pr_curves({'cat': (r, r[:3])})
