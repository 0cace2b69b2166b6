"""COCO box and mask mAP with pycocotools, against the annotation file or ground truth collected from the samples."""

from __future__ import annotations

import contextlib
import io
import json
import os
import os.path as osp
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detection.evaluation.gt_utils import has_gt, image_record
from detection.registry import METRICS
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError
from oars.evaluation.report import FRACTION_NOTE, format_table

IOU_TYPES = ('bbox', 'segm')
# results json key of each iou type
_RESULT_KEY = {'bbox': 'bbox', 'segm': 'segmentation'}
_TABLE_COLUMNS = ['AP', 'AP50', 'AP75', 'APs', 'APm', 'APl']
# (path, mtime_ns, size) -> the parsed ground truth, alive while a metric holds it (``parsed_gt``)
_PARSED: weakref.WeakValueDictionary[tuple[str, int, int], COCO] = weakref.WeakValueDictionary()

# COCOeval.stats index -> metric name ('{md}' is a max_dets value)
_STAT_NAMES = ('mAP', 'mAP_50', 'mAP_75', 'mAP_s', 'mAP_m', 'mAP_l',
               'AR@{0}', 'AR@{1}', 'AR@{2}', 'AR_s@{2}', 'AR_m@{2}', 'AR_l@{2}')


def xyxy_to_xywh(bboxes: np.ndarray) -> np.ndarray:
    """COCO boxes are (x, y, width, height)."""
    b = np.asarray(bboxes, dtype=np.float64).reshape(-1, 4)
    return np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)


def detections_json(results: Sequence[dict[str, Any]], cat_ids: Sequence[int],
                    iou_type: str = 'bbox') -> list[dict[str, Any]]:
    """Predictions of the collected records in the COCO results format: ``bbox`` [x, y, w, h] for
    ``iou_type='bbox'``, ``segmentation`` (the records' RLEs) for ``'segm'``."""
    cat_arr = np.asarray(cat_ids)
    out: list[dict[str, Any]] = []
    for rec in results:
        pred = rec['pred']
        labels = pred['labels']
        if len(labels) and (labels.min() < 0 or labels.max() >= len(cat_arr)):
            raise DataError(f"CocoMetric: image {rec['img_id']} has predicted labels {np.unique(labels).tolist()} "
                            f'outside [0, {len(cat_arr)}) ({len(cat_arr)} classes)')
        if iou_type == 'segm':
            values = pred['mask_rles']
        else:
            values = xyxy_to_xywh(pred['bboxes']).tolist()
        cats = cat_arr[labels].tolist()
        scores = np.asarray(pred['scores'], np.float64).tolist()
        key = _RESULT_KEY[iou_type]
        out += [{'image_id': rec['img_id'], key: v, 'score': s, 'category_id': c}
                for v, s, c in zip(values, scores, cats)]
    return out


