"""DetectionReportHook on a fake runner: the report exists, holds every section and embedded pictures."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import cv2
import numpy as np
import torch
from mmengine.structures import InstanceData

from detection.engine.report_hook import DetectionReportHook, build_report_sections, error_panel
from detection.evaluation import VOCMetric, image_errors, image_record
from detection.registry import HOOKS
from detection.structures import DetDataSample
from oars.evaluation.confusion_cells import read_cells

CLASSES = ('circle', 'square')


def _sample(img_path, img_id, gt_boxes, gt_labels, pred_boxes, scores, pred_labels, with_gt=True):
    ds = DetDataSample(metainfo={'img_id': img_id, 'img_path': img_path, 'ori_shape': (64, 64),
                                 'img_shape': (128, 128), 'scale_factor': (2.0, 2.0)})
    if with_gt:
        ds.gt_instances = InstanceData(bboxes=torch.tensor(gt_boxes, dtype=torch.float32).reshape(-1, 4) * 2,
                                       labels=torch.tensor(gt_labels, dtype=torch.int64))
        ds.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.int64))
    ds.pred_instances = InstanceData(bboxes=torch.tensor(pred_boxes, dtype=torch.float32).reshape(-1, 4),
                                     scores=torch.tensor(scores, dtype=torch.float32),
                                     labels=torch.tensor(pred_labels, dtype=torch.int64))
    return ds


def _fake_runner(tmp_path, metric, n):
    class DS:
        metainfo = {'classes': CLASSES, 'palette': [[220, 20, 60], [0, 128, 0]]}

        def __len__(self):
            return n

    return SimpleNamespace(test_dataloader=SimpleNamespace(dataset=DS()),
                           test_evaluator=SimpleNamespace(metrics=[metric], dataset_meta=DS.metainfo),
                           work_dir=str(tmp_path), logger=logging.getLogger('test_det_report_hook'))


def _images(tmp_path):
    paths = []
    for i in range(3):
        img = np.full((64, 64, 3), 40 * i, np.uint8)
        cv2.circle(img, (20, 20), 8, (255, 255, 255), -1)
        path = str(tmp_path / f'img{i}.png')
        cv2.imwrite(path, img)
        paths.append(path)
    return paths


def test_report_hook_writes_html(tmp_path):
    paths = _images(tmp_path)
    samples = [
        _sample(paths[0], 0, [[12, 12, 28, 28]], [0], [[12, 12, 28, 28]], [0.9], [0]),  # perfect
        _sample(paths[1], 1, [[12, 12, 28, 28], [40, 40, 60, 60]], [0, 1],
                [[12, 12, 28, 28], [2, 40, 20, 60]], [0.8, 0.7], [1, 1]),  # confused, missed, false
        _sample(paths[2], 2, [[40, 40, 60, 60]], [1], [[41, 41, 60, 60], [0, 0, 5, 5]], [0.6, 0.5], [1, 0]),
    ]
    metric = VOCMetric()
    metric.dataset_meta = {'classes': CLASSES}
    metric.process({}, [s.to_dict() for s in samples])
    metrics = metric.evaluate(3)
    runner = _fake_runner(tmp_path, metric, 3)

    hook = HOOKS.build(dict(type='DetectionReportHook', out_file='report/report.html', num_worst=2))
    assert isinstance(hook, DetectionReportHook) and hook.priority == 'LOW'
    hook.before_test(runner)
    hook.after_test_iter(runner, 0, None, samples[:2])
    hook.after_test_iter(runner, 1, None, samples[2:])
    hook.after_test_epoch(runner, metrics)
    text = (tmp_path / 'report' / 'report.html').read_text()
    for title in ('Metrics', 'VOCMetric per class', 'Precision-recall curves', 'Confusion matrix',
                  'Worst images (up to 2)'):
        assert f'<h2>{title}</h2>' in text
    assert 'pascal_voc/mAP' in text and 'background' in text and 'img1.png' in text
    assert 'img0.png' not in text  # error-free image is not among the worst
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 4  # PR, confusion, 2 worst images
    # confusion_cells.json (hand-counted): img1's circle called square, its missed circle and square, its false
    # square on background; img2's square found and its false circle; img0's circle found
    cells = read_cells(tmp_path / 'report' / 'confusion_cells.json')
    assert cells.classes == [*CLASSES, 'background'] and cells.unit == 'boxes'
    assert cells.images(0, 1) == [(paths[1], 1)] and cells.images(0, 2) == [(paths[1], 1)]
    assert cells.images(1, 2) == [(paths[1], 1)] and cells.images(2, 1) == [(paths[1], 1)]
    assert cells.images(1, 1) == [(paths[2], 1)] and cells.images(2, 0) == [(paths[2], 1)]
    assert cells.images(0, 0) == [(paths[0], 1)] and cells.images(1, 0) == [] and cells.images(2, 2) == []
    table = text[text.index('<h2>Confusion matrix</h2>'):]
    rows = re.findall(r'<tr><td>(\w+)</td>((?:<td>\d+</td>)+)</tr>', table[:table.index('</table>')])
    assert cells.matrix().tolist() == [[int(v) for v in re.findall(r'\d+', r[1])] for r in rows] \
        == [[1, 1, 1], [0, 1, 1], [1, 1, 0]]  # sum over images == the report's matrix


def test_build_sections_without_gt_and_panel(tmp_path):
    paths = _images(tmp_path)
    rec = image_record(_sample(paths[0], 0, [], [], [[1, 1, 9, 9]], [0.9], [0], with_gt=False), with_gt=False)
    cells = []
    sections = build_report_sections([rec], CLASSES, None, {'m': 1.0}, cells=cells)
    assert cells == []  # no ground truth: no matrix, no cells
    assert [s.title for s in sections] == ['Metrics', 'Error analysis']
    assert 'no ground truth' in sections[-1].text

    rec = image_record(_sample(paths[1], 1, [[12, 12, 28, 28]], [0], [[40, 40, 50, 50]], [0.9], [1]))
    errs = image_errors([rec])[0]
    img = cv2.imread(paths[1])
    panel = error_panel(img, rec, errs, CLASSES, np.array([[255, 0, 0], [0, 255, 0]], np.uint8), 0.3)
    assert panel.shape[0] > 64 and panel.shape[1] > 128  # caption bar, two panels side by side
    # a missing image file still gives a (grey) panel
    rec['img_path'] = str(tmp_path / 'gone.png')
    sections = build_report_sections([rec], CLASSES, None, {})
    assert sections[-1].images and 'gone.png' in sections[-1].images[0][0]
