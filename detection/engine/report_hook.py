"""An HTML report of a detection test run: metrics, per-class AP, PR curves, confusion matrix, worst images."""

from __future__ import annotations

import os.path as osp
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cv2
import numpy as np
from mmengine.dist import collect_results, is_main_process
from mmengine.hooks import Hook

from detection.evaluation.analysis import class_pr_curves, image_confusion, image_errors, worst_images
from detection.evaluation.ap import average_precision
from detection.evaluation.gt_utils import has_gt, image_record
from detection.evaluation.mask_rle import decode_masks
from detection.registry import HOOKS
from oars.evaluation.confusion_cells import cells_path, write_cells
from oars.evaluation.report import FRACTION_NOTE
from oars.visualization import ReportSection, plot_confusion_matrix, plot_pr_curves, write_html_report
from oars_deploy.draw import get_palette
from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample
from oars_deploy.words import plural

# worst-image panels: longest side shrunk to at most 640 px (small report) and grown to at least 320 px
# (readable captions on tiny images)
_MAX_SIDE, _MIN_SIDE = 640, 320


def _fit(img: np.ndarray) -> tuple[np.ndarray, float]:
    h, w = img.shape[:2]
    s = min(1.0, _MAX_SIDE / max(h, w)) if max(h, w) > _MIN_SIDE else _MIN_SIDE / max(h, w)
    if s != 1.0:
        interp = cv2.INTER_AREA if s < 1.0 else cv2.INTER_LINEAR
        img = cv2.resize(img, (max(1, round(w * s)), max(1, round(h * s))), interpolation=interp)
    return img, s


def error_panel(img: np.ndarray, rec: Mapping[str, Any], errors: Mapping[str, Any], class_names: Sequence[str],
                palette: np.ndarray, score_thr: float) -> np.ndarray:
    """``ground truth | predictions`` side by side for one image (boxes in original pixels; the image is
    resized first, to 320-640 px on its longest side, so captions stay readable). Instance masks kept as RLE
    in the record (``mask_rles``, original pixels) are decoded and filled in under the boxes."""
    small, s = _fit(img)
    gt, pred = dict(rec['gt']), dict(rec['pred'])
    for found in (gt, pred):
        rles = found.pop('mask_rles', None)
        found.pop('ignore_mask_rles', None)
        if rles is not None:
            found['masks'] = decode_masks(rles, rec['ori_shape'] or img.shape[:2])
    return draw_detection_sample(small, {**pred, 'bboxes': pred['bboxes'] * s}, class_names, palette, score_thr,
                                 gt={**gt, 'bboxes': gt['bboxes'] * s},
                                 titles=[f"GT ({errors['missed']} missed)",
                                         f"pred ({errors['false_positives']} false)"])


def _read_image(path: str | None, ori_shape: Sequence[int] | None) -> np.ndarray:
    img = cv2.imread(path, cv2.IMREAD_COLOR) if path else None
    if img is None:  # keep the report going; the caption names the file
        h, w = ori_shape if ori_shape is not None else (256, 256)
        img = np.full((int(h), int(w), 3), 127, dtype=np.uint8)
    return img