def coco_from_records(results: Sequence[dict[str, Any]], cat_ids: Sequence[int],
                      class_names: Sequence[str], with_masks: bool = False) -> COCO:
    """A COCO ground-truth object built in memory (ignored boxes become ``iscrowd=1``; area = w * h).

    ``with_masks``: each annotation also gets its ``segmentation`` (the records' gt RLEs) and, as in a COCO file,
    the mask's pixel count as ``area`` (COCOeval's small/medium/large ranges read it for boxes and masks)."""
    images, anns = [], []
    for rec in results:
        h, w = rec['ori_shape'] if rec['ori_shape'] is not None else (0, 0)
        images.append({'id': rec['img_id'], 'height': h, 'width': w})
        gt = rec['gt']
        groups = [(gt['bboxes'], gt['labels'], 0, 'mask_rles'), (gt['ignore_bboxes'], gt['ignore_labels'], 1,
                                                                  'ignore_mask_rles')]
        for boxes, labels, crowd, rle_key in groups:
            xywh = xyxy_to_xywh(boxes)
            rles = gt.get(rle_key) if with_masks else None
            if with_masks and (rles is None or len(rles) != len(xywh)):
                raise DataError(f"CocoMetric: image {rec['img_id']} has {len(xywh)} gt boxes but "
                                f"{'no' if rles is None else len(rles)} gt masks")
            areas = mask_utils.area(rles).tolist() if rles else (xywh[:, 2] * xywh[:, 3]).tolist()
            for i, ((x, y, bw, bh), label) in enumerate(zip(xywh.tolist(), np.asarray(labels).tolist())):
                ann = {'id': len(anns) + 1, 'image_id': rec['img_id'], 'category_id': int(cat_ids[label]),
                       'bbox': [x, y, bw, bh], 'area': float(areas[i]), 'iscrowd': crowd}
                if rles:
                    ann['segmentation'] = rles[i]
                anns.append(ann)
    coco = COCO()
    coco.dataset = {'images': images, 'annotations': anns,
                    'categories': [{'id': int(c), 'name': str(n)} for c, n in zip(cat_ids, class_names)]}
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def parsed_gt(path: str) -> COCO:
    """``pycocotools.COCO(path)`` (its prints silenced), parsed once per version of the file: every metric of the
    process evaluating against the same file (the same path, modification time and size) shares one parsed object,
    so repeated evaluations and several metrics (a validation and a test evaluator, both IoU types, a search trying
    many checkpoints) read the json once. The object lives as long as a metric holds it (a weak table), so nothing
    keeps a large annotation file in memory after the last metric is gone; a rewritten file is read again.

    The dataset's own reading is not reused: ``CocoDataset`` drops the json's objects once its arrays are built
    (keeping them would hold the whole json in memory through training), and its arrays are clipped and filtered,
    not the file's ground truth that ``COCOeval`` scores."""
    st = os.stat(path)
    key = (osp.abspath(path), st.st_mtime_ns, st.st_size)
    coco = _PARSED.get(key)
    if coco is None:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(path)
        _PARSED[key] = coco
    return coco


def _check_gt_segmentations(coco_gt: COCO, img_ids: list, cat_ids: list[int], source: str) -> None:
    """``DataError`` naming the first evaluated gt annotation without a segmentation (segm needs one for each)."""
    for ann in coco_gt.loadAnns(coco_gt.getAnnIds(imgIds=img_ids, catIds=list(cat_ids))):
        if not ann.get('segmentation'):
            raise DataError(f"CocoMetric: metric 'segm' needs a segmentation for every ground-truth annotation, but "
                            f"annotation id {ann.get('id')} (image {ann.get('image_id')}) in {source} has none; use "
                            "metric: bbox for box-only data")


