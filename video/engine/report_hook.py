"""An HTML report of a video test run: metrics, per-class tables and bars, confusion matrix, worst clips."""

from __future__ import annotations

import heapq
import os.path as osp
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from mmengine.dist import all_gather_object, collect_results, get_world_size, is_main_process
from mmengine.hooks import Hook

from oars.evaluation.confusion import confusion_matrix, per_class_scores
from oars.evaluation.confusion_cells import cells_path, write_cells
from oars.evaluation.report import FRACTION_NOTE
from oars.visualization import ReportSection, plot_per_class_bars, write_html_report
from oars.visualization.html_report import confusion_section
from oars_deploy.words import plural
from video.engine.clip_pictures import batch_inputs, clip_frames, clip_labels, clip_strip, clip_title
from video.engine.localization_records import is_localization_dataset
from video.engine.localization_report import LocalizationReport
from video.evaluation.fields import sample_name
from video.registry import HOOKS


def build_report_sections(records: Sequence[Mapping[str, Any]], class_names: Sequence[str],
                          metrics: Mapping[str, Any] | None,
                          class_tables: Mapping[str, Mapping[str, Any]] | None = None,
                          worst: Sequence[Mapping[str, Any]] = (), num_worst: int = 8,
                          class_ap: Sequence[float] | None = None,
                          cells: list[tuple[str, list[tuple[int, int, int]]]] | None = None) -> list[ReportSection]:
    """The report's sections.

    Args:
        records: one per clip: ``{'true': [class ids] or None, 'pred': top-1 class id, 'multi_label': bool,
            'name': the clip's file (optional)}``.
        class_names: C names. metrics: the evaluator's results. class_tables: ``{title: {'header', 'rows'}}``
            (the metrics' ``per_class_table()``).
        worst: the worst clips, lowest true-class probability first: ``{'caption', 'strip'}`` (BGR uint8).
        class_ap: per-class AP [C] (NaN: no positives) for multi-label bars, e.g. ``MultiLabelMetric.class_ap``.
        cells: when a list and the report has a confusion matrix, each clip's ``(name, [(true, pred, 1)])`` is
            appended to it (the matrix is their sum), for ``confusion_cells.json``.
    """
    names = [str(n) for n in class_names]
    sections = [ReportSection('Metrics', tables=[{'header': ['metric', 'value'], 'caption': FRACTION_NOTE,
                                                   'rows': [[k, v] for k, v in (metrics or {}).items()]}])]
    for title, table in (class_tables or {}).items():
        sections.append(ReportSection(title, tables=[table]))
    with_gt = [r for r in records if r.get('true') is not None]
    if not with_gt:
        sections.append(ReportSection('Error analysis', text='The test clips carry no ground truth (no labels in '
                                      'the annotation list): no per-class accuracy, confusion matrix or worst clips.'))
        return sections

    single = [r for r in with_gt if not r.get('multi_label') and len(r['true']) == 1]
    if single:
        pred = torch.tensor([r['pred'] for r in single], dtype=torch.int64)
        true = torch.tensor([r['true'][0] for r in single], dtype=torch.int64)
        cm = confusion_matrix(pred, true, len(names))
        if cells is not None:
            cells += [(str(r.get('name') or f'clip {k}'), [(int(t), int(p), 1)])
                      for k, (r, t, p) in enumerate(zip(single, true.tolist(), pred.tolist()))]
        acc = per_class_scores(cm)['Acc'].tolist()
        bars = plot_per_class_bars(dict(zip(names, acc)), title='Top-1 accuracy per class (n/a: no clips)',
                                   ylabel='accuracy')
        sections.append(ReportSection('Per-class accuracy', text=f'{plural(len(single), "clip")}.', images=[bars]))
        sections.append(confusion_section(cm.numpy(), names, 'Confusion matrix (top-1)', 'true \\ pred',
                                          'Rows: true class (normalised per row). Columns: top-1 prediction.'))
    elif class_ap is not None:
        bars = plot_per_class_bars(dict(zip(names, [float(v) for v in class_ap])),
                                   title='Average precision per class (n/a: no positive clip)', ylabel='AP')
        sections.append(ReportSection('Per-class AP', text=f'{len(with_gt)} multi-label clips; no confusion '
                                      'matrix (a clip has several true classes).', images=[bars]))
    sections.append(ReportSection(f'Worst clips (up to {num_worst})',
                                  text='Lowest probability of the true class (multi-label: of the best-scored true '
                                       'class). First view, evenly spaced frames.',
                                  images=[(w['caption'], w['strip']) for w in worst]))
    return sections


