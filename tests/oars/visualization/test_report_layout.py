"""Pictures that read well: the report's picture sections fill the page's width as a grid, training curves have
whole-number epoch ticks, and counts read "1 box" / "2 boxes" (oars_deploy.words.plural)."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from oars.analysis.logs import RunLog, plot_curves
from oars.visualization import ReportSection, render_html_report
from oars_deploy.words import plural, plural_noun


def test_several_pictures_sit_in_a_grid_that_uses_the_width():
    img = np.zeros((64, 96, 3), np.uint8)
    text = render_html_report('r', [ReportSection('Worst images (up to 8)', images=[(f'img{i}', img)
                                                                                     for i in range(8)]),
                                    ReportSection('Confusion matrix', images=[img])])
    assert 'grid-template-columns:repeat(auto-fill,minmax(360px,1fr))' in text
    worst, confusion = text.split('<h2>Worst images (up to 8)</h2>')[1].split('<h2>Confusion matrix</h2>')
    assert worst.count('<div class="grid">') == 1 and worst.count('<figure>') == 8
    assert '<div class="grid">' not in confusion  # a lone plot keeps its own size


def _epoch_ticks(monkeypatch, tmp_path, epochs: int) -> list[float]:
    seen = {}
    original = Figure.savefig

    def keep(fig, *args, **kwargs):
        seen['fig'] = fig
        return original(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', keep)
    run = RunLog('run', [], train=[{'loss': 1.0, 'iter': 1, 'step': 1}],
                 val=[{'mIoU': 10.0 * e, 'step': e} for e in range(1, epochs + 1)], by_epoch=True)
    plot_curves([run], ['mIoU'], str(tmp_path / f'c{epochs}.png'))
    ax = seen['fig'].axes[0]
    lo, hi = ax.get_xlim()
    assert ax.get_xlabel() == 'epoch'
    return [t for t in ax.get_xticks() if lo <= t <= hi]


@pytest.mark.parametrize('epochs', [2, 3, 7])
def test_epoch_ticks_are_whole_numbers(monkeypatch, tmp_path, epochs):
    ticks = _epoch_ticks(monkeypatch, tmp_path, epochs)
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


@pytest.mark.parametrize('n, noun, expected', [
    (1, 'box', '1 box'), (2, 'box', '2 boxes'), (0, 'image', '0 images'), (1, 'image', '1 image'),
    (3, 'class', '3 classes'), (2, 'category', '2 categories'), (2, 'day', '2 days'), (5, 'segment', '5 segments'),
])
def test_plural(n, noun, expected):
    assert plural(n, noun) == expected


def test_plural_irregular_and_noun():
    assert plural(2, 'child', 'children') == '2 children' and plural(1, 'child', 'children') == '1 child'
    assert plural_noun('match') == 'matches' and plural_noun('dish') == 'dishes'
