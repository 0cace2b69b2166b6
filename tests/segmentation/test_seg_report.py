"""``--report`` for segmentation: oars.engine.entry.evaluate(report=True) on a tiny U-Net and 3 synthetic images
writes report.html with every section and embedded pictures (with TTA from the config), and the hook ranks images
by their own mIoU (checked against hand-computed matrices)."""

from __future__ import annotations

import logging
import os
import re
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.structures import PixelData
from PIL import Image

from oars.evaluation.confusion import confusion_matrix
from oars.evaluation.confusion_cells import read_cells
from segmentation.engine import SegmentationReportHook
from segmentation.engine.report_hook import build_report_sections
from segmentation.evaluation import IoUMetric, batch_confusions
from segmentation.registry import HOOKS
from segmentation.structures import SegDataSample

IMG = r'src="data:image/png;base64,'
CLASSES = ('background', 'circle', 'square', 'triangle')


def _write_images(root: str) -> None:
    """3 images 96x80 (BGR PNG) with one shape each, and palette-free index PNG labels (255 = ignored border)."""
    os.makedirs(f'{root}/images/val'), os.makedirs(f'{root}/labels/val')
    rng = np.random.default_rng(0)
    for i in range(3):
        img = rng.integers(0, 60, (96, 80, 3), dtype=np.uint8)
        label = np.zeros((96, 80), np.uint8)
        cv2.rectangle(label, (10 + 5 * i, 12), (50 + 5 * i, 60), i + 1, -1)
        label[:2] = 255
        img[label == i + 1] = (40 * i + 100, 200, 90)
        cv2.imwrite(f'{root}/images/val/im{i}.png', img)
        Image.fromarray(label).save(f'{root}/labels/val/im{i}.png')


@pytest.mark.slow
def test_eval_report_end_to_end(tmp_path):
    from mmengine.registry import DefaultScope

    from oars.engine.entry import evaluate, load
    from segmentation.registry import MODELS

    data = str(tmp_path / 'data')
    _write_images(data)
    opts = demo_overrides(data, **{'test_dataloader.batch_size': 2, 'model.backbone.num_stages': 3,
                                   'test_evaluator.iou_metrics': '[mIoU, mDice, Kappa]',
                                   'model.test_cfg.aug': '{scales: [0.75, 1.0], flip: true}'})
    cfg = load(DEMO_CFG, opts)
    with DefaultScope.overwrite_default_scope('segmentation'):
        torch.manual_seed(0)
        model = MODELS.build(cfg.model)
    assert model.test_cfg['aug']['scales'] == [0.75, 1.0]
    ckpt = str(tmp_path / 'model.pth')
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, ckpt)

    result = evaluate(DEMO_CFG, ckpt, opts, work_dir=str(tmp_path / 'work'), report=True)
    assert result['report_file'] == str(tmp_path / 'work' / 'report.html')
    assert {'aAcc', 'mIoU', 'mDice', 'Kappa'} <= set(result['metrics'])
    text = (tmp_path / 'work' / 'report.html').read_text()
    for title in ('Metrics', 'IoUMetric per class', 'Per-class IoU', 'Confusion matrix', 'Worst images (up to 8)'):
        assert f'<h2>{title}</h2>' in text
    assert '<title>Segmentation report</title>' in text and '<td>Kappa</td>' in text
    assert len(re.findall(IMG, text)) == 2 + 3  # IoU bars, confusion matrix, 3 worst images
    captions = re.findall(r'<figcaption>(im\d\.png): mIoU ([0-9.]+)</figcaption>', text)
    assert sorted(c[0] for c in captions) == ['im0.png', 'im1.png', 'im2.png']
    values = [float(c[1]) for c in captions]
    assert values == sorted(values)  # lowest first
    # confusion_cells.json beside the report: its totals are the report's counts table, every image in it once
    cells = read_cells(tmp_path / 'work' / 'confusion_cells.json')
    table = text[text.index('<h2>Confusion matrix'):]
    rows = re.findall(r'<tr><td>(\w+)</td>((?:<td>\d+</td>)+)</tr>', table[:table.index('</table>')])
    assert [r[0] for r in rows] == list(CLASSES) and cells.classes == list(CLASSES) and cells.unit == 'pixels'
    assert cells.matrix().tolist() == [[int(v) for v in re.findall(r'\d+', r[1])] for r in rows]
    images = {name for key in cells.cells for name, _ in cells.cells[key]}
    assert images == {f'{data}/images/val/im{i}.png' for i in range(3)}