@HOOKS.register_module()
class VideoReportHook(Hook):
    """After testing, write ``out_file`` (relative paths are under the work dir): a self-contained HTML report
    with the metrics, each evaluator metric's per-class table, per-class top-1 accuracy bars and the confusion
    matrix (single-label; multi-label: per-class AP bars from ``MultiLabelMetric``), and the ``num_worst`` clips
    with the lowest true-class probability, each as a strip of its frames with the true and top-``topk`` labels.

    Localisation test sets (timed segments) get the localisation report instead
    (:class:`video.engine.localization_report.LocalizationReport`).

    Beside the report, ``confusion_cells.json`` says which clips fall in each cell of the matrix
    (:mod:`oars.evaluation.confusion_cells`, unit clips).

    Memory: two ints and the name per clip, and the strips of the ``num_worst`` worst clips seen so far on each rank.
    """

    priority = 'LOW'

    def __init__(self, out_file: str, num_worst: int = 8, topk: int = 3, max_frames: int = 8,
                 frame_height: int = 80) -> None:
        for key, value in (('num_worst', num_worst), ('topk', topk), ('max_frames', max_frames),
                           ('frame_height', frame_height)):
            least = 0 if key == 'num_worst' else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f'VideoReportHook: {key} must be an int >= {least}, got {value!r}')
        self.out_file = out_file
        self.num_worst, self.topk, self.max_frames, self.frame_height = num_worst, topk, max_frames, frame_height
        self._records: list[dict[str, Any]] = []
        self._worst: list[tuple] = []  # max-heap on the true-class probability: (-p, -seq, key, caption, strip)
        self._seq = 0
        self.classes: list[str] = []
        self._localization: LocalizationReport | None = None

    def before_test(self, runner) -> None:
        self._localization = None
        if is_localization_dataset(runner.test_dataloader.dataset):  # timed segments: the localisation report
            self._localization = LocalizationReport(self.out_file, self.num_worst)
            self._localization.before_test(runner)
            return
        self._records, self._worst, self._seq = [], [], 0
        meta = dict(getattr(runner.test_dataloader.dataset, 'metainfo', None) or {})
        evaluator = getattr(runner, 'test_evaluator', None)
        classes = meta.get('classes') or (getattr(evaluator, 'dataset_meta', None) or {}).get('classes')
        if not classes:
            raise ValueError("VideoReportHook: the test dataset's metainfo has no 'classes'")
        self.classes = [str(c) for c in classes]

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        if self._localization is not None:
            self._localization.after_test_iter(runner, batch_idx, data_batch, outputs)
            return
        outputs = list(outputs or [])
        for sample, inputs in zip(outputs, batch_inputs(data_batch, len(outputs))):
            scores, true_ids = clip_labels(sample)
            multi = 'gt_label' in sample and torch.as_tensor(sample.gt_label).is_floating_point()
            name = sample_name(sample)
            self._records.append({'true': true_ids, 'pred': int(np.argmax(scores)), 'multi_label': bool(multi),
                                  'name': name if name != '?' else None})
            if true_ids is None or self.num_worst == 0:
                continue
            valid = [i for i in true_ids if 0 <= i < scores.shape[0]]
            p = float(scores[valid].max()) if valid else 0.0
            self._seq += 1
            if len(self._worst) >= self.num_worst and p >= -self._worst[0][0]:
                continue  # not worse than the clips kept
            strip = clip_strip(sample, clip_frames(sample, inputs), self.classes, self.topk, self.max_frames,
                               self.frame_height)
            inds = sample.metainfo.get('frame_inds')
            key = (name if name != '?' else str(self._seq), int(inds[0]) if inds is not None and len(inds) else -1)
            caption = f'{clip_title(sample)}: p(true) = {p:.3f}, predicted {self._name(int(np.argmax(scores)))} ' \
                      f'({float(scores.max()):.3f})'
            heapq.heappush(self._worst, (-p, -self._seq, key, caption, strip))
            if len(self._worst) > self.num_worst:
                heapq.heappop(self._worst)

    def _name(self, i: int) -> str:
        return self.classes[i] if 0 <= i < len(self.classes) else str(i)

    def _gather_worst(self) -> list[dict[str, Any]]:
        """Every rank's kept clips, lowest probability first, one per (file, first frame) (the sampler repeats
        a few clips to even out the ranks)."""
        parts = all_gather_object(list(self._worst)) if get_world_size() > 1 else [self._worst]
        merged = sorted((x for part in parts for x in part), key=lambda x: (-x[0], -x[1]))  # p, then seen first
        seen, out = set(), []
        for neg_p, _, key, caption, strip in merged:
            if key in seen:
                continue
            seen.add(key)
            out.append({'p': -neg_p, 'caption': caption, 'strip': strip})
        return out[: self.num_worst]

    def after_test_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        if self._localization is not None:
            self._localization.after_test_epoch(runner, metrics)
            return
        size = len(runner.test_dataloader.dataset)
        records = collect_results(self._records, size, 'cpu')
        worst = self._gather_worst()
        self._records, self._worst = [], []
        if not is_main_process():
            return
        tables, class_ap = {}, None
        for m in getattr(getattr(runner, 'test_evaluator', None), 'metrics', []) or []:
            if hasattr(m, 'per_class_table'):
                try:
                    tables[f'{type(m).__name__} per class'] = m.per_class_table()
                except RuntimeError:  # metric not evaluated
                    continue
            if getattr(m, 'class_ap', None) is not None:
                class_ap = [float(v) for v in m.class_ap]
        cells: list = []
        sections = build_report_sections(records, self.classes, metrics, tables, worst, self.num_worst, class_ap,
                                         cells)
        out = self.out_file if osp.isabs(self.out_file) else osp.join(runner.work_dir, self.out_file)
        write_html_report(out, 'Video recognition report', sections)
        if cells:  # the report has a matrix: which clips are in it
            write_cells(cells_path(out), self.classes, 'clips', cells)
        runner.logger.info(f'video report written to {out}')
