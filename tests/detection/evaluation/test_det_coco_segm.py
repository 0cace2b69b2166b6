"""CocoMetric(metric='segm'): equal to a direct pycocotools COCOeval(iouType='segm') run on a hand-made case, from
the annotation file (polygons, a crowd RLE) and from gt masks carried by the samples; masks kept as RLE."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch
from mmengine.evaluator import Evaluator
from mmengine.structures import InstanceData
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detection.evaluation import CocoMetric
from detection.structures import DetDataSample
from oars.errors import DataError

CLASSES = ('cat', 'dog')
CAT_IDS = (3, 7)
H, W = 60, 80
SEGM_KEYS = ('segm_mAP', 'segm_mAP_50', 'segm_mAP_75', 'segm_mAP_s', 'segm_mAP_m', 'segm_mAP_l',
             'segm_AR@1', 'segm_AR@10', 'segm_AR@100', 'segm_AR_s@100', 'segm_AR_m@100', 'segm_AR_l@100')


def _polygon(x, y, w, h):
    return [x, y, x + w, y, x + w * 0.8, y + h, x, y + h * 0.7]


def _crowd_rle():
    m = np.zeros((H, W), np.uint8)
    m[40:58, 50:78] = 1
    flat = m.ravel(order='F')
    change = np.flatnonzero(np.diff(np.r_[0, flat, 1 - flat[-1]]))
    return {'counts': np.diff(np.r_[0, change]).tolist(), 'size': [H, W]}


def _gt_json() -> dict:
    segs = {  # image id -> [(category, segmentation, iscrowd)]
        1: [(3, [_polygon(5, 5, 20, 15)], 0), (7, [_polygon(30, 10, 30, 25), _polygon(65, 40, 10, 12)], 0),
            (3, [_polygon(2, 35, 6, 5)], 0), (7, _crowd_rle(), 1)],
        2: [(7, [_polygon(10, 10, 50, 40)], 0), (3, [_polygon(60, 5, 12, 10)], 0)],
    }
    anns = []
    for img_id, items in segs.items():
        for cat, seg, crowd in items:
            rle = mask_utils.frPyObjects(seg, H, W)
            rle = mask_utils.merge(rle) if isinstance(rle, list) else rle
            anns.append({'id': len(anns) + 1, 'image_id': img_id, 'category_id': cat, 'iscrowd': crowd,
                         'segmentation': seg, 'area': float(mask_utils.area(rle)),
                         'bbox': mask_utils.toBbox(rle).tolist()})
    return {'images': [{'id': i, 'height': H, 'width': W, 'file_name': f'{i}.png'} for i in segs],
            'annotations': anns,
            'categories': [{'id': c, 'name': n} for c, n in zip(CAT_IDS, CLASSES)]}


@pytest.fixture
def gt(tmp_path):
    path = tmp_path / 'gt.json'
    path.write_text(json.dumps(_gt_json()))
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(path))
    return path, coco


def _box(m: np.ndarray) -> list[float]:
    ys, xs = np.nonzero(m)
    return [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1] if len(xs) else [0, 0, 1, 1]


def _predictions(coco: COCO, seed: int = 0) -> dict[int, dict]:
    """Per image: masks [K, H, W] bool (gt masks shifted / eroded / relabelled, plus blobs), scores, labels."""
    rng = np.random.default_rng(seed)
    out = {}
    for img_id in coco.getImgIds():
        masks, labels = [], []
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=[img_id], iscrowd=False)):
            m = coco.annToMask(ann).astype(bool)
            masks.append(np.roll(m, int(rng.integers(-2, 3)), axis=1))
            labels.append(CAT_IDS.index(ann['category_id']))
            masks.append(m & np.roll(m, 3, axis=0))  # a worse copy
            labels.append(labels[-1] if rng.uniform() < 0.7 else 1 - labels[-1])
        blob = np.zeros((H, W), bool)
        blob[rng.integers(0, 40):, rng.integers(0, 60):][:12, :15] = True
        masks.append(blob)
        labels.append(int(rng.integers(0, 2)))
        masks = np.stack(masks)
        out[img_id] = {'masks': masks, 'labels': np.array(labels), 'scores': rng.uniform(0.05, 1, len(masks)),
                       'boxes': np.array([_box(m) for m in masks], np.float32)}
    return out


def _sample(img_id: int, pred: dict, gt_masks: tuple | None = None) -> DetDataSample:
    s = DetDataSample(metainfo={'img_id': img_id, 'img_path': f'{img_id}.png', 'ori_shape': (H, W),
                                'img_shape': (2 * H, 2 * W), 'scale_factor': (2.0, 2.0), 'flip': True,
                                'flip_direction': 'horizontal'})
    s.pred_instances = InstanceData(bboxes=torch.from_numpy(pred['boxes']),
                                    scores=torch.from_numpy(pred['scores'].astype(np.float32)),
                                    labels=torch.from_numpy(pred['labels']).long(),
                                    masks=torch.from_numpy(pred['masks']))
    if gt_masks is not None:
        for field, (boxes, labels, masks) in zip(('gt_instances', 'ignored_instances'), gt_masks):
            # pipeline pixels: 2x larger (nearest), then flipped, as Resize + RandomFlip would give
            up = masks.repeat(2, axis=1).repeat(2, axis=2)[:, :, ::-1]
            b = np.asarray(boxes, np.float32).reshape(-1, 4) * 2
            b = np.stack([2 * W - b[:, 2], b[:, 1], 2 * W - b[:, 0], b[:, 3]], axis=1)
            setattr(s, field, InstanceData(bboxes=torch.from_numpy(b), labels=torch.from_numpy(labels).long(),
                                           masks=torch.from_numpy(np.ascontiguousarray(up))))
    return s


def _gt_fields(coco: COCO, img_id: int) -> tuple:
    parts = []
    for crowd in (False, True):
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img_id], iscrowd=crowd))
        anns = [a for a in anns if bool(a['iscrowd']) == crowd]
        boxes = [[a['bbox'][0], a['bbox'][1], a['bbox'][0] + a['bbox'][2], a['bbox'][1] + a['bbox'][3]] for a in anns]
        labels = np.array([CAT_IDS.index(a['category_id']) for a in anns], np.int64)
        masks = np.stack([coco.annToMask(a) for a in anns]) if anns else np.zeros((0, H, W), np.uint8)
        parts.append((boxes, labels, masks))
    return tuple(parts)


def _direct(coco: COCO, preds: dict[int, dict]) -> COCOeval:
    dets = []
    for img_id, p in preds.items():
        for m, s, lab in zip(p['masks'], p['scores'], p['labels']):
            rle = mask_utils.encode(np.asfortranarray(m.astype(np.uint8)))
            rle['counts'] = rle['counts'].decode()
            dets.append({'image_id': img_id, 'category_id': CAT_IDS[lab], 'segmentation': rle,
                         'score': float(np.float32(s))})
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(coco, coco.loadRes(dets), 'segm')
        ev.params.catIds = list(CAT_IDS)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def _run(metric: CocoMetric, samples: list) -> dict:
    evaluator = Evaluator(metric)
    evaluator.dataset_meta = metric.dataset_meta
    evaluator.process(samples)
    return evaluator.evaluate(len(samples))


def test_segm_from_file_equals_direct_cocoeval(gt):
    path, coco = gt
    preds = _predictions(coco)
    metric = CocoMetric(ann_file=str(path), metric=['bbox', 'segm'])
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    evaluator = Evaluator(metric)
    evaluator.dataset_meta = metric.dataset_meta
    evaluator.process([_sample(i, p) for i, p in preds.items()])
    # what is kept per image until the end: RLE strings, no bitmap
    kept = metric.results[0]['pred']
    assert 'masks' not in kept and isinstance(kept['mask_rles'][0]['counts'], str)
    res = evaluator.evaluate(len(preds))
    ev = _direct(coco, preds)
    for key, value in zip(SEGM_KEYS, ev.stats):
        assert res[f'coco/{key}'] == pytest.approx(value, abs=1e-12), key
    assert 0.2 < res['coco/segm_mAP'] < 0.9 and 'coco/bbox_mAP' in res
    table = metric.per_class_table()
    assert table['header'][:3] == ['class', '#gt', 'bbox AP'] and 'segm AP' in table['header']
    segm = metric.per_class_tables()['segm']
    p = ev.eval['precision'][:, :, CAT_IDS.index(7), 0, -1]
    assert segm['rows'][1][0] == 'dog' and segm['rows'][1][1] == 2  # the crowd region is not counted
    assert segm['rows'][1][2] == pytest.approx(round(float(p[p > -1].mean()), 4))  # a fraction, as the summary
    assert metric.class_pr_curves(0.5, 'segm')[0]['precision'].shape == (101,)


def test_exact_masks_score_one(gt):
    path, coco = gt
    preds = {}
    for img_id in coco.getImgIds():
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img_id], iscrowd=False))
        masks = np.stack([coco.annToMask(a).astype(bool) for a in anns])
        preds[img_id] = {'masks': masks, 'labels': np.array([CAT_IDS.index(a['category_id']) for a in anns]),
                         'scores': np.ones(len(anns)), 'boxes': np.array([_box(m) for m in masks], np.float32)}
    metric = CocoMetric(ann_file=str(path), metric='segm')
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res = _run(metric, [_sample(i, p) for i, p in preds.items()])
    assert res['coco/segm_mAP'] == pytest.approx(1.0) and 'coco/bbox_mAP' not in res


def test_gt_masks_from_samples_equal_the_file(gt):
    path, coco = gt
    preds = _predictions(coco, seed=1)
    from_file = CocoMetric(ann_file=str(path), metric=['bbox', 'segm'])
    from_file.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res_file = _run(from_file, [_sample(i, p) for i, p in preds.items()])
    in_memory = CocoMetric(metric=['bbox', 'segm'])
    in_memory.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res_mem = _run(in_memory, [_sample(i, p, _gt_fields(coco, i)) for i, p in preds.items()])
    for key in res_file:
        assert res_mem[key] == pytest.approx(res_file[key], abs=1e-12), key


def test_format_only_writes_rle_json(tmp_path, gt):
    path, coco = gt
    preds = _predictions(coco)
    metric = CocoMetric(ann_file=str(path), metric=['segm'], format_only=True, outfile_prefix=str(tmp_path / 'r'))
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    assert _run(metric, [_sample(i, p) for i, p in preds.items()]) == {}
    dets = json.loads((tmp_path / 'r.segm.json').read_text())
    assert len(dets) == sum(len(p['masks']) for p in preds.values())
    assert set(dets[0]) == {'image_id', 'segmentation', 'score', 'category_id'}
    first = preds[1]['masks'][0]
    assert np.array_equal(mask_utils.decode(dets[0]['segmentation']).astype(bool), first)


def test_segm_errors(tmp_path, gt):
    path, coco = gt
    preds = _predictions(coco)
    no_masks = _sample(1, preds[1])
    del no_masks.pred_instances.masks
    metric = CocoMetric(ann_file=str(path), metric='segm')
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    with pytest.raises(DataError, match='needs pred_instances.masks'):
        metric.process({}, [no_masks.to_dict()])
    metric = CocoMetric(metric='segm')
    metric.dataset_meta = {'classes': CLASSES}
    boxes_only = _sample(1, preds[1], _gt_fields(coco, 1))
    del boxes_only.gt_instances.masks
    with pytest.raises(DataError, match='without an ann_file needs ground-truth masks.*with_mask: true'):
        metric.process({}, [boxes_only.to_dict()])
    wrong = _sample(1, dict(preds[1], masks=preds[1]['masks'][:, :30]))
    metric = CocoMetric(ann_file=str(path), metric='segm')
    with pytest.raises(ValueError, match=r'shape \(\d+, 30, 80\); expected \[\d+, 60, 80\] \(\[K, ori_H, ori_W\]'):
        metric.process({}, [wrong])
    data = _gt_json()
    data['annotations'][0]['segmentation'] = []
    box_file = tmp_path / 'boxes.json'
    box_file.write_text(json.dumps(data))
    metric = CocoMetric(ann_file=str(box_file), metric='segm')
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    with pytest.raises(DataError, match='annotation id 1 .* has none; use metric: bbox'):
        _run(metric, [_sample(1, preds[1])])
    with pytest.raises(ValueError, match="unknown metric 'mask'"):
        CocoMetric(metric=['bbox', 'mask'])
