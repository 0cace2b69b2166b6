"""``tools/optimize_anchors.py`` for heads whose anchors are ``scales x ratios`` per level: RetinaNet and RPN
(``AnchorGenerator``) and SSD / SSDLite (``SSDPriorGenerator``).

It fits the aspect ratios (and, for ``AnchorGenerator``, the scales inside the octave) with :mod:`grid_fit`, then
scores the config's anchors and the fitted ones with the anchor shapes of the generator the model builds
(``TASK_UTILS``, from the config): there is no second anchor implementation to drift from the model's. The score
is that of YOLO's tools: each box against every anchor shape, centred on each other (positions on the grid are
left out, so it is the best the shapes allow), its best IoU averaged over boxes, and the best possible recall:
the share of boxes whose best IoU reaches the assigner's positive threshold (``train_cfg``'s ``pos_iou_thr``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from mmengine.registry import DefaultScope

from detection.anchors.boxes import TrainingBoxes, training_boxes
from detection.anchors.fit import MIN_SIDE, AnchorFit, wh_iou
from detection.anchors.grid_fit import fit_octave_scales, fit_paired_ratios, fit_ratios
from oars.config.errors import ConfigError

# (head, generator key, train_cfg path to the head's assigner), in the order they are looked for
GENERATOR_PLACES = (('bbox_head', 'anchor_generator', ('assigner',)),
                    ('bbox_head', 'prior_generator', ('assigner',)),
                    ('rpn_head', 'anchor_generator', ('rpn', 'assigner')))
FITTED_TYPES = ('AnchorGenerator', 'SSDPriorGenerator')
KINDS = ("optimize_anchors fits three kinds of anchors: YOLO-style lists (model.bbox_head.anchors: [[w, h], ...]), "
         "AnchorGenerator scales x ratios (model.bbox_head.anchor_generator: RetinaNet; model.rpn_head."
         "anchor_generator: RPN) and SSDPriorGenerator aspect ratios (model.bbox_head.prior_generator: SSD, "
         "SSDLite), the last two matched to boxes by IoU (a train_cfg assigner with pos_iou_thr)")
RATIO_DECIMALS = 3
SCORE_CHUNK = 100_000  # boxes scored at once: one [chunk, K] float64 block per step


@dataclass(frozen=True)
class GridAnchors:
    """Where a config keeps its ``scales x ratios`` anchors.

    Attributes:
        key: the generator's dotted key, e.g. ``model.bbox_head.anchor_generator``.
        cfg: the generator's config (a plain dict, ``type`` included).
        pos_iou_thr: the assigner's positive IoU threshold (the BPR's threshold).
        thr_key: where that threshold was read, for the report.
    """

    key: str
    cfg: dict
    pos_iou_thr: float
    thr_key: str


def _plain(value: Any) -> Any:
    """A config value as plain dicts / lists (mmengine's ConfigDict and tuples taken apart)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def find_grid_anchors(model: dict, where: str) -> GridAnchors:
    """The ``scales x ratios`` anchors of ``model`` (a config's ``model`` section).

    Raises:
        ConfigError: no generator of a fitted type, or no IoU threshold for it (anchor-free heads such as FCOS
            have a generator of one point per position and an assigner without ``pos_iou_thr``); the message
            names what the config has and the kinds that are fitted (:data:`KINDS`).
    """
    found = []
    for head, gen_key, assigner_path in GENERATOR_PLACES:
        gen = (model.get(head) or {}).get(gen_key)
        if not isinstance(gen, dict):
            continue
        key = f'model.{head}.{gen_key}'
        found.append(f"{key} of type {gen.get('type')!r}")
        if gen.get('type') not in FITTED_TYPES:
            continue
        assigner: Any = model.get('train_cfg') or {}
        for part in assigner_path:
            assigner = assigner.get(part) if isinstance(assigner, dict) else None
        thr = assigner.get('pos_iou_thr') if isinstance(assigner, dict) else None
        thr_key = 'model.train_cfg.' + '.'.join(assigner_path) + '.pos_iou_thr'
        if thr is None:
            found[-1] += f' but no {thr_key} (its boxes are not matched to anchors by IoU)'
            continue
        if not isinstance(thr, (int, float)) or not 0 < thr <= 1:
            raise ConfigError(f'{where}: {thr_key} is {thr!r}; expected an IoU in (0, 1]')
        return GridAnchors(key, _plain(gen), float(thr), thr_key)
    has = '; '.join(found) if found else 'no anchors, anchor_generator or prior_generator in its heads'
    raise ConfigError(f'{where}: cannot fit these anchors ({has}). {KINDS}')


def build_generator(gen_cfg: dict, key: str) -> Any:
    """The generator the model would build from ``gen_cfg`` (``TASK_UTILS``, detection scope).

    Raises:
        ConfigError: the generator rejects the config (naming ``key`` and its reason).
    """
    from detection.registry import TASK_UTILS

    try:
        with DefaultScope.overwrite_default_scope('detection'):
            return TASK_UTILS.build(dict(gen_cfg))
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(f'{key}: {err}') from None


def anchor_shapes(generator: Any, input_wh: tuple[int, int] | None) -> np.ndarray:
    """Every anchor shape of ``generator`` as float64 [K, 2] (w, h) in input pixels.

    Args:
        generator: an ``AnchorGenerator`` (its per-level ``base_anchors``, rounding included) or an
            ``SSDPriorGenerator`` (its relative ``wh_pairs`` times the input's (W, H)).
        input_wh: the network input (W, H); needed by SSD, whose priors are fractions of it.

    Returns:
        float64 [K, 2]: all levels' base anchors (shapes only; the assigner compares a box with every level).
    """
    if hasattr(generator, 'base_anchors'):
        base = np.concatenate([b.numpy().astype(np.float64) for b in generator.base_anchors])
        return base[:, 2:] - base[:, :2]
    rel = np.concatenate([p.numpy().astype(np.float64) for p in generator.wh_pairs])
    return rel * np.asarray(input_wh, dtype=np.float64)


def score(wh: np.ndarray, shapes: np.ndarray, pos_iou_thr: float) -> AnchorFit:
    """How well anchor shapes fit boxes, as the assigner will see it at best (centred on each other).

    Args:
        wh: float [M, 2] box widths and heights (> 0), scored in chunks of :data:`SCORE_CHUNK` so COCO's 860k
            boxes stay within a few hundred MB.
        shapes: float [K, 2] anchor widths and heights (:func:`anchor_shapes`).
        pos_iou_thr: the assigner's positive threshold (a box reaching it with its best anchor is recallable).

    Returns:
        :class:`AnchorFit`: mean best IoU, and BPR = the share of boxes whose best IoU is >= ``pos_iou_thr``.
    """
    best = np.concatenate([wh_iou(wh[i:i + SCORE_CHUNK], shapes).max(1) for i in range(0, len(wh), SCORE_CHUNK)])
    return AnchorFit(float(best.mean()), float((best >= pos_iou_thr - 1e-9).mean()))


def _anchor_generator_fits(gen: Any, cfg: dict, wh: np.ndarray) -> tuple[dict, dict, str | None]:
    """Fitted ``ratios`` and scale keys of an ``AnchorGenerator`` config; the scale keys are empty (and a note
    says why) when a level's scales span an octave or more (e.g. the C4 RPN's 2 .. 32 on one level), where a
    position inside the octave does not describe them."""
    ratios = {'ratios': [round(float(r), RATIO_DECIMALS) for r in fit_ratios(wh, len(gen.ratios))]}
    spans = [max(s) / min(s) for s in gen.level_scales]
    if max(spans) >= 2.0:
        return ratios, {}, (f'scales kept: a level spans {max(spans):g}x (an octave or more), which a position '
                            'inside the octave does not describe')
    refs = np.array([b * min(s) for b, s in zip(gen.base_sizes, gen.level_scales)], dtype=np.float64)
    pos = fit_octave_scales(wh, refs, len(gen.level_scales[0]))
    if cfg.get('sizes') is not None:
        return ratios, {'sizes': [[max(1, int(round(r * 2 ** p))) for p in pos] for r in refs]}, None
    low = min(gen.level_scales[0])
    scales: dict = {'scales': [round(float(low * 2 ** p), RATIO_DECIMALS) for p in pos]}
    scales.update({k: None for k in ('octave_base_scale', 'scales_per_octave') if cfg.get(k) is not None})
    return ratios, scales, None


def _ssd_fits(gen: Any, wh: np.ndarray) -> dict:
    """Fitted ``aspect_ratios`` of an ``SSDPriorGenerator``: one fit per distinct count of ratios per level (SSD300
    has levels with 1 and with 2), each level taking the fit of its count, so the head's channels stay."""
    counts = sorted({len(level) for level in gen.aspect_ratios} - {0})
    fits = {n: [round(float(r), RATIO_DECIMALS) for r in fit_paired_ratios(wh, n)] for n in counts}
    return {'aspect_ratios': [fits.get(len(level), []) for level in gen.aspect_ratios]}


@dataclass(frozen=True)
class GridResult:
    """What :func:`fit_grid_anchors` found.

    Attributes:
        boxes: the training boxes (training-input pixels).
        anchors: where the anchors are and the IoU threshold.
        rows: (name, changed keys, :class:`AnchorFit`) of the config and of each fitted variant.
        best: the index into ``rows`` with the highest mean best IoU (0, the config, on ties).
        note: why the scales were kept, or None.
        input_wh: the network input (W, H) the SSD priors were scaled to, or None.
        current: the config's values of the fitted keys as the generator holds them (RetinaNet's octave scales
            written out), for the report.
    """

    boxes: TrainingBoxes
    anchors: GridAnchors
    rows: list[tuple[str, dict, AnchorFit]]
    best: int
    note: str | None
    input_wh: tuple[int, int] | None
    current: dict


def fit_grid_anchors(cfg: Any, where: str, anchors: GridAnchors, input_size: int | None = None) -> GridResult:
    """Fit ``anchors`` (found by :func:`find_grid_anchors` in the loaded config ``cfg``) to its training boxes.

    Returns:
        :class:`GridResult`: the config's anchors and the fitted variants (ratios, scales, both) scored on every
        box; ``best`` never scores below the config.

    Raises:
        ConfigError: SSD priors without a known input size (no resize in the pipeline or the data preprocessor and
            no ``--input-size``); a generator config the generator rejects.
    """
    boxes = training_boxes(cfg, input_size)
    input_wh = boxes.scaling.scale
    gen = build_generator(anchors.cfg, anchors.key)
    if not hasattr(gen, 'base_anchors') and input_wh is None:
        raise ConfigError(f"{where}: {anchors.key}'s priors are fractions of the network input, whose size the "
                          "config does not fix (no Resize in the train pipeline, no fixed_size in the data "
                          "preprocessor); pass --input-size S")
    wh = boxes.wh[(boxes.wh >= MIN_SIDE).all(1)]
    wh = wh if len(wh) else boxes.wh
    note = None
    if hasattr(gen, 'base_anchors'):
        ratios, scales, note = _anchor_generator_fits(gen, anchors.cfg, wh)
        variants = [('fitted ratios', ratios)] + ([('fitted scales', scales),
                                                   ('fitted ratios + scales', {**ratios, **scales})] if scales else [])
    else:
        variants = [('fitted aspect_ratios', _ssd_fits(gen, wh))]
    rows = []
    for name, changes in [('config', {})] + variants:
        shapes = anchor_shapes(build_generator({**anchors.cfg, **changes}, anchors.key), input_wh)
        rows.append((name, changes, score(boxes.wh, shapes, anchors.pos_iou_thr)))
    best = 0
    for i in range(1, len(rows)):
        if rows[i][2].mean_iou > rows[best][2].mean_iou:
            best = i
    current = {'ratios': getattr(gen, 'ratios', None), 'scales': getattr(gen, 'scales', None),
               'sizes': getattr(gen, 'level_scales', None), 'aspect_ratios': getattr(gen, 'aspect_ratios', None)}
    return GridResult(boxes, anchors, rows, best, note, None if hasattr(gen, 'base_anchors') else input_wh, current)


def override_line(key: str, changes: dict) -> str:
    """``-o key.k=v ...`` for ``changes``, each value as compact JSON (valid YAML, one shell word: no spaces)."""
    return '-o ' + ' '.join(f'{key}.{k}={json.dumps(v, separators=(",", ":"))}' for k, v in changes.items())


def format_grid_report(result: GridResult) -> str:
    """The printed report: data, box shapes, the score table, the config's and the fitted values, the ``-o``
    line."""
    wh, anchors = result.boxes.wh, result.anchors
    lo, med, hi = np.percentile(wh, [0, 50, 100], axis=0)
    r5, r50, r95 = np.percentile(wh[:, 1] / wh[:, 0], [5, 50, 95])
    input_note = '' if result.input_wh is None else f', input {result.input_wh[0]}x{result.input_wh[1]} (WxH)'
    bpr = f'BPR (best IoU >= {anchors.pos_iou_thr:g})'
    lines = [f'{len(wh)} boxes of {result.boxes.num_images} training images: {"; ".join(result.boxes.sources)}',
             f'box sizes {result.boxes.scaling.describe()}',
             f'  w x h px: min {lo[0]:.0f}x{lo[1]:.0f}, median {med[0]:.0f}x{med[1]:.0f}, max {hi[0]:.0f}x{hi[1]:.0f}'
             f'; h / w: 5% {r5:.3g}, median {r50:.3g}, 95% {r95:.3g}',
             f"anchors: {anchors.key} ({anchors.cfg.get('type')}{input_note}), shapes from the model's own "
             f'generator, each box against each shape centred on it; BPR threshold {anchors.thr_key}', '',
             f'{"":<26}{"mean best IoU":>14}{bpr:>26}']
    lines += [f'{name:<26}{fit.mean_iou:>14.4f}{fit.bpr:>26.4f}' for name, _, fit in result.rows]
    lines.append('')
    fitted: dict = {}
    for _, changes, _ in result.rows[1:]:
        fitted.update({k: v for k, v in changes.items() if v is not None})
    for k, v in fitted.items():
        now = result.current.get(k)
        now = [round(x, RATIO_DECIMALS) if isinstance(x, float) else x for x in now] if k == 'scales' else now
        lines.append(f'  {k}: config {json.dumps(now)} -> fitted {json.dumps(v)}')
    if result.note:
        lines.append(f'  ({result.note})')
    lines.append('')
    name, changes, _ = result.rows[result.best]
    if result.best == 0:
        lines.append("the config's anchors fit these boxes at least as well as the fitted ones; nothing to change")
    else:
        lines += [f'best: {name}; paste into the command line (or into the config):',
                  f'  {override_line(anchors.key, changes)}']
    return '\n'.join(lines)


def optimize_grid_anchors(cfg: Any, where: str, num: int | None = None, input_size: int | None = None) -> str:
    """Find, fit and report the ``scales x ratios`` anchors of the loaded config ``cfg``.

    Raises:
        ConfigError: anchors of a kind that is not fitted (:func:`find_grid_anchors`), or ``num`` given (the
            count of ratios and scales is the config's: the head's output channels depend on it).
    """
    anchors = find_grid_anchors(_plain(cfg.get('model') or {}), where)
    if num is not None:
        raise ConfigError(f'{where}: --num sets how many YOLO anchors to fit; {anchors.key} keeps its count of '
                          'ratios and scales (the head\'s channels depend on it): change them in the config to fit '
                          'another count')
    return format_grid_report(fit_grid_anchors(cfg, where, anchors, input_size))