def _sample(path: str, pred: np.ndarray, gt: np.ndarray | None) -> SegDataSample:
    ds = SegDataSample(metainfo={'img_path': path, 'ori_shape': pred.shape})
    ds.pred_sem_seg = PixelData(data=torch.as_tensor(pred).long()[None])
    if gt is not None:
        ds.gt_sem_seg = PixelData(data=torch.as_tensor(gt).to(torch.uint8)[None])
    return ds


def _fake_runner(tmp_path, metric, n):
    class DS:
        metainfo = {'classes': CLASSES[:3], 'palette': [[0, 0, 0], [230, 25, 75], [60, 180, 75]]}

        def __len__(self):
            return n

    return SimpleNamespace(test_dataloader=SimpleNamespace(dataset=DS()),
                           test_evaluator=SimpleNamespace(metrics=[metric], dataset_meta=DS.metainfo),
                           work_dir=str(tmp_path), logger=logging.getLogger('test_seg_report'))


def test_hook_ranks_images_by_their_miou(tmp_path):
    gt = np.zeros((4, 6), np.int64)
    gt[:, 3:] = 1
    gt[0, 0] = 255
    perfect = gt.copy()
    perfect[0, 0] = 0
    half = gt.copy()
    half[:2, 3:] = 2  # half of class 1 called 2: IoU bg 1, fg 1/2, c 0 -> 0.5
    wrong = np.full_like(gt, 2)  # IoU 0, 0, 0 -> 0
    odd = np.zeros((5, 3), np.int64)  # another size in the same batch
    img = str(tmp_path / 'real.png')
    cv2.imwrite(img, np.full((4, 6, 3), 90, np.uint8))
    samples = [_sample(img, perfect, gt), _sample('/nope/wrong.png', wrong, gt),
               _sample('/nope/half.png', half, gt), _sample('/nope/odd.png', odd, odd),
               _sample('/nope/unlabelled.png', perfect, None)]

    # the batched matrices equal the shared per-image confusion_matrix
    preds = [torch.as_tensor(a) for a in (perfect, wrong, half, odd)]
    gts = [torch.as_tensor(a) for a in (gt, gt, gt, odd)]
    cms = batch_confusions(preds, gts, 3, 255)
    for i in range(4):
        assert torch.equal(cms[i], confusion_matrix(preds[i], gts[i], 3, 255))
    with pytest.raises(ValueError, match=r'prediction contains values \[7\]'):
        batch_confusions([torch.full((2, 2), 7)], [torch.zeros(2, 2)], 3)

    metric = IoUMetric()
    metric.dataset_meta = {'classes': CLASSES[:3]}
    metric.process({}, [s.to_dict() for s in samples[:4]])
    metrics = metric.evaluate(4)
    hook = HOOKS.build(dict(type='EvaluationReportHook', out_file='rep/report.html', num_worst=2))
    assert isinstance(hook, SegmentationReportHook) and hook.priority == 'LOW'
    runner = _fake_runner(tmp_path, metric, len(samples))
    hook.before_test(runner)
    hook.after_test_iter(runner, 0, None, samples[:3])
    hook.after_test_iter(runner, 1, None, samples[3:])
    assert hook._mious[:4] == pytest.approx([1.0, 0.0, 0.5, 1.0])
    hook.after_test_epoch(runner, metrics)
    text = (tmp_path / 'rep' / 'report.html').read_text()
    assert text.index('wrong.png: mIoU 0.000') < text.index('half.png: mIoU 0.500')
    assert 'real.png' not in text and 'odd.png' not in text
    assert len(re.findall(IMG, text)) == 4  # bars, confusion matrix, 2 worst images
    assert '<td>background</td><td>' in text  # counts table of the confusion matrix
    # which images fall in each cell (hand-counted): gt 1 called 2 is all of wrong's 12 and half's 6 pixels
    cells = read_cells(tmp_path / 'rep' / 'confusion_cells.json')
    assert cells.images(1, 2) == [('/nope/wrong.png', 12), ('/nope/half.png', 6)]
    assert cells.images(0, 2) == [('/nope/wrong.png', 11)]  # the ignored pixel is in no cell
    assert cells.images(0, 0) == [('/nope/odd.png', 15), (img, 11), ('/nope/half.png', 11)]  # ties: input order
    assert cells.images(2, 1) == [] and cells.total(1, 2) == (18, 2)
    assert torch.equal(torch.as_tensor(cells.matrix()), metric.confusion)  # sum over images == the report's matrix
    assert 'unlabelled.png' not in (tmp_path / 'rep' / 'confusion_cells.json').read_text()

    sections = build_report_sections({'aAcc': 1.0}, CLASSES, None)
    assert [s.title for s in sections] == ['Metrics', 'Error analysis']
    with pytest.raises(ValueError, match='num_worst must be an int >= 0'):
        SegmentationReportHook(out_file='x.html', num_worst=-1)
