"""``tools/optimize_anchors.py``: fit anchors to a config's training boxes and print the comparison with the
config's anchors and the ``-o`` line to paste."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detection.anchors.boxes import TrainingBoxes, training_boxes
from detection.anchors.fit import BPR_IOU, MIN_SIDE, AnchorFit, anchor_fit, fit_anchors
from oars.config.errors import ConfigError

ANCHORS_KEY = 'model.bbox_head.anchors'
MASKS_KEY = 'model.bbox_head.anchor_masks'


def config_anchors(head: dict, where: str) -> np.ndarray | None:
    """The head's ``anchors`` as float64 [K, 2], or None when the head has none."""
    anchors = (head or {}).get('anchors')
    if anchors is None:
        return None
    try:
        arr = np.asarray(anchors, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.zeros((0,))
    if arr.ndim != 2 or arr.shape[1] != 2 or not len(arr) or (arr <= 0).any():
        raise ConfigError(f'{where}: {ANCHORS_KEY} is {anchors!r}; expected a list of positive [w, h] pairs')
    return arr


def split_masks(num: int, levels: int) -> list[list[int]]:
    """``anchor_masks`` for ``num`` anchors sorted by area over ``levels`` levels ordered deepest (largest stride)
    first, as YOLOv3 configs list them: as even a split as possible, the largest anchors on the first level and
    any remainder on the finest levels (small objects are the most numerous)."""
    sizes = [num // levels + (1 if i >= levels - num % levels else 0) for i in range(levels)]
    masks, end = [], num
    for size in sizes:
        masks.append(list(range(end - size, end)))
        end -= size
    return masks


def _by_area(anchors: np.ndarray) -> np.ndarray:
    """``anchors`` [K, 2] sorted by area (stable), the order the fitted ones have."""
    return anchors[np.argsort(anchors.prod(1), kind='stable')]


def _flow(anchors: np.ndarray) -> str:
    """``[[w,h],...]`` without spaces (one shell word)."""
    return '[' + ','.join(f'[{int(w)},{int(h)}]' for w, h in anchors) + ']'


def _row(name: str, fit: AnchorFit) -> str:
    return f'{name:<24}{fit.mean_iou:>14.4f}{fit.bpr:>24.4f}'


def format_report(boxes: TrainingBoxes, current: np.ndarray | None, fitted: np.ndarray, head: dict, iters: int,
                  seed: int) -> str:
    """The printed report: data, box sizes, mean best IoU and BPR before/after, anchors and the ``-o`` line(s)."""
    wh = boxes.wh
    lo, med, hi = np.percentile(wh, [0, 50, 100], axis=0)
    lines = [f'{len(wh)} boxes of {boxes.num_images} training images: {"; ".join(boxes.sources)}',
             f'box sizes {boxes.scaling.describe()}',
             f'  w x h px: min {lo[0]:.0f}x{lo[1]:.0f}, median {med[0]:.0f}x{med[1]:.0f}, max {hi[0]:.0f}x{hi[1]:.0f}'
             f' ({int(((wh < MIN_SIDE).any(1)).sum())} below {MIN_SIDE:g} px left out of the fit)', '',
             f'{"":<24}{"mean best IoU":>14}{f"BPR (best IoU > {BPR_IOU})":>24}']
    after = anchor_fit(wh, fitted)
    if current is not None:
        lines.append(_row(f'config ({len(current)} anchors)', anchor_fit(wh, current)))
    lines.append(_row(f'fitted ({len(fitted)} anchors)', after))
    lines += ['', f'k-means on 1 - IoU of (w, h) pairs, then {iters} genetic generations (seed {seed}); anchors '
              'rounded to whole pixels, smallest first:', f'  {_flow(fitted)}']
    if current is not None and len(current) == len(fitted) and np.array_equal(_by_area(current), fitted):
        lines.append("the config's anchors fit these boxes best already; nothing to change")
        return '\n'.join(lines)
    lines += ['', 'paste into the command line (or as model.bbox_head.anchors in the config):',
              f'  -o {ANCHORS_KEY}="{_flow(fitted)}"']
    masks = head.get('anchor_masks')
    if current is None or len(current) != len(fitted) or masks is None:
        levels = len(masks) if masks else len(head.get('strides') or [32, 16, 8])
        new = split_masks(len(fitted), levels)
        lines.append(f'  -o {MASKS_KEY}="{str(new).replace(" ", "")}"')
        lines.append('  (anchor_masks: level i, deepest first, uses these indices of the sorted anchors)')
    else:
        lines.append(f'  ({MASKS_KEY} {masks} stays: the anchors are sorted by area like the config\'s)')
    return '\n'.join(lines)


@dataclass(frozen=True)
class ConfigAnchors:
    """What :func:`fit_config_anchors` found.

    Attributes:
        boxes: the training boxes (sizes in training-input pixels).
        current: the config's anchors float64 [K, 2], or None.
        fitted: the fitted anchors float64 [N, 2], whole pixels, sorted by area.
        head: the config's ``model.bbox_head`` (for ``anchor_masks`` and ``strides``).
    """

    boxes: TrainingBoxes
    current: np.ndarray | None
    fitted: np.ndarray
    head: dict


def fit_config_anchors(config: str, overrides: Sequence[str] = (), num: int | None = None,
                       input_size: int | None = None, iters: int = 1000, seed: int = 0) -> ConfigAnchors:
    """Load ``config`` (+ ``overrides``) and fit ``num`` anchors to its training boxes.

    Args:
        config: the YAML config.
        overrides: ``-o key=value`` items.
        num: anchors to fit (default: as many as the config's ``model.bbox_head.anchors``).
        input_size: replaces the train pipeline's resize scale by (S, S) (see ``boxes.training_scaling``).
        iters: genetic generations.
        seed: seed of k-means++ and the genetic step.

    Returns:
        :class:`ConfigAnchors`; with as many anchors as the config's, the fitted ones never have a lower mean best
        IoU than the config's (the config's compete with k-means' as the genetic step's start, and are kept when
        rounding to whole pixels would make the fit worse).

    Raises:
        ConfigError: no ``num`` and no anchors in the config; bad anchors in the config.
    """
    from oars.config import load_config

    cfg = load_config(config, list(overrides))
    head = dict(cfg.get('model', {}).get('bbox_head') or {})
    current = config_anchors(head, config)
    if num is None:
        if current is None:
            raise ConfigError(f'{config}: {ANCHORS_KEY} is not set; pass --num N (how many anchors to fit)')
        num = len(current)
    boxes = training_boxes(cfg, input_size)
    wh = boxes.wh[(boxes.wh >= MIN_SIDE).all(1)]
    wh = wh if len(wh) else boxes.wh
    start = current if current is not None and len(current) == num else None
    fitted = _by_area(np.maximum(np.round(fit_anchors(wh, num, iters=iters, seed=seed, start=start)), 1.0))
    if start is not None and anchor_fit(boxes.wh, fitted).mean_iou < anchor_fit(boxes.wh, start).mean_iou:
        fitted = _by_area(start)  # rounding cost more than the fit gained
    return ConfigAnchors(boxes, current, fitted, head)


def optimize_config_anchors(config: str, overrides: Sequence[str] = (), num: int | None = None,
                            input_size: int | None = None, iters: int = 1000, seed: int = 0) -> str:
    """The printed report for ``config``: YOLO anchor lists (a ``model.bbox_head.anchors`` key, set or null) by
    :func:`fit_config_anchors` and :func:`format_report`; any other head by ``grid_report`` (``scales x ratios``
    anchors of RetinaNet / RPN / SSD, or a message naming the kinds that are fitted).

    Raises:
        ConfigError: see :func:`fit_config_anchors` and ``grid_report.optimize_grid_anchors``.
    """
    from oars.config import load_config

    cfg = load_config(config, list(overrides))
    if 'anchors' not in (cfg.get('model', {}).get('bbox_head') or {}):
        from detection.anchors.grid_report import optimize_grid_anchors

        return optimize_grid_anchors(cfg, config, num=num, input_size=input_size)
    found = fit_config_anchors(config, overrides, num=num, input_size=input_size, iters=iters, seed=seed)
    return format_report(found.boxes, found.current, found.fitted, found.head, iters, seed)
