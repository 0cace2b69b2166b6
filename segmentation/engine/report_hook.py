"""An HTML report of a segmentation test run: metrics, per-class IoU bars, confusion matrix, worst images."""

from __future__ import annotations

import heapq
import math
import os.path as osp
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np
import torch
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.hooks import Hook

from oars.evaluation.confusion import overall_accuracy, per_class_scores
from oars.evaluation.confusion_cells import cells_path, sparse_counts, write_cells
from oars.evaluation.report import FRACTION_NOTE
from oars.visualization import ReportSection, plot_per_class_bars, write_html_report
from oars.visualization.html_report import confusion_section
from oars_deploy.draw import draw_legend, get_palette, overlay_mask, side_by_side
from oars_deploy.draw.layout import enlarge, enlarge_factor
from oars_deploy.predictors.semantic_labels.draw import MIN_SIDE
from oars_deploy.words import plural
from segmentation.evaluation.agreement import batch_confusions, per_image_miou
from segmentation.registry import HOOKS

# worst-image panels: longest side brought into [256, 512] px (readable captions, small report)
_MIN_SIDE, _MAX_SIDE = 256, 512


def _fit(img: np.ndarray, gt: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Image (area / linear) and label maps (nearest) resized so the longest side is in [256, 512] px."""
    h, w = pred.shape
    side = max(h, w)
    s = _MAX_SIDE / side if side > _MAX_SIDE else (_MIN_SIDE / side if side < _MIN_SIDE else 1.0)
    if img.shape[:2] != (h, w):  # the image file and the prediction (at ori_shape) should agree; draw anyway
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
    if s == 1.0:
        return img, gt, pred
    size = (max(1, round(w * s)), max(1, round(h * s)))
    img = cv2.resize(img, size, interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    gt = cv2.resize(gt, size, interpolation=cv2.INTER_NEAREST)
    pred = cv2.resize(pred, size, interpolation=cv2.INTER_NEAREST)
    return img, gt, pred


def error_panel(img: np.ndarray, gt: np.ndarray, pred: np.ndarray, class_names: Sequence[str],
                palette: np.ndarray, ignore_index: int | None = 255) -> np.ndarray:
    """``image | ground truth overlay | prediction overlay | errors`` for one image, with a legend of the classes
    present. ``gt`` / ``pred``: (H, W) class ids at the image's original size (uint8 or uint16); errors are GT
    pixels (not ``ignore_index``) predicted as another class, in red on a dimmed image."""
    img, gt, pred = _fit(img, gt, pred)
    factor = enlarge_factor(img.shape[0], img.shape[1], MIN_SIDE)  # small images drawn large enough to read
    img, gt, pred = enlarge(img, factor), enlarge(gt, factor), enlarge(pred, factor)
    wrong = (pred != gt) if ignore_index is None else (pred != gt) & (gt != ignore_index)
    errors = (img.astype(np.float32) * 0.4).astype(np.uint8)
    errors[wrong] = (0, 0, 255)
    row = side_by_side([img, overlay_mask(img, gt, palette, 0.5, ignore_index),
                        overlay_mask(img, pred, palette, 0.5, ignore_index), errors],
                       ['image', 'ground truth', 'prediction', f'errors ({wrong.mean():.1%})'])
    return draw_legend(row, list(class_names), palette, present_only_ids=np.union1d(np.unique(gt), np.unique(pred)))


def _read_image(path: str | None, shape: Sequence[int]) -> np.ndarray:
    img = cv2.imread(path, cv2.IMREAD_COLOR) if path else None
    if img is None:  # keep the report going; the caption names the file
        img = np.full((int(shape[0]), int(shape[1]), 3), 127, dtype=np.uint8)
    return img


def build_report_sections(metrics: Mapping[str, Any] | None, class_names: Sequence[str],
                          confusion: torch.Tensor | None, class_tables: Mapping[str, Mapping[str, Any]] | None = None,
                          worst: Sequence[Mapping[str, Any]] = (), num_worst: int = 8,
                          image_mious: Sequence[float] = ()) -> list[ReportSection]:
    """The report's sections.

    Args:
        metrics: the evaluator's results. class_names: C names.
        confusion: the dataset's [C, C] pixel counts (rows GT), or None when no sample had a label map.
        class_tables: ``{title: {'header', 'rows'}}`` (the metrics' ``per_class_table()``).
        worst: the worst images, lowest mIoU first: ``{'caption', 'panel'}`` (BGR uint8).
        image_mious: every image's mIoU (fractions; NaN: nothing counted), for the summary line.
    """
    names = [str(n) for n in class_names]
    sections = [ReportSection('Metrics', tables=[{'header': ['metric', 'value'], 'caption': FRACTION_NOTE,
                                                   'rows': [[k, v] for k, v in (metrics or {}).items()]}])]
    for title, table in (class_tables or {}).items():
        sections.append(ReportSection(title, tables=[table]))
    if confusion is None or int(confusion.sum()) == 0:
        sections.append(ReportSection('Error analysis', text='The test samples carry no ground truth (no '
                                      'LoadSegAnnotations in the test pipeline): no per-class IoU, confusion matrix '
                                      'or worst images.'))
        return sections

    iou = per_class_scores(confusion)['IoU'].tolist()
    bars = plot_per_class_bars(dict(zip(names, iou)), title='IoU per class (n/a: neither in GT nor predicted)',
                               ylabel='IoU')
    sections.append(ReportSection('Per-class IoU', text=f'{int(confusion.sum())} labelled pixels, pixel accuracy '
                                  f'{overall_accuracy(confusion):.4f}.', images=[bars]))
    sections.append(confusion_section(confusion.numpy(), names, 'Confusion matrix (pixels)', 'gt \\ pred',
                                      'Rows: ground-truth class (normalised per row). Columns: predicted class.'))
    finite = [v for v in image_mious if not math.isnan(v)]
    summary = (f'{plural(len(finite), "image")} with labelled pixels; per-image mIoU (classes in the image\'s GT or '
               f'prediction): mean {np.mean(finite):.4f}, min {min(finite):.4f}.') if finite else ''
    sections.append(ReportSection(f'Worst images (up to {num_worst})', text=summary + ' Lowest mIoU first.',
                                  images=[(w['caption'], w['panel']) for w in worst]))
    return sections


@HOOKS.register_module()
class SegmentationReportHook(Hook):
    """After testing, write ``out_file`` (relative paths are under the work dir): a self-contained HTML report with
    the metrics, each evaluator metric's per-class table, per-class IoU bars, the pixel confusion matrix (normalised
    per GT row) and the ``num_worst`` images with the lowest per-image mIoU (image | GT | prediction | errors).

    Per image, the hook computes its [C, C] matrix (one bincount per batch, ``batch_confusions``) and its mIoU; the
    dataset's matrix is the evaluator's ``IoUMetric.confusion`` when there is one (it drops the samples a distributed
    sampler repeats), else the sum of the hook's. ``ignore_index``: None takes the IoUMetric's (else 255).
    The per-image matrices also go to ``confusion_cells.json`` beside the report (which images fall in each cell,
    :mod:`oars.evaluation.confusion_cells`), each image once.
    Memory: one float and the non-zero cells per image, one [C, C] sum, and the label maps of the ``num_worst``
    worst images on each rank.
    """

    priority = 'LOW'

    def __init__(self, out_file: str, num_worst: int = 8, ignore_index: int | None = None) -> None:
        if isinstance(num_worst, bool) or not isinstance(num_worst, int) or num_worst < 0:
            raise ValueError(f'SegmentationReportHook: num_worst must be an int >= 0, got {num_worst!r}')
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
            raise ValueError(f'SegmentationReportHook: ignore_index must be an int or null, got {ignore_index!r}')
        self.out_file = out_file
        self.num_worst = num_worst
        self.ignore_index = ignore_index
        self.classes: list[str] = []
        self.palette: np.ndarray | None = None
        self._reset()

    def _reset(self) -> None:
        self._sum: torch.Tensor | None = None
        self._mious: list[float] = []
        self._cells: list[tuple[str, list[tuple[int, int, int]]]] = []  # (image, its non-zero cells)
        self._worst: list[tuple] = []  # min-heap on -mIoU, so the root is the best of the kept images
        self._seq = 0

    def before_test(self, runner) -> None:
        self._reset()
        meta = dict(getattr(runner.test_dataloader.dataset, 'metainfo', None) or {})
        evaluator = getattr(runner, 'test_evaluator', None)
        classes = meta.get('classes') or (getattr(evaluator, 'dataset_meta', None) or {}).get('classes')
        if not classes:
            raise ValueError("SegmentationReportHook: the test dataset's metainfo has no 'classes'")
        self.classes = [str(c) for c in classes]
        self.palette = get_palette(len(self.classes), meta.get('palette'))
        if self.ignore_index is None:
            found = [m.ignore_index for m in getattr(evaluator, 'metrics', []) or [] if hasattr(m, 'ignore_index')]
            self._ignore = int(found[0]) if found else 255
        else:
            self._ignore = self.ignore_index

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        labelled = [s for s in outputs or [] if 'gt_sem_seg' in s and 'pred_sem_seg' in s]
        if not labelled:
            return
        preds = [s.pred_sem_seg.data.reshape(s.pred_sem_seg.data.shape[-2:]).cpu() for s in labelled]
        gts = [s.gt_sem_seg.data.reshape(s.gt_sem_seg.data.shape[-2:]).cpu() for s in labelled]
        cms = batch_confusions(preds, gts, len(self.classes), self._ignore)
        self._sum = cms.sum(0) if self._sum is None else self._sum + cms.sum(0)
        mious = per_image_miou(cms).tolist()
        self._mious += mious
        dtype = np.uint8 if max(len(self.classes), self._ignore) < 256 else np.int32
        for sample, pred, gt, miou, cm in zip(labelled, preds, gts, mious, cms):
            self._seq += 1
            path = sample.metainfo.get('img_path')
            self._cells.append((str(path or self._seq), sparse_counts(cm)))
            if self.num_worst == 0 or math.isnan(miou):
                continue
            if len(self._worst) >= self.num_worst and miou >= -self._worst[0][0]:
                continue  # not worse than the images kept
            item = (-miou, -self._seq, str(path or self._seq), pred.numpy().astype(dtype), gt.numpy().astype(dtype))
            heapq.heappush(self._worst, item)
            if len(self._worst) > self.num_worst:
                heapq.heappop(self._worst)

    def _gather(self) -> tuple[list[tuple], list[float], torch.Tensor | None, list[tuple]]:
        """Every rank's kept images (lowest mIoU first, one per file: the sampler repeats a few to even out the
        ranks), all per-image mIoUs, the summed matrix and each image's cells (once per file)."""
        if get_world_size() > 1:
            parts = all_gather_object((list(self._worst), self._mious, self._sum, self._cells))
        else:
            parts = [(self._worst, self._mious, self._sum, self._cells)]
        cells = {}
        for part in parts:
            for key, counts in part[3]:
                cells.setdefault(key, counts)
        merged = sorted((x for part in parts for x in part[0]), key=lambda x: (-x[0], -x[1]))
        seen, worst = set(), []
        for item in merged:
            if item[2] not in seen:
                seen.add(item[2])
                worst.append(item)
        sums = [p[2] for p in parts if p[2] is not None]
        return (worst[: self.num_worst], [v for p in parts for v in p[1]], (sum(sums) if sums else None),
                list(cells.items()))

    def after_test_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        worst, mious, own_sum, cells = self._gather()
        self._reset()
        if not is_main_process():
            return
        tables, confusion = {}, None
        n = len(self.classes)
        for m in getattr(getattr(runner, 'test_evaluator', None), 'metrics', []) or []:
            if hasattr(m, 'per_class_table'):
                try:
                    tables[f'{type(m).__name__} per class'] = m.per_class_table()
                except RuntimeError:  # metric not evaluated
                    continue
            cm = getattr(m, 'confusion', None)
            if confusion is None and isinstance(cm, torch.Tensor) and tuple(cm.shape) == (n, n):
                confusion = cm.cpu()
        if confusion is None:
            confusion = own_sum
        panels = []
        for neg_miou, _, key, pred, gt in worst:
            img = _read_image(key if osp.isfile(key) else None, pred.shape)
            panels.append({'caption': f'{osp.basename(key)}: mIoU {-neg_miou:.3f}',
                           'panel': error_panel(img, gt, pred, self.classes, self.palette, self._ignore)})
        sections = build_report_sections(metrics, self.classes, confusion, tables, panels, self.num_worst, mious)
        out = self.out_file if osp.isabs(self.out_file) else osp.join(runner.work_dir, self.out_file)
        write_html_report(out, 'Segmentation report', sections)
        if confusion is not None and int(confusion.sum()) > 0:  # the report has a matrix: which images are in it
            write_cells(cells_path(out), self.classes, 'pixels', cells)
        runner.logger.info(f'segmentation report written to {out}')
