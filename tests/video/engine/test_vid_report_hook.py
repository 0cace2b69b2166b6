"""VideoReportHook on a fake runner: report.html holds the metric table, per-class bars, confusion matrix and the
worst clips' strips (lowest true-class probability first); multi-label runs get per-class AP bars instead."""

from __future__ import annotations

import re

import pytest
import torch
from test_vid_pictures_hook import CLASSES, fake_runner, frames_nchw, sample

from oars.evaluation.confusion_cells import read_cells
from oars.evaluation.report import format_number
from video.engine import VideoReportHook
from video.engine.report_hook import build_report_sections
from video.evaluation import AccMetric, MultiLabelMetric
from video.registry import HOOKS
from video.structures import ActionDataSample

IMG = r'src="data:image/png;base64,'


def _run(tmp_path, hook, metric, samples, batches):
    metric.dataset_meta = {'classes': CLASSES}
    metric.process({}, [s.to_dict() for s in samples])
    metrics = metric.evaluate(len(samples))
    runner = fake_runner(tmp_path, [metric], len(samples))
    hook.before_test(runner)
    i = 0
    for b, size in enumerate(batches):
        part = samples[i: i + size]
        hook.after_test_iter(runner, b, {'inputs': [frames_nchw(8, offset=j) for j in range(size)]}, part)
        i += size
    hook.after_test_epoch(runner, metrics)
    return metrics


def test_report_single_label(tmp_path):
    samples = [
        sample('good', [0.1, 0.8, 0.1], 1, frame_inds=[0]),
        sample('bad', [0.9, 0.07, 0.03], 2, frame_inds=[0]),  # p(true) 0.03: the worst
        sample('meh', [0.5, 0.3, 0.2], 1, frame_inds=[0]),  # p(true) 0.3
        sample('fine', [0.7, 0.2, 0.1], 0, frame_inds=[0]),
    ]
    hook = HOOKS.build(dict(type='EvaluationReportHook', out_file='report/report.html', num_worst=2))
    assert isinstance(hook, VideoReportHook) and hook.priority == 'LOW'
    metrics = _run(tmp_path, hook, AccMetric(topk=(1, 2)), samples, [3, 1])
    text = (tmp_path / 'report' / 'report.html').read_text()
    for title in ('Metrics', 'AccMetric per class', 'Per-class accuracy', 'Confusion matrix',
                  'Worst clips (up to 2)'):
        assert f'<h2>{title}</h2>' in text
    assert 'acc/top1' in text and 'acc/mean_class_accuracy' in text
    assert f"<td>{format_number(metrics['acc/top1'])}</td>" in text and 'all metrics are fractions 0–1' in text
    # worst clips: bad (0.03) then meh (0.3); good and fine are not shown
    assert text.index('bad.mp4: p(true) = 0.030') < text.index('meh.mp4: p(true) = 0.300')
    assert 'good.mp4' not in text and 'fine.mp4' not in text
    assert len(re.findall(IMG, text)) == 4  # bars, confusion matrix, 2 strips
    # confusion_cells.json: which clip is in each cell (true row, top-1 column); the sum is the matrix
    cells = read_cells(tmp_path / 'report' / 'confusion_cells.json')
    assert cells.unit == 'clips' and cells.classes == list(CLASSES)
    names = {(i, j): [(n.rsplit('/', 1)[-1], c) for n, c in cells.images(i, j)] for i in range(3) for j in range(3)}
    assert names[2, 0] == [('bad.mp4', 1)] and names[1, 0] == [('meh.mp4', 1)]
    assert names[1, 1] == [('good.mp4', 1)] and names[0, 0] == [('fine.mp4', 1)]
    assert cells.matrix().tolist() == [[1, 0, 0], [1, 1, 0], [1, 0, 0]]


def test_report_multi_label_and_without_gt(tmp_path):
    samples = []
    for name, scores, ids in (('a', [0.9, 0.1, 0.8], [0, 2]), ('b', [0.2, 0.6, 0.1], [0]), ('c', [0.1, 0.9, 0.2], [1])):
        ds = ActionDataSample(metainfo={'filename': f'/v/{name}.mp4'})
        ds.set_gt_label(ids, num_classes=3, multi_label=True)
        ds.pred_score = torch.tensor(scores)
        samples.append(ds)
    hook = VideoReportHook(out_file=str(tmp_path / 'r.html'), num_worst=1)
    _run(tmp_path, hook, MultiLabelMetric(), samples, [3])
    text = (tmp_path / 'r.html').read_text()
    assert '<h2>Per-class AP</h2>' in text and 'multilabel/gap' in text and '<h2>Confusion matrix</h2>' not in text
    assert 'b.mp4: p(true) = 0.200' in text  # its only true class scored 0.2
    assert len(re.findall(IMG, text)) == 2  # AP bars, 1 strip
    assert not (tmp_path / 'confusion_cells.json').exists()  # no matrix, no cells

    sections = build_report_sections([{'true': None, 'pred': 0}], CLASSES, {'acc/top1': 1.0})
    assert [s.title for s in sections] == ['Metrics', 'Error analysis']
    with pytest.raises(ValueError, match='num_worst'):
        VideoReportHook(out_file='x.html', num_worst=-1)
