"""Every named augmentation step keeps the label map on its image: a synthetic 48x64 image whose colour encodes
the class goes through each step (probability 1); afterwards each labelled pixel has its class's colour, pixels
brought in from outside the image are ignore (255) with the image's pad value, photometric steps leave the label
map as it was, and instance masks / boxes follow the label map."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segmentation.registry import TRANSFORMS

H, W = 48, 64
IGNORE = 255
PAD = (0, 0, 0)
# BGR colour of each class: far apart from each other and from PAD
PALETTE = np.array([[200, 40, 40], [40, 200, 40], [40, 40, 200], [200, 200, 40], [200, 40, 200], [40, 200, 200]],
                   dtype=np.uint8)


def sample() -> dict:
    """4x4 blocks of 12x16 pixels (classes 0..5, not symmetric under either flip) and the image they colour."""
    blocks = (np.arange(16).reshape(4, 4) % 6).astype(np.uint8)
    seg = np.kron(blocks, np.ones((12, 16), np.uint8))
    return {'img': PALETTE[seg].copy(), 'gt_seg_map': seg, 'img_shape': (H, W), 'ori_shape': (H, W),
            'ignore_index': IGNORE}


def with_instances(results: dict) -> dict:
    """One instance mask per class (uint8 [6, H, W]) with its box, as a detection/instance dataset gives them."""
    seg = results['gt_seg_map']
    classes = np.unique(seg)
    masks = np.stack([seg == c for c in classes]).astype(np.uint8)
    boxes = []
    for m in masks:
        ys, xs = np.nonzero(m)
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return {**results, 'gt_masks': masks, 'gt_bboxes': np.asarray(boxes, np.float32),
            'gt_bboxes_labels': classes.astype(np.int64)}


def interior(seg: np.ndarray, k: int) -> np.ndarray:
    """Pixels whose k x k neighbourhood has one label (away from class and padding borders)."""
    kernel = np.ones((k, k), np.uint8)
    return cv2.erode(seg, kernel, borderType=cv2.BORDER_REPLICATE) == cv2.dilate(seg, kernel,
                                                                                borderType=cv2.BORDER_REPLICATE)


# (config, kind, pads): kind 'geo' moves pixels; 'colour' changes values only (tolerance, label map unchanged);
# pads: the step must bring in ignore pixels on this input.
STEPS = [
    ({'type': 'ResizeByLong', 'long_size': 80}, 'geo', False),
    ({'type': 'ResizeByShort', 'short_size': 24}, 'geo', False),
    ({'type': 'ResizeRangeScaling', 'min_value': 40, 'max_value': 100}, 'geo', False),
    ({'type': 'ResizeStepScaling', 'min_scale_factor': 1.25, 'max_scale_factor': 1.75, 'scale_step_size': 0.25},
     'geo', False),
    ({'type': 'RandomPaddingCrop', 'crop_size': [80, 56]}, 'geo', True),
    ({'type': 'RandomPaddingCrop', 'crop_size': [40, 30], 'cat_max_ratio': 0.75}, 'geo', False),
    ({'type': 'RandomHorizontalFlip', 'prob': 1.0}, 'geo', False),
    ({'type': 'RandomVerticalFlip', 'prob': 1.0}, 'geo', False),
    ({'type': 'RandomRotation', 'max_rotation': 45}, 'geo', True),
    ({'type': 'RandomRotation', 'max_rotation': 45, 'auto_bound': True}, 'geo', True),
    ({'type': 'RandomScaleAspect', 'min_scale': 0.5, 'aspect_ratio': 0.5}, 'geo', False),
    ({'type': 'RandomAffine', 'max_rotation': 20, 'min_scale_factor': 0.6, 'max_scale_factor': 0.9,
      'max_translate_ratio': 0.1, 'max_shear': 5}, 'geo', True),
    ({'type': 'RandomBlur', 'prob': 1.0, 'blur_type': 'random'}, 'blur', False),
    ({'type': 'RandomBlur', 'prob': 1.0, 'blur_type': 'gaussian'}, 'blur', False),
    ({'type': 'RandomBlur', 'prob': 1.0, 'blur_type': 'median', 'kernel_range': [5, 5]}, 'blur', False),
    ({'type': 'RandomDistort', 'brightness_prob': 1.0, 'contrast_prob': 1.0, 'saturation_prob': 1.0,
      'hue_prob': 1.0, 'sharpness_prob': 1.0}, 'colour', False),
    ({'type': 'RandomNoise', 'prob': 1.0, 'max_sigma': 4.0}, 'noise', False),
    # the existing steps, under the same checks
    ({'type': 'Resize', 'scale': [40, 40], 'keep_ratio': False}, 'geo', False),
    ({'type': 'RandomResize', 'scale': [64, 48], 'ratio_range': [0.5, 2.0]}, 'geo', False),
    ({'type': 'RandomCrop', 'crop_size': [30, 40]}, 'geo', False),
    ({'type': 'RandomFlip', 'prob': 1.0, 'direction': 'vertical'}, 'geo', False),
    ({'type': 'Pad', 'size': [80, 56]}, 'geo', True),
    ({'type': 'PhotoMetricDistortion'}, 'colour', False),
]


@pytest.mark.parametrize('cfg,kind,pads', STEPS, ids=[s[0]['type'] + str(i) for i, s in enumerate(STEPS)])
def test_step_keeps_labels_on_their_colours(cfg, kind, pads):
    step = TRANSFORMS.build(dict(cfg))
    assert type(step).__name__ == cfg['type'] and cfg['type'] in repr(step)
    src = sample()
    np.random.seed(3)
    out = step(dict(src))
    img, seg = out['img'], out['gt_seg_map']
    assert img.dtype == np.uint8 and seg.shape == img.shape[:2] == tuple(out.get('pad_shape', out['img_shape']))

    if kind != 'geo':  # pixel values only: the label map is the input's, the image changed
        assert np.array_equal(seg, src['gt_seg_map']) and not np.array_equal(img, src['img'])
        if kind == 'colour':  # one colour function for the whole image: a class stays one colour
            inside = interior(seg, 5)  # sharpening mixes neighbours
            for c in np.unique(seg):
                colours = img[inside & (seg == c)].astype(int)
                assert np.abs(colours - np.median(colours, axis=0)).max() <= 2, (cfg, c)
        else:
            tol, k = (1, 9) if kind == 'blur' else (4 * cfg['max_sigma'] + 1, 1)
            inside = interior(seg, k)
            diff = np.abs(img.astype(int) - PALETTE[seg].astype(int))[inside]
            assert diff.max() <= tol and inside.mean() > 0.2, cfg
        return

    assert seg.shape != src['gt_seg_map'].shape or not np.array_equal(seg, src['gt_seg_map']), 'step did nothing'
    inside = interior(seg, 5)  # bilinear image vs nearest labels: compare away from borders
    assert inside.mean() > 0.3, cfg
    labelled = inside & (seg != IGNORE)
    assert np.abs(img.astype(int) - PALETTE[np.where(seg == IGNORE, 0, seg)].astype(int))[labelled].max() <= 2, cfg
    padded = inside & (seg == IGNORE)
    assert np.abs(img[padded].astype(int) - np.asarray(PAD)).max(initial=0) <= 2, cfg
    assert set(np.unique(seg)) <= set(range(6)) | {IGNORE}
    assert padded.any() == pads, f'{cfg}: ignore pixels from outside the image expected: {pads}'

    # instance masks and boxes follow: same seed, same op; each kept mask is its class in the label map
    np.random.seed(3)
    inst = step(with_instances(src))
    assert np.array_equal(inst['gt_seg_map'], seg) and np.array_equal(inst['img'], img)
    masks, boxes, labels = inst['gt_masks'], inst['gt_bboxes'], inst['gt_bboxes_labels']
    assert masks.dtype == np.uint8 and masks.shape == (len(labels), *seg.shape) and len(boxes) == len(labels)
    assert set(labels) == set(np.unique(seg)) - {IGNORE}
    for mask, box, c in zip(masks, boxes, labels, strict=True):
        assert np.array_equal(mask.astype(bool), seg == c), (cfg, c)
        ys, xs = np.nonzero(mask)
        assert box[0] <= xs.min() + 1 and box[1] <= ys.min() + 1 and box[2] >= xs.max() and box[3] >= ys.max(), cfg


def test_padding_takes_the_datasets_ignore_index_and_pad_val():
    src = {**sample(), 'ignore_index': 250}
    out = TRANSFORMS.build({'type': 'RandomPaddingCrop', 'crop_size': [80, 56], 'pad_val': [1, 2, 3]})(dict(src))
    seg, img = out['gt_seg_map'], out['img']
    assert seg.shape == (56, 80) and np.array_equal(seg[:H, :W], src['gt_seg_map'])  # pads bottom/right only
    assert (seg[H:] == 250).all() and (seg[:, W:] == 250).all() and (img[H:] == [1, 2, 3]).all()
    out = TRANSFORMS.build({'type': 'RandomRotation', 'max_rotation': 60, 'seg_pad_val': 7})(dict(src))
    assert set(np.unique(out['gt_seg_map'])) - set(range(6)) == {7}  # seg_pad_val wins over the dataset's
    # PaddleSeg's ResizeStepScaling picks one of the steps: sizes are 0.5x..1.5x in steps of 0.25
    step = TRANSFORMS.build({'type': 'ResizeStepScaling', 'min_scale_factor': 0.5, 'max_scale_factor': 1.5})
    sizes = {step(sample())['img'].shape[:2] for _ in range(40)}
    assert sizes == {(round(H * f), round(W * f)) for f in (0.5, 0.75, 1.0, 1.25, 1.5)}
    out = TRANSFORMS.build({'type': 'ResizeByShort', 'short_size': 24, 'max_size': 30})(sample())
    assert out['img'].shape[:2] == (23, 30) and out['keep_ratio'] is True  # long side capped first


@pytest.mark.parametrize('cfg,arg', [
    ({'type': 'ResizeByLong', 'long_size': 0}, 'long_size'),
    ({'type': 'ResizeByShort', 'short_size': 32, 'max_size': 16}, 'max_size'),
    ({'type': 'ResizeRangeScaling', 'min_value': 600, 'max_value': 400}, 'min_value'),
    ({'type': 'ResizeStepScaling', 'min_scale_factor': 2.0, 'max_scale_factor': 1.0}, 'min_scale_factor'),
    ({'type': 'ResizeStepScaling', 'scale_step_size': -0.1}, 'scale_step_size'),
    ({'type': 'RandomPaddingCrop', 'crop_size': [0, 32]}, 'crop_size'),
    ({'type': 'RandomPaddingCrop', 'seg_pad_val': -1}, 'seg_pad_val'),
    ({'type': 'RandomHorizontalFlip', 'prob': 1.5}, 'prob'),
    ({'type': 'RandomVerticalFlip', 'prob': -0.1}, 'prob'),
    ({'type': 'RandomRotation', 'max_rotation': -10}, 'max_rotation'),
    ({'type': 'RandomRotation', 'pad_val': 'grey'}, 'pad_val'),
    ({'type': 'RandomScaleAspect', 'aspect_ratio': 1.5}, 'aspect_ratio'),
    ({'type': 'RandomAffine', 'min_scale_factor': 1.5, 'max_scale_factor': 1.0}, 'min_scale_factor'),
    ({'type': 'RandomAffine', 'max_shear': -1}, 'max_shear'),
    ({'type': 'RandomBlur', 'kernel_range': [4, 9]}, 'kernel_range'),
    ({'type': 'RandomBlur', 'blur_type': 'motion'}, 'blur_type'),
    ({'type': 'RandomDistort', 'hue_prob': 2}, 'hue_prob'),
    ({'type': 'RandomDistort', 'contrast_range': -0.5}, 'contrast_range'),
    ({'type': 'RandomNoise', 'max_sigma': -1}, 'max_sigma'),
])
def test_bad_argument_names_class_and_argument(cfg, arg):
    with pytest.raises(ValueError, match=rf"{cfg['type']}(\.|: ){arg}") as err:
        TRANSFORMS.build(dict(cfg))
    assert 'got' in str(err.value)  # and the value given


def test_colour_steps_need_uint8():
    src = sample()
    src['img'] = src['img'].astype(np.float32)
    for name in ('RandomDistort', 'RandomNoise'):
        with pytest.raises(ValueError, match=f'{name} needs a uint8 image'):
            TRANSFORMS.build({'type': name})(dict(src))


def test_distort_runs_in_rgb_and_windows_are_random():
    # saturation blends with the grey image; the grey must be weighted as RGB (0.299 R + 0.587 G + 0.114 B) of
    # our BGR image: fit out = g + f * (colour - g) per class colour and compare g
    step = TRANSFORMS.build({'type': 'RandomDistort', 'brightness_prob': 0, 'contrast_prob': 0, 'hue_prob': 0,
                             'saturation_prob': 1.0, 'saturation_range': 0.3})
    np.random.seed(0)
    out = step(sample())['img']
    seg = sample()['gt_seg_map']
    for c in (0, 2, 3):
        p = PALETTE[c].astype(float)
        o = out[seg == c].astype(float).mean(axis=0)
        # o = f * p + (1 - f) * g over the three channels: slope f, intercept (1 - f) * g
        f, intercept = np.polyfit(p, o, 1)
        assert abs(1 - f) > 0.05, f  # the seed draws a factor away from 1
        g = intercept / (1 - f)
        assert abs(g - (0.299 * p[2] + 0.587 * p[1] + 0.114 * p[0])) < 6, (c, g)  # BGR-weighted: 30 apart
    # the aspect crop window moves and resizes between samples
    step = TRANSFORMS.build({'type': 'RandomScaleAspect'})
    outs = []
    for seed in range(4):
        np.random.seed(seed)
        outs.append(step(sample())['gt_seg_map'])
    assert all(o.shape == (H, W) for o in outs) and len({o.tobytes() for o in outs}) == 4


def test_padding_crop_cat_max_ratio_does_not_count_padding():
    # 8x40 image, class 0 left / class 1 right, padded to 16 rows: a window on one half holds one class plus
    # ignore padding; cat_max_ratio must redraw it (ignore is not a class), so most crops get both classes
    seg = np.zeros((8, 40), np.uint8)
    seg[:, 20:] = 1
    src = {'img': PALETTE[seg].copy(), 'gt_seg_map': seg, 'ignore_index': IGNORE}
    step = TRANSFORMS.build({'type': 'RandomPaddingCrop', 'crop_size': [10, 16], 'cat_max_ratio': 0.75})
    np.random.seed(0)
    both = [len(set(np.unique(step(dict(src))['gt_seg_map'])) - {IGNORE}) == 2 for _ in range(30)]
    assert np.mean(both) > 0.6  # ~0.3 when a window of one class and padding passed as balanced