def build_report_sections(records: Sequence[dict[str, Any]], class_names: Sequence[str],
                          palette: np.ndarray | None, metrics: Mapping[str, Any] | None,
                          class_tables: Mapping[str, Mapping[str, Any]] | None = None, score_thr: float = 0.3,
                          iou_thr: float = 0.5, num_worst: int = 8,
                          read_image: Callable[[str | None, Sequence[int] | None], np.ndarray] = _read_image,
                          cells: list[tuple[str, np.ndarray]] | None = None) -> list[ReportSection]:
    """The report's sections from per-image records (``gt_utils.image_record``), the metrics dict and the
    metrics' per-class tables (``{title: {'header', 'rows'}}``).

    ``cells``: when a list, each image's ``(path, [C + 1, C + 1] counts)`` of the confusion matrix is appended to it
    (the matrix is their sum), for ``confusion_cells.json``."""
    names = [str(n) for n in class_names]
    pal = get_palette(len(names), palette)
    sections = [ReportSection('Metrics', tables=[{'header': ['metric', 'value'], 'caption': FRACTION_NOTE,
                                                   'rows': [[k, v] for k, v in (metrics or {}).items()]}])]
    for title, table in (class_tables or {}).items():
        sections.append(ReportSection(title, tables=[table]))
    with_gt = [r for r in records if r.get('gt') is not None]
    if not with_gt:
        sections.append(ReportSection('Error analysis', text='The test samples carry no ground truth '
                                      '(no LoadAnnotations in the test pipeline): no PR curves, confusion matrix '
                                      'or worst images.'))
        return sections

    curves = class_pr_curves(with_gt, len(names), iou_thr)
    ap = {n: average_precision(c['recall'], c['precision']) if c['num_gt'] else float('nan')
          for n, c in zip(names, curves)}
    pr_img = plot_pr_curves({n: (c['recall'], c['precision']) for n, c in zip(names, curves)},
                            title=f'Precision-recall at IoU {iou_thr:g} (legend: AP, 0–1)', ap=ap)
    sections.append(ReportSection('Precision-recall curves', text=f'{plural(len(with_gt), "image")}, all detections.',
                                  images=[pr_img]))

    per_image = [image_confusion(r, len(names), score_thr, iou_thr) for r in with_gt]
    cm = sum(per_image, np.zeros((len(names) + 1, len(names) + 1), dtype=np.int64))
    if cells is not None:
        cells += [(str(r.get('img_path') or f"id {r.get('img_id')}"), c) for r, c in zip(with_gt, per_image)]
    cm_names = [*names, 'background']
    cm_img = plot_confusion_matrix(cm, cm_names, normalize=True,
                                   title=f'Confusion matrix (score >= {score_thr:g}, IoU >= {iou_thr:g})')
    cm_table = {'header': ['gt \\ pred', *cm_names], 'rows': [[n, *row] for n, row in zip(cm_names, cm.tolist())],
                'caption': 'counts'}
    sections.append(ReportSection('Confusion matrix', text='Rows: ground-truth class (last row: false positives '
                                  'on background). Columns: predicted class (last column: missed boxes).',
                                  tables=[cm_table], images=[cm_img]))

    errors = image_errors(with_gt, score_thr, iou_thr)
    worst = worst_images(errors, num_worst)
    panels = []
    for i in worst:
        rec = with_gt[i]
        img = read_image(rec.get('img_path'), rec.get('ori_shape'))
        caption = f"{osp.basename(str(rec.get('img_path')))} (id {rec.get('img_id')}): {errors[i]['missed']} " \
                  f"missed, {errors[i]['false_positives']} false"
        panels.append((caption, error_panel(img, rec, errors[i], names, pal, score_thr)))
    total_missed = sum(e['missed'] for e in errors)
    total_fp = sum(e['false_positives'] for e in errors)
    sections.append(ReportSection(f'Worst images (up to {num_worst})',
                                  text=f'{total_missed} missed and {plural(total_fp, "false box", "false boxes")} '
                                       f'in all (score >= '
                                       f'{score_thr:g}, IoU >= {iou_thr:g}).' + ('' if panels else ' No errors.'),
                                  images=panels))
    return sections


@HOOKS.register_module()
class DetectionReportHook(Hook):
    """After testing, write ``out_file`` (relative paths are under the work dir): a self-contained HTML
    report with the metrics, each evaluator metric's per-class table, per-class PR curves at ``iou_thr``,
    the confusion matrix with background (detections with score >= ``score_thr``) and the ``num_worst``
    images with the most missed + false boxes (ground truth | predictions, with instance masks when the model
    predicts them; kept as RLE until then). Beside the report, ``confusion_cells.json`` says which images fall in
    each cell of the matrix (:mod:`oars.evaluation.confusion_cells`, unit boxes, background row and column last)."""

    priority = 'LOW'

    def __init__(self, out_file: str, score_thr: float = 0.3, iou_thr: float = 0.5, num_worst: int = 8) -> None:
        if not 0.0 < iou_thr <= 1.0:
            raise ValueError(f'DetectionReportHook: iou_thr must be in (0, 1], got {iou_thr}')
        self.out_file = out_file
        self.score_thr = float(score_thr)
        self.iou_thr = float(iou_thr)
        self.num_worst = int(num_worst)
        self._records: list[dict[str, Any]] = []

    def before_test(self, runner) -> None:
        self._records = []

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        for sample in outputs or []:  # masks as RLE: a few hundred bytes each until the report is drawn
            self._records.append(image_record(sample, with_gt=has_gt(sample), with_masks=True))

    def after_test_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        size = len(runner.test_dataloader.dataset)
        records = collect_results(self._records, size, 'cpu')
        self._records = []
        if not is_main_process():
            return
        meta = dict(getattr(runner.test_dataloader.dataset, 'metainfo', None) or {})
        evaluator = getattr(runner, 'test_evaluator', None)
        classes = meta.get('classes') or (getattr(evaluator, 'dataset_meta', None) or {}).get('classes')
        if not classes:
            raise ValueError("DetectionReportHook: the test dataset's metainfo has no 'classes'")
        tables = {}
        for m in getattr(evaluator, 'metrics', []) or []:
            if hasattr(m, 'per_class_table'):
                try:
                    tables[f'{type(m).__name__} per class'] = m.per_class_table()
                except RuntimeError:  # metric not evaluated (e.g. format_only)
                    continue
        cells: list[tuple[str, np.ndarray]] = []
        sections = build_report_sections(records, classes, meta.get('palette'), metrics, tables,
                                         self.score_thr, self.iou_thr, self.num_worst, cells=cells)
        out = self.out_file if osp.isabs(self.out_file) else osp.join(runner.work_dir, self.out_file)
        write_html_report(out, 'Detection report', sections)
        if any(r.get('gt') is not None for r in records):  # the report has a matrix: which images are in it
            write_cells(cells_path(out), [*map(str, classes), 'background'], 'boxes', cells)
        runner.logger.info(f'detection report written to {out}')
