"""``tools/eval.py --report`` for temporal action localisation: the shared HTML report with the metrics, the model
against a random-segment baseline, the AR-AN curves, per-class AP (labelled detections) and the videos with the
lowest recall as timelines.

The video task's ``EvaluationReportHook`` (:class:`video.engine.report_hook.VideoReportHook`) hands its work to
:class:`LocalizationReport` when the test dataset holds timed segments.
"""

from __future__ import annotations

import json
import os.path as osp
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from mmengine.dist import collect_results, is_main_process

from oars.evaluation.report import FRACTION_NOTE
from oars.visualization import ReportSection, plot_per_class_bars, write_html_report
from oars_deploy.atomic import atomic_write
from oars_deploy.words import plural
from video.engine.localization_records import (
    localization_record,
    read_frames,
    summarize,
    timeline_picture,
    video_folder,
    video_recall,
)
from video.localization.baseline import random_baseline

HEADLINE = ('AR@1', 'AR@5', 'AR@10', 'AR@100', 'AUC', 'mAP@0.5', 'mAP')


def plot_ar_an(curves: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The AR-AN curves ``{name: (proposals per video [P], average recall [P])}`` as a BGR uint8 image."""
    fig = Figure(figsize=(6.0, 4.0), dpi=100, layout='constrained')
    ax = fig.add_subplot()
    for name, (an, ar) in curves.items():
        ax.plot(an, ar, label=name)
    ax.set(xlabel='average number of proposals per video (AN)', ylabel='average recall (tIoU 0.5:0.05:0.95)',
           title='AR-AN', ylim=(0.0, 1.0))
    ax.grid(True, alpha=0.3)
    ax.legend(loc='lower right')
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[..., 2::-1])


def compare(records: Sequence[dict[str, Any]], num_classes: int, seed: int = 0) -> tuple[dict, dict]:
    """(the model's :func:`summarize`, the random baseline's): the baseline draws, per video, as many uniformly
    random segments as the model gave it (:mod:`video.localization.baseline`), labelled at random when the model
    labels its segments."""
    model = summarize(records, num_classes)
    props = random_baseline([(r['name'], r['duration'], len(r['proposals'])) for r in records], seed)
    labelled = model['map_kind'] == 'per-class'
    segs = random_baseline([(r['name'], r['duration'], len(r['segments'])) for r in records], seed + 1,
                           num_classes) if labelled else [None] * len(records)
    return model, summarize(records, num_classes, props, segs)


def comparison_line(model: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    """``AR@100 0.83 (random 0.21), AUC ..., mAP@0.5 ... (class-agnostic)`` for logs and the demo."""
    parts = [f'{k} {model[k]:.4f} (random {baseline[k]:.4f})' for k in ('AR@100', 'AUC', 'mAP@0.5', 'mAP')
             if k in model]
    return ', '.join(parts) + f" [mAP {model['map_kind']}]"


def build_sections(records: Sequence[dict[str, Any]], class_names: Sequence[str], metrics: Mapping[str, Any] | None,
                   model: Mapping[str, Any], baseline: Mapping[str, Any], worst: Sequence[tuple[str, np.ndarray]],
                   num_worst: int) -> list[ReportSection]:
    """The report's sections (``worst``: (caption, timeline picture) of the lowest-recall videos)."""
    sections = [ReportSection('Metrics', text=f'{plural(len(records), "video")} (the evaluator\'s numbers).',
                              tables=[{'header': ['metric', 'value'], 'caption': FRACTION_NOTE,
                                       'rows': [[k, v] for k, v in (metrics or {}).items()]}])]
    rows = [[k, model[k], baseline[k]] for k in HEADLINE if k in model]
    sections.append(ReportSection(
        'Model against a random baseline',
        text='Random baseline: per video as many segments as the model gave, start and end uniform over the video, '
             f"random scores (seeded). mAP is {model['map_kind']} "
             + ('(the model labels its segments).' if model['map_kind'] == 'per-class' else
                '(proposals as detections of one class "action").')
             + ' tIoU 0.5:0.05:0.95.',
        tables=[{'header': ['metric', 'model', 'random baseline'], 'rows': rows, 'caption': FRACTION_NOTE}],
        images=[('AR-AN curves', plot_ar_an({'model': (model['proposals_per_video'], model['avg_recall']),
                                             'random baseline': (baseline['proposals_per_video'],
                                                                 baseline['avg_recall'])}))]))
    if model['map_kind'] == 'per-class':
        names = [str(c) for c in class_names]
        values = {n: float(v) for n, v in zip(names, model['class_ap'])}
        sections.append(ReportSection('Per-class AP', text='AP averaged over tIoU 0.5:0.05:0.95 (n/a: no ground '
                                      'truth of the class).', images=[plot_per_class_bars(
                                          values, title='AP per class', ylabel='AP')]))
    sections.append(ReportSection(f'Worst videos (up to {num_worst})',
                                  text='Lowest recall of the ground truth by the top 100 proposals (averaged over '
                                       'the tIoU thresholds); ground truth against the 5 best predicted segments.',
                                  images=list(worst)))
    return sections


class LocalizationReport:
    """Collects a record per test video and writes ``out_file`` (HTML, :func:`build_sections`) and, beside it,
    ``localization_vs_baseline.json`` (the model's and the baseline's headline numbers); logs the comparison.

    Args:
        out_file: the report's path (relative: under the work dir).
        num_worst: timelines of the lowest-recall videos in the report.
        num_frames: frames per timeline strip (when the dataset's ``data_prefix.video`` names the videos).
        baseline_seed: the random baseline's seed.
    """

    def __init__(self, out_file: str, num_worst: int = 8, num_frames: int = 12, baseline_seed: int = 0) -> None:
        self.out_file, self.num_worst, self.num_frames, self.baseline_seed = out_file, num_worst, num_frames, \
            baseline_seed
        self.classes: list[str] = []
        self._folder: str | None = None
        self._records: list[dict[str, Any]] = []

    def before_test(self, runner) -> None:
        dataset = runner.test_dataloader.dataset
        self.classes = [str(c) for c in dataset.metainfo['classes']]
        self._folder = video_folder(dataset)
        self._records = []

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        self._records.extend(localization_record(s, self._folder) for s in outputs or [])

    def after_test_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        records = collect_results(self._records, len(runner.test_dataloader.dataset), 'cpu')
        self._records = []
        if not is_main_process() or not records:
            return
        model, baseline = compare(records, len(self.classes), self.baseline_seed)
        recalls = [video_recall(r) for r in records]
        order = sorted((i for i, v in enumerate(recalls) if not np.isnan(v)), key=lambda i: recalls[i])
        worst = [(f"{records[i]['name']}: recall@100 {recalls[i]:.2f}",
                  timeline_picture(records[i], self.classes, 5, read_frames(records[i]['video'], self.num_frames)))
                 for i in order[: self.num_worst]]
        out = self.out_file if osp.isabs(self.out_file) else osp.join(runner.work_dir, self.out_file)
        write_html_report(out, 'Temporal action localisation report',
                          build_sections(records, self.classes, metrics, model, baseline, worst, self.num_worst))
        numbers = {'videos': len(records), 'map_kind': model['map_kind'],
                   'model': {k: model[k] for k in HEADLINE if k in model},
                   'random_baseline': {k: baseline[k] for k in HEADLINE if k in baseline}}
        atomic_write(osp.join(osp.dirname(out), 'localization_vs_baseline.json'), json.dumps(numbers, indent=2))
        runner.logger.info(f'localisation report written to {out}; {comparison_line(model, baseline)}')
