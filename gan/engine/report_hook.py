"""``tools/eval.py --report`` for GANs: an HTML report with the metrics, sample grids and the worst pairs by PSNR."""

from __future__ import annotations

import heapq
import math
import os.path as osp
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from gan.evaluation.image_quality import psnr_per_image
from gan.registry import HOOKS
from gan.visualization import generated_grid, sample_row, source_field, target_field
from oars.visualization import ReportSection, write_html_report
from oars_deploy.draw import make_grid
from oars_deploy.words import plural

GAN_UNITS = 'PSNR in dB; SSIM and attribute accuracy are fractions 0–1; FID and KID are distances (lower is better)'
"""The metrics table's caption: GAN metrics are not all proportions, so each unit is named."""


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'EvaluationReportHook: {name} must be an integer >= 0, got {value!r}')
    return value


def build_report_sections(metrics: Mapping[str, Any] | None, grid: np.ndarray | None, grid_caption: str,
                          psnrs: Sequence[float], worst: Sequence[tuple[str, np.ndarray]],
                          num_worst: int) -> list[ReportSection]:
    """The report's sections: metric table, the sample grid (BGR uint8, or None), the PSNR summary and the worst
    pairs (``(caption, BGR row)``, lowest PSNR first)."""
    rows = [[k, v] for k, v in (metrics or {}).items()]
    sections = [ReportSection('Metrics', tables=[{'header': ['metric', 'value'], 'rows': rows,
                                                   'caption': GAN_UNITS}])]
    if grid is not None:
        sections.append(ReportSection('Samples', text=grid_caption, images=[grid]))
    if not psnrs:
        sections.append(ReportSection('Worst pairs', text='The test samples have no ground truth to compare the '
                                      'output with (noise models, unpaired data): no per-image PSNR.'))
        return sections
    finite = [p for p in psnrs if math.isfinite(p)]
    text = (f'{plural(len(psnrs), "image")}; per-image PSNR (dB, data range 255): mean {np.mean(finite):.2f}, '
            f'median {np.median(finite):.2f}, min {min(finite):.2f}' if finite
            else f'{plural(len(psnrs), "image")}, all '
            'identical to their target (PSNR inf)')
    if len(finite) < len(psnrs):
        text += f'; {len(psnrs) - len(finite)} identical to their target (PSNR inf)'
    sections.append(ReportSection(f'Worst pairs by PSNR (up to {num_worst})', text=text + '. Lowest first; '
                                  'input | output | target.', images=list(worst)))
    return sections


@HOOKS.register_module()
class EvaluationReportHook(Hook):
    """After testing, write ``out_file`` (relative: under the work dir), a self-contained HTML report:

    * the evaluator's metrics (PSNR/SSIM/FID/... as configured);
    * a grid of the first ``num_samples`` results (input | output | target rows for image-to-image models, the
      generated images for noise models);
    * the ``num_worst`` samples with the lowest per-image PSNR against their target (``gt_img``, else the other
      domain's real image), as input | output | target, when the samples have a target of the output's shape.

    Memory: one float per image plus ``num_samples + num_worst`` small pictures per rank.
    """

    priority = 'LOW'

    def __init__(self, out_file: str = 'report.html', num_samples: int = 16, num_worst: int = 8) -> None:
        self.out_file = out_file
        self.num_samples = _check_int('num_samples', num_samples)
        self.num_worst = _check_int('num_worst', num_worst)
        self._direction = 'AtoB'
        self._reset()

    def _reset(self) -> None:
        self._psnrs: list[float] = []
        self._worst: list[tuple] = []  # min-heap on -PSNR: the root is the best of the kept pairs
        self._samples: list[Any] = []  # BGR rows (image-to-image) or fake tensors (noise models)
        self._noise = False
        self._seq = 0

    def before_test(self, runner) -> None:
        self._reset()
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self._direction = str(getattr(model, 'direction', 'AtoB'))

    def after_test_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        samples = [s for s in outputs or [] if 'fake_img' in s]
        for sample in samples:
            if len(self._samples) < self.num_samples:
                if source_field(sample, self._direction) is None:
                    self._noise = True
                    self._samples.append(sample.fake_img.cpu())
                else:
                    self._samples.append(sample_row(sample, self._direction))
        pairs = [(s, target_field(s, self._direction)) for s in samples]
        pairs = [(s, t) for s, t in pairs if t is not None and s.get(t).shape == s.fake_img.shape]
        if not pairs or source_field(pairs[0][0], self._direction) is None:
            return  # noise models: the real image of a sample is not the target of its noise
        fake = torch.stack([s.fake_img.float().cpu() for s, _ in pairs])
        gt = torch.stack([s.get(t).float().cpu() for s, t in pairs])
        values = psnr_per_image(fake, gt).tolist()
        self._psnrs += values
        for (sample, _), value in zip(pairs, values):
            self._seq += 1
            if self.num_worst == 0:
                continue
            if len(self._worst) >= self.num_worst and value >= -self._worst[0][0]:
                continue
            name = osp.basename(str(sample.metainfo.get('img_path') or f'sample {self._seq}'))
            heapq.heappush(self._worst, (-value, -self._seq, name, sample_row(sample, self._direction)))
            if len(self._worst) > self.num_worst:
                heapq.heappop(self._worst)

    def after_test_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        if get_world_size() > 1:
            parts = all_gather_object((self._worst, self._psnrs, self._samples, self._noise))
        else:
            parts = [(self._worst, self._psnrs, self._samples, self._noise)]
        self._reset()
        if not is_main_process():
            return
        worst, seen = [], set()
        for item in sorted((x for p in parts for x in p[0]), key=lambda x: (-x[0], -x[1])):
            if item[2] not in seen:  # a distributed sampler repeats a few samples to even out the ranks
                seen.add(item[2])
                worst.append((f'{item[2]}: PSNR {-item[0]:.2f} dB', item[3]))
        samples = [x for p in parts for x in p[2]][: self.num_samples]
        noise = any(p[3] for p in parts)
        grid, caption = None, ''
        if samples and noise:
            grid, caption = generated_grid(samples), f'The first {len(samples)} generated images (test order).'
        elif samples:
            grid = make_grid(samples, ncols=2)
            caption = f'The first {len(samples)} test samples: input | output | target.'
        sections = build_report_sections(metrics, grid, caption, [v for p in parts for v in p[1]],
                                         worst[: self.num_worst], self.num_worst)
        out = self.out_file if osp.isabs(self.out_file) else osp.join(runner.work_dir, self.out_file)
        write_html_report(out, 'GAN evaluation report', sections)
        runner.logger.info(f'GAN report written to {out}')
