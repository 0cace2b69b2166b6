"""Read one image's predictions and ground truth out of a data sample, in ORIGINAL image pixels.

Metrics, the report hook and the analysis all go through these functions, so that "where the boxes
are" is decided once. A sample is either a ``DetDataSample`` (what hooks see) or its ``to_dict()``
form (what mmengine's Evaluator hands to ``BaseMetric.process``: metainfo keys at the top level,
``InstanceData`` fields as plain dicts).

Ground truth travels in the *pipeline's* pixels (after resize, maybe flip); predictions are already in
the original image's pixels. ``gt_in_original`` undoes the flip (in ``img_shape`` coordinates) and
then divides by ``scale_factor`` (w, h). Crops cannot be undone; evaluation pipelines must not crop.
Instance masks follow the same rule: predicted ``masks`` are bool [K, ori_H, ori_W]; ground-truth ``masks``
([N, H, W] of the pipeline's image, maybe padded) are cut to ``img_shape``, unflipped and resized back to
``ori_shape`` (nearest) by ``gt_masks_in_original``. Records keep masks as COCO RLEs (``mask_rle``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from detection.evaluation.mask_rle import as_numpy_masks, encode_masks
from oars.data.transforms.geometric import resize_masks

_EMPTY_BOXES = np.zeros((0, 4), dtype=np.float64)


def _get(sample: Any, key: str, default: Any = None) -> Any:
    """``sample[key]`` for dicts, the attribute / metainfo entry for data elements."""
    if isinstance(sample, dict):
        return sample.get(key, default)
    if hasattr(sample, 'metainfo_keys') and key in sample.metainfo_keys():
        return sample.metainfo[key]
    return getattr(sample, key, default)


def _numpy(value: Any, dtype: Any) -> np.ndarray:
    if value is None:
        return np.zeros((0,), dtype=dtype)
    if hasattr(value, 'detach'):  # torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=dtype)


def _field(inst: Any, key: str) -> Any:
    return inst.get(key) if isinstance(inst, dict) else getattr(inst, key, None)


def _where(sample: Any) -> Any:
    return _get(sample, 'img_path', _get(sample, 'img_id', '?'))


def _instances(sample: Any, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """(bboxes [N, 4] float64, labels [N] int64, scores [N] float64 or None) of ``field``, or None if absent."""
    inst = _get(sample, field)
    if inst is None:
        return None
    bboxes = inst.get('bboxes') if isinstance(inst, dict) else getattr(inst, 'bboxes', None)
    labels = inst.get('labels') if isinstance(inst, dict) else getattr(inst, 'labels', None)
    scores = inst.get('scores') if isinstance(inst, dict) else getattr(inst, 'scores', None)
    boxes = _numpy(bboxes, np.float64).reshape(-1, 4)
    labs = _numpy(labels, np.int64).reshape(-1)
    if len(boxes) != len(labs):
        raise ValueError(f"{field}: {len(boxes)} bboxes but {len(labs)} labels in image "
                         f"{_get(sample, 'img_path', _get(sample, 'img_id', '?'))}")
    return boxes, labs, None if scores is None else _numpy(scores, np.float64).reshape(-1)


def predictions(sample: Any) -> dict[str, np.ndarray]:
    """``{'bboxes' [K, 4] float64, 'scores' [K] float64, 'labels' [K] int64}`` (original pixels, xyxy)."""
    got = _instances(sample, 'pred_instances')
    if got is None:
        raise KeyError("a data sample has no 'pred_instances'; the detector's predict mode must set it "
                       f"(image {_get(sample, 'img_path', _get(sample, 'img_id', '?'))})")
    boxes, labels, scores = got
    if scores is None:
        scores = np.ones(len(boxes), dtype=np.float64)
    if len(scores) != len(boxes):
        raise ValueError(f'pred_instances: {len(boxes)} bboxes but {len(scores)} scores')
    return {'bboxes': boxes, 'scores': scores, 'labels': labels}


def has_gt(sample: Any) -> bool:
    """Whether the sample carries ``gt_instances`` (the test pipeline loaded annotations)."""
    return _get(sample, 'gt_instances') is not None


def to_original(bboxes: np.ndarray, meta: Any) -> np.ndarray:
    """Map xyxy boxes from pipeline pixels back to original pixels: undo flip, divide by scale_factor."""
    boxes = np.array(bboxes, dtype=np.float64).reshape(-1, 4)
    if _get(meta, 'flip', False):
        direction = _get(meta, 'flip_direction', 'horizontal') or 'horizontal'
        img_shape = _get(meta, 'img_shape')
        if img_shape is None:
            raise ValueError("a flipped sample has no 'img_shape' in its metainfo; cannot undo the flip")
        h, w = float(img_shape[0]), float(img_shape[1])
        if direction in ('horizontal', 'diagonal'):
            boxes[:, [0, 2]] = w - boxes[:, [2, 0]]
        if direction in ('vertical', 'diagonal'):
            boxes[:, [1, 3]] = h - boxes[:, [3, 1]]
        if direction not in ('horizontal', 'vertical', 'diagonal'):
            raise ValueError(f"unknown flip_direction {direction!r}; expected 'horizontal', 'vertical' or 'diagonal'")
    scale = _get(meta, 'scale_factor')
    if scale is not None:
        sw, sh = (float(v) for v in np.asarray(scale, dtype=np.float64).reshape(-1)[:2])
        boxes /= np.array([sw, sh, sw, sh])
    return boxes


def gt_in_original(sample: Any) -> dict[str, np.ndarray]:
    """Ground truth of one sample in original pixels:
    ``{'bboxes' [N, 4], 'labels' [N], 'ignore_bboxes' [M, 4], 'ignore_labels' [M]}`` (float64 / int64).
    A sample without ``gt_instances`` raises ``KeyError``."""
    gt = _instances(sample, 'gt_instances')
    if gt is None:
        raise KeyError("a data sample has no 'gt_instances'; the test pipeline must load annotations "
                       "(LoadAnnotations before PackDetInputs) or the metric needs an ann_file "
                       f"(image {_get(sample, 'img_path', _get(sample, 'img_id', '?'))})")
    ign = _instances(sample, 'ignored_instances') or (_EMPTY_BOXES, np.zeros((0,), np.int64), None)
    return {'bboxes': to_original(gt[0], sample), 'labels': gt[1],
            'ignore_bboxes': to_original(ign[0], sample), 'ignore_labels': ign[1]}


def predicted_masks(sample: Any) -> np.ndarray | None:
    """``pred_instances.masks`` as bool [K, ori_H, ori_W] (original pixels, one per predicted box), or None when
    the model predicts no masks. ``ValueError`` when their count or size does not fit the sample."""
    inst = _get(sample, 'pred_instances')
    masks = None if inst is None else _field(inst, 'masks')
    if masks is None:
        return None
    masks = as_numpy_masks(masks, f'pred_instances.masks of image {_where(sample)}')
    num = len(_numpy(_field(inst, 'labels'), np.int64).reshape(-1))
    ori_shape = _get(sample, 'ori_shape')
    size = masks.shape[1:] if ori_shape is None else tuple(int(v) for v in ori_shape[:2])
    if len(masks) != num or masks.shape[1:] != size:
        raise ValueError(f'pred_instances.masks of image {_where(sample)} has shape {tuple(masks.shape)}; expected '
                         f'[{num}, {size[0]}, {size[1]}] ([K, ori_H, ori_W]: one mask per prediction, in original '
                         'image pixels)')
    return masks


def masks_to_original(masks: np.ndarray, meta: Any) -> np.ndarray:
    """Map instance masks [N, h, w] from pipeline pixels back to the original image: cut to ``img_shape`` (drops
    padding), undo the flip, resize to ``ori_shape`` (nearest). Returns uint8 [N, ori_H, ori_W]."""
    masks = np.asarray(masks, dtype=np.uint8)
    img_shape, ori_shape = _get(meta, 'img_shape'), _get(meta, 'ori_shape')
    if img_shape is not None:
        ih, iw = int(img_shape[0]), int(img_shape[1])
        if masks.shape[1] < ih or masks.shape[2] < iw:
            raise ValueError(f'gt masks of image {_where(meta)} are {masks.shape[2]}x{masks.shape[1]} (WxH), smaller '
                             f'than the pipeline image {iw}x{ih}; expected masks of the packed image')
        masks = masks[:, :ih, :iw]
    if _get(meta, 'flip', False):
        direction = _get(meta, 'flip_direction', 'horizontal') or 'horizontal'
        if direction not in ('horizontal', 'vertical', 'diagonal'):
            raise ValueError(f"unknown flip_direction {direction!r}; expected 'horizontal', 'vertical' or 'diagonal'")
        if direction in ('horizontal', 'diagonal'):
            masks = masks[:, :, ::-1]
        if direction in ('vertical', 'diagonal'):
            masks = masks[:, ::-1]
    if ori_shape is not None:
        masks = resize_masks(np.ascontiguousarray(masks), (int(ori_shape[0]), int(ori_shape[1])))
    return np.ascontiguousarray(masks)


def gt_masks_in_original(sample: Any) -> dict[str, np.ndarray] | None:
    """``{'masks' uint8 [N, H, W], 'ignore_masks' uint8 [M, H, W]}`` in original pixels (aligned with
    ``gt_in_original``'s boxes), or None when the sample's ``gt_instances`` carry no masks."""
    gt = _get(sample, 'gt_instances')
    masks = None if gt is None else _field(gt, 'masks')
    if masks is None:
        return None
    ign = _get(sample, 'ignored_instances')
    ign_masks = None if ign is None else _field(ign, 'masks')
    out = {}
    for key, value in (('masks', masks), ('ignore_masks', ign_masks)):
        if value is None:
            value = np.zeros((0, *np.shape(masks)[1:]), dtype=np.uint8)
        out[key] = masks_to_original(as_numpy_masks(value, f'{key} of image {_where(sample)}'), sample)
    return out


def image_record(sample: Any, with_gt: bool = True, with_masks: bool = False) -> dict[str, Any]:
    """Everything the detection metrics and report keep per image:
    ``{'img_id', 'img_path', 'ori_shape' (h, w), 'pred': predictions(), 'gt': gt_in_original() or None}``.

    ``with_masks``: masks are added as COCO RLEs (``mask_rle.encode_masks``, original pixels) where the sample
    has them: ``pred['mask_rles']`` (one per prediction) and ``gt['mask_rles']`` / ``gt['ignore_mask_rles']``."""
    ori_shape = _get(sample, 'ori_shape')
    rec = {
        'img_id': _get(sample, 'img_id'),
        'img_path': _get(sample, 'img_path'),
        'ori_shape': None if ori_shape is None else (int(ori_shape[0]), int(ori_shape[1])),
        'pred': predictions(sample),
        'gt': gt_in_original(sample) if with_gt else None,
    }
    if with_masks:
        pred_masks = predicted_masks(sample)
        if pred_masks is not None:
            rec['pred']['mask_rles'] = encode_masks(pred_masks)
        gt_masks = gt_masks_in_original(sample) if rec['gt'] is not None else None
        if gt_masks is not None:
            rec['gt']['mask_rles'] = encode_masks(gt_masks['masks'])
            rec['gt']['ignore_mask_rles'] = encode_masks(gt_masks['ignore_masks'])
    return rec


def sample_for_drawing(sample: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """``(pred, gt)`` of a data sample in original pixels for ``oars_deploy.draw.draw_detection_sample``: as
    ``predictions`` / ``gt_in_original``, plus ``masks`` (bool [K, ori_H, ori_W] / uint8 [N, ori_H, ori_W]) where
    the sample has instance masks; ``gt`` is None without ground truth. Full masks: for drawing one image, not
    for keeping (``image_record(with_masks=True)`` keeps RLEs)."""
    pred = predictions(sample)
    masks = predicted_masks(sample)
    if masks is not None:
        pred['masks'] = masks
    gt = gt_in_original(sample) if has_gt(sample) else None
    if gt is not None:
        gt_masks = gt_masks_in_original(sample)
        if gt_masks is not None:
            gt['masks'] = gt_masks['masks']
    return pred, gt