@METRICS.register_module()
class CocoMetric(BaseMetric):
    """COCO ``bbox`` and/or ``segm`` (mask) mAP (pycocotools ``COCOeval``), values in [0, 1] as pycocotools
    reports them. ``metric`` is ``'bbox'``, ``'segm'`` or a list of both.

    Ground truth, in this order: ``ann_file``; else ``dataset_meta['ann_file']`` (CocoDataset sets it);
    else the samples' ``gt_instances`` / ``ignored_instances`` (back in original pixels; ignored boxes
    become crowd boxes, areas are w * h, or the mask's pixel count when ``segm`` is evaluated; ``segm`` then
    needs their ``masks``: ``LoadAnnotations(with_mask=True)`` in the test pipeline). Class ``i`` is category
    ``dataset_meta['cat_ids'][i]``; without ``cat_ids`` the classes are looked up by name in the annotation
    file, or are ``i + 1`` in memory. Evaluation covers only the processed images and the dataset's classes.

    ``segm`` reads ``pred_instances.masks`` (bool [K, ori_H, ori_W], one per predicted box) and encodes them to
    COCO RLE in ``process()``, so no full mask is kept until the end (COCO's results format: ``segmentation``,
    ``score``, ``category_id``; pycocotools derives the area and box from the mask).

    Returns ``{type}_mAP``, ``{type}_mAP_50``, ``{type}_mAP_75``, ``{type}_mAP_s/m/l`` and
    ``{type}_AR@{max_dets}``, ``{type}_AR_s/m/l@{max_dets[-1]}`` for each type. After ``evaluate``:
    ``per_class_table()`` (AP as fractions 0–1, like the summary; with both types, the columns are prefixed
    ``bbox``/``segm``),
    ``precisions`` (``{type: COCOeval.eval['precision']}`` [T, R, K, A, M], K in ``cat_ids`` order),
    ``precision`` (that of the first type) and ``class_pr_curves()``. With ``format_only`` the detections are
    written to ``{outfile_prefix}.{type}.json`` and nothing is evaluated; ``outfile_prefix`` alone also writes
    them.
    """

    default_prefix: str | None = 'coco'

    def __init__(self, ann_file: str | None = None, metric: str | Sequence[str] = 'bbox', classwise: bool = True,
                 iou_thrs: Sequence[float] | None = None, max_dets: Sequence[int] = (1, 10, 100),
                 format_only: bool = False, outfile_prefix: str | None = None, collect_device: str = 'cpu',
                 prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        metrics = [metric] if isinstance(metric, str) else list(metric)
        if not metrics:
            raise ValueError(f'CocoMetric: metric must name at least one of {list(IOU_TYPES)}, got {metric!r}')
        for m in metrics:
            if m not in IOU_TYPES:
                raise ValueError(f'CocoMetric: unknown metric {m!r}; expected one of {list(IOU_TYPES)} (or a list)')
        if len(set(metrics)) != len(metrics):
            raise ValueError(f'CocoMetric: metric {metrics} names a type twice')
        if ann_file is not None and not storage.isfile(ann_file):
            raise DataFileNotFoundError(f'CocoMetric: ann_file {ann_file!r} does not exist')
        if len(tuple(max_dets)) != 3:
            raise ValueError(f'CocoMetric: max_dets must hold 3 numbers (as COCOeval), got {max_dets!r}')
        if format_only and not outfile_prefix:
            raise ValueError('CocoMetric: format_only=True needs outfile_prefix (where to write the detections)')
        self.ann_file = ann_file
        self.metrics = metrics
        self.classwise = classwise
        self.iou_thrs = None if iou_thrs is None else [float(t) for t in iou_thrs]
        self.max_dets = [int(m) for m in max_dets]
        self.format_only = format_only
        self.outfile_prefix = outfile_prefix
        self.precision: np.ndarray | None = None
        self.precisions: dict[str, np.ndarray] = {}
        self.iou_thrs_used: np.ndarray | None = None
        self.rec_thrs: np.ndarray | None = None
        self._tables: dict[str, dict[str, list]] = {}
        self._coco_cache: tuple[str, COCO] | None = None

    # ---- ground truth -------------------------------------------------------------------------------
    def _gt_file(self) -> str | None:
        if self.ann_file is not None:
            return self.ann_file
        path = (self.dataset_meta or {}).get('ann_file')
        return str(path) if path else None

    def _load_gt_file(self, path: str) -> COCO:
        """The ground truth of ``path`` (a local path or a URL, copied into the storage cache for pycocotools),
        parsed once per file version (``parsed_gt``); the metric holds it so that its next evaluations reuse it."""
        if not storage.isfile(path):
            raise DataFileNotFoundError(f'CocoMetric: annotation file {path!r} does not exist')
        coco = parsed_gt(storage.local_copy(path))
        self._coco_cache = (path, coco)
        return coco

    def _class_names(self) -> list[str]:
        return [str(c) for c in (self.dataset_meta or {}).get('classes') or []]

    def _cat_ids(self, coco_gt: COCO | None, num_labels: int) -> list[int]:
        meta = self.dataset_meta or {}
        names = self._class_names()
        if meta.get('cat_ids') is not None:
            ids = [int(c) for c in meta['cat_ids']]
            if names and len(ids) != len(names):
                raise DataError(f"CocoMetric: dataset_meta has {len(names)} classes but {len(ids)} cat_ids")
            return ids
        if coco_gt is not None and names:
            by_name = {c['name']: c['id'] for c in coco_gt.dataset.get('categories', [])}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise DataError(f'CocoMetric: classes {missing} are not categories of the annotation file '
                                f'(it has {sorted(by_name)[:20]}); set dataset_meta cat_ids')
            return [int(by_name[n]) for n in names]
        if coco_gt is not None:
            return sorted(int(c) for c in coco_gt.getCatIds())
        return list(range(1, max(len(names), num_labels) + 1))

    # ---- mmengine BaseMetric ------------------------------------------------------------------------
    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Keep img_id, ori_shape, predictions (masks as RLE for ``segm``) and, when no annotation file will
        be used, original-pixel gt."""
        need_gt = self._gt_file() is None and not self.format_only
        segm = 'segm' in self.metrics
        for sample in data_samples:
            if need_gt and not has_gt(sample):
                raise DataError('CocoMetric: no ann_file was given and the dataset provides none, so the '
                                'samples must carry gt_instances (LoadAnnotations in the test pipeline)')
            rec = image_record(sample, with_gt=need_gt, with_masks=segm)
            if rec['img_id'] is None:
                raise DataError(f"CocoMetric: sample {rec['img_path']!r} has no 'img_id' in its metainfo")
            if segm and 'mask_rles' not in rec['pred']:
                raise DataError(f"CocoMetric: metric 'segm' needs pred_instances.masks (bool [K, H, W]; a mask model "
                                f"such as Mask R-CNN), but image {rec['img_path'] or rec['img_id']} has none; use "
                                'metric: bbox for a box detector')
            if segm and need_gt and 'mask_rles' not in rec['gt']:
                raise DataError("CocoMetric: metric 'segm' without an ann_file needs ground-truth masks in the "
                                'samples (gt_instances.masks: LoadAnnotations with_mask: true in the test pipeline), '
                                f"but image {rec['img_path'] or rec['img_id']} has none; or give ann_file (a COCO "
                                'json with segmentations)')
            rec.pop('img_path')
            self.results.append(rec)

    def compute_metrics(self, results: list) -> dict[str, float]:
        if not results:
            raise ValueError('CocoMetric: no results to evaluate (empty dataset?)')
        gt_file = self._gt_file()
        coco_gt = self._load_gt_file(gt_file) if gt_file and not self.format_only else None
        num_labels = max((int(r['pred']['labels'].max()) + 1 for r in results if len(r['pred']['labels'])),
                         default=0)
        cat_ids = self._cat_ids(coco_gt, num_labels)
        dets = {t: detections_json(results, cat_ids, t) for t in self.metrics}
        if self.outfile_prefix:
            for iou_type, items in dets.items():
                out = f'{self.outfile_prefix}.{iou_type}.json'
                os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
                with open(out, 'w') as f:
                    json.dump(items, f)
                print_log(f'CocoMetric: {iou_type} detections written to {out}', logger='current')
        if self.format_only:
            return {}
        if coco_gt is None:
            names = self._class_names()
            if not names:
                raise ValueError("CocoMetric needs dataset_meta['classes'] to build the ground truth in memory")
            coco_gt = coco_from_records(results, cat_ids, names, with_masks='segm' in self.metrics)
        img_ids = sorted({r['img_id'] for r in results})
        unknown = sorted(set(img_ids) - set(coco_gt.getImgIds()))
        if unknown:
            raise DataError(f'CocoMetric: image ids {unknown[:10]} are not in the annotation file {gt_file!r}')
        if 'segm' in self.metrics:
            _check_gt_segmentations(coco_gt, img_ids, cat_ids, gt_file or 'the samples')
        self.precisions, self._tables = {}, {}
        out: dict[str, float] = {}
        for iou_type in self.metrics:
            out.update(self._evaluate(coco_gt, dets[iou_type], img_ids, cat_ids, iou_type))
        self.precision = self.precisions[self.metrics[0]]
        return out

    def _evaluate(self, coco_gt: COCO, dets: list[dict[str, Any]], img_ids: list, cat_ids: list[int],
                  iou_type: str) -> dict:
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            if dets:
                coco_dt = coco_gt.loadRes(dets)
            else:  # loadRes cannot take an empty list
                coco_dt = COCO()
                coco_dt.dataset = {'images': list(coco_gt.dataset['images']), 'annotations': [],
                                   'categories': list(coco_gt.dataset.get('categories', []))}
                coco_dt.createIndex()
            ev = COCOeval(coco_gt, coco_dt, iou_type)
            ev.params.imgIds = img_ids
            ev.params.catIds = list(cat_ids)
            ev.params.maxDets = list(self.max_dets)
            if self.iou_thrs is not None:
                ev.params.iouThrs = np.array(self.iou_thrs, dtype=np.float64)
            ev.evaluate()
            ev.accumulate()
            summary = io.StringIO()
            with contextlib.redirect_stdout(summary):
                ev.summarize()
        print_log(f'COCO {iou_type} evaluation:\n' + summary.getvalue().rstrip(), logger='current')
        self.precisions[iou_type] = ev.eval['precision']
        self.iou_thrs_used = np.asarray(ev.params.iouThrs)
        self.rec_thrs = np.asarray(ev.params.recThrs)
        self._cat_order = [int(c) for c in ev.params.catIds]  # COCOeval sorts them
        self._eval_cat_ids = list(cat_ids)
        self._tables[iou_type] = self._class_table(ev, cat_ids, ev.eval['precision'])
        if self.classwise:
            table = self._tables[iou_type]
            print_log(f'per class {iou_type} results ({FRACTION_NOTE}):\n'
                      + format_table(table['header'], table['rows']), logger='current')
        md = self.max_dets
        return {f'{iou_type}_' + name.format(*md): float(v) for name, v in zip(_STAT_NAMES, ev.stats)}

    def _class_table(self, ev: COCOeval, cat_ids: list[int], precision: np.ndarray) -> dict[str, list]:
        names = self._class_names() or [str(c) for c in cat_ids]
        k_of = {c: k for k, c in enumerate(self._cat_order)}
        thrs = np.asarray(ev.params.iouThrs)
        num_gt = dict.fromkeys(cat_ids, 0)
        for (_, cat), gts in ev._gts.items():
            if cat in num_gt:
                num_gt[cat] += sum(1 for g in gts if not g.get('iscrowd', 0))

        def ap(k: int, area: int, thr: float | None = None) -> float:
            p = precision[:, :, k, area, -1]
            if thr is not None:
                t = np.flatnonzero(np.isclose(thrs, thr))
                p = p[t]
            p = p[p > -1]
            return round(float(p.mean()), 4) if p.size else float('nan')

        header = ['class', '#gt', *_TABLE_COLUMNS]
        rows = []
        for name, cid in zip(names, cat_ids):
            k = k_of[int(cid)]
            rows.append([name, num_gt[cid], ap(k, 0), ap(k, 0, 0.5), ap(k, 0, 0.75), ap(k, 1), ap(k, 2), ap(k, 3)])
        return {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}

    def per_class_tables(self) -> dict[str, dict[str, list]]:
        """``{type: {'header': ['class', '#gt', 'AP', ...], 'rows': [...]}}`` per evaluated type (AP as fractions
        0–1, NaN for a class without gt), from the last evaluation."""
        if not self._tables:
            raise RuntimeError('CocoMetric.per_class_tables() is available after evaluate()/compute_metrics()')
        return dict(self._tables)

    def per_class_table(self) -> dict[str, list]:
        """``{'header': ['class', '#gt', 'AP', 'AP50', 'AP75', 'APs', 'APm', 'APl'], 'rows': [...]}``, AP as
        fractions 0–1 (NaN for a class without gt), from the last evaluation. With several types, one table: the
        AP columns of each type, prefixed ``bbox``/``segm`` (``#gt`` is the same for both)."""
        if not self._tables:
            raise RuntimeError('CocoMetric.per_class_table() is available after evaluate()/compute_metrics()')
        tables = [self._tables[t] for t in self.metrics]
        if len(tables) == 1:
            return tables[0]
        header = ['class', '#gt'] + [f'{t} {c}' for t in self.metrics for c in _TABLE_COLUMNS]
        rows = [list(parts[0][:2]) + [v for p in parts for v in p[2:]] for parts in zip(*(t['rows'] for t in tables))]
        return {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}

    def class_pr_curves(self, iou_thr: float = 0.5, iou_type: str | None = None) -> list[dict[str, np.ndarray]]:
        """Per class (dataset order) ``{'recall': recThrs, 'precision'}`` at ``iou_thr``, all areas and the
        largest max_dets, from COCOeval's interpolated precision (NaN where the class has no gt), of
        ``iou_type`` (default: the first evaluated type)."""
        if not self.precisions:
            raise RuntimeError('CocoMetric.class_pr_curves() is available after evaluate()/compute_metrics()')
        iou_type = iou_type or self.metrics[0]
        if iou_type not in self.precisions:
            raise ValueError(f'CocoMetric: {iou_type!r} was not evaluated (types {list(self.precisions)})')
        t = np.flatnonzero(np.isclose(self.iou_thrs_used, iou_thr))
        if not t.size:
            raise ValueError(f'CocoMetric: IoU {iou_thr} was not evaluated (thresholds {self.iou_thrs_used.tolist()})')
        k_of = {c: k for k, c in enumerate(self._cat_order)}
        out = []
        for cid in self._eval_cat_ids:
            p = self.precisions[iou_type][t[0], :, k_of[int(cid)], 0, -1].astype(np.float64)
            out.append({'recall': self.rec_thrs.copy(), 'precision': np.where(p < 0, np.nan, p)})
        return out
