"""Instance masks through the detection pipeline: loading (against pycocotools' annToMask), every geometric
transform keeping masks aligned with boxes, dropped boxes dropping their masks, packing."""

from __future__ import annotations

import contextlib
import io
import json
import os

import albumentations as A
import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

import oars.data.transforms.albu as albu
from detection.datasets import CocoDataset
from detection.transforms import (
    Expand,
    FilterAnnotations,
    LoadAnnotations,
    MinIoURandomCrop,
    MixUp,
    Mosaic,
    PackDetInputs,
)
from oars.data.transforms import Albu, LoadImageFromFile, Pad, RandomCrop, RandomFlip, RandomResize, Resize
from oars.data.transforms.geometric import resize_masks
from oars.errors import DataError

H, W = 60, 80


def box_of(masks: np.ndarray) -> np.ndarray:
    """Tight xyxy box (pixel corners) of each [H, W] mask; NaN for an empty one."""
    out = np.full((len(masks), 4), np.nan, np.float32)
    for i, m in enumerate(masks):
        ys, xs = np.nonzero(m)
        if len(xs):
            out[i] = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
    return out


# ---- loading ------------------------------------------------------------------------------------------------
def write_set(tmp_path, annotations, h=H, w=W) -> str:
    os.makedirs(tmp_path / 'images' / 'train', exist_ok=True)
    cv2.imwrite(str(tmp_path / 'images' / 'train' / 'a.png'), np.full((h, w, 3), 90, np.uint8))
    ann_file = tmp_path / 'ann.json'
    ann_file.write_text(json.dumps({
        'images': [{'id': 1, 'file_name': 'a.png', 'height': h, 'width': w}],
        'annotations': [{'image_id': 1, 'category_id': 1, 'area': 1.0, 'iscrowd': 0, **a} for a in annotations],
        'categories': [{'id': 1, 'name': 'thing'}]}))
    return str(ann_file)


def rect_rle(x1, y1, x2, y2, compressed: bool) -> dict:
    m = np.zeros((H, W), np.uint8)
    m[y1:y2, x1:x2] = 1
    rle = mask_utils.encode(np.asfortranarray(m))
    if compressed:
        return {'counts': rle['counts'].decode(), 'size': [H, W]}
    flat = m.ravel(order='F')  # COCO counts run down the columns, starting with zeros
    change = np.flatnonzero(np.diff(np.r_[0, flat, 1 - flat[-1]])) if flat.size else []
    counts = np.diff(np.r_[0, change]).tolist()
    return {'counts': counts, 'size': [H, W]}


ANNOTATIONS = [
    dict(id=5, bbox=[10, 8, 25, 20], segmentation=[[10.5, 8, 35, 8.5, 30, 28, 12, 20]]),  # one polygon
    dict(id=6, bbox=[40, 5, 35, 40], segmentation=[[40, 5, 55, 5, 55, 20], [60, 30, 75, 30, 75, 45, 60, 45]]),
    dict(id=7, bbox=[2, 30, 20, 25], segmentation=rect_rle(2, 30, 22, 55, compressed=True)),
    dict(id=8, bbox=[30, 40, 20, 15], segmentation=rect_rle(30, 40, 50, 55, compressed=False), iscrowd=1),
]


def load(ann_file, tmp_path, with_mask=True, **kw):
    ds = CocoDataset(data_root=str(tmp_path), ann_file=ann_file, data_prefix={'img': 'images/train'},
                     classes=['thing'], **kw)
    results = LoadImageFromFile()(ds.get_data_info(0))
    return LoadAnnotations(with_bbox=True, with_mask=with_mask)(results)


def test_polygon_and_rle_masks_equal_pycocotools_ann_to_mask(tmp_path):
    uncompressed = ANNOTATIONS[3]['segmentation']
    assert mask_utils.decode(mask_utils.frPyObjects(uncompressed, H, W)).sum() == 20 * 15  # the helper is right
    ann_file = write_set(tmp_path, ANNOTATIONS)
    out = load(ann_file, tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(ann_file)
    expected = np.stack([coco.annToMask(coco.anns[a['id']]) for a in ANNOTATIONS])
    assert out['gt_masks'].dtype == np.uint8 and out['gt_masks'].shape == (4, H, W)
    assert out['gt_masks'].flags['C_CONTIGUOUS']
    assert np.array_equal(out['gt_masks'], expected)
    assert expected[1, 5:20, 40:55].any() and expected[1, 30:45, 60:75].all()  # both polygons of id 6
    assert out['gt_ignore_flags'].tolist() == [False, False, False, True]  # the crowd RLE
    assert len(out['gt_bboxes']) == 4
    assert 'gt_masks' not in load(ann_file, tmp_path, with_mask=False)


def test_unusable_polygons_become_ignored_empty_masks_and_missing_mask_is_an_error(tmp_path):
    ann_file = write_set(tmp_path, [dict(id=4, bbox=[10, 8, 25, 20], segmentation=[[1, 2, 3, 4]]),
                                    ANNOTATIONS[0]])
    out = load(ann_file, tmp_path)
    assert out['gt_ignore_flags'].tolist() == [True, False]  # as MMDetection: ignored, all-zero mask
    assert out['gt_masks'][0].sum() == 0 and out['gt_masks'][1].sum() > 0
    no_mask = tmp_path / 'boxes_only'
    ann_file = write_set(no_mask, [ANNOTATIONS[0], dict(id=9, bbox=[1, 1, 5, 5], segmentation=[])])
    with pytest.raises(DataError, match=r'a\.png: annotation id 9 .*no segmentation mask.*with_mask: false'):
        load(ann_file, no_mask)
    assert len(load(ann_file, no_mask, with_mask=False)['gt_bboxes']) == 2


def test_rle_size_is_checked_at_load_time(tmp_path):
    bad = dict(id=3, bbox=[1, 1, 5, 5], segmentation={'counts': 'PP1', 'size': [W, H]})
    ann_file = write_set(tmp_path, [ANNOTATIONS[0], bad])
    with pytest.raises(DataError, match=r"annotation id 3: RLE 'size' .*\[80, 60\] but the image is 80x60"):
        CocoDataset(data_root=str(tmp_path), ann_file=ann_file, classes=['thing'], data_prefix={'img': 'images/train'})
    with pytest.warns(UserWarning, match='malformed mask: 1'):
        ds = CocoDataset(data_root=str(tmp_path), ann_file=ann_file, classes=['thing'],
                         data_prefix={'img': 'images/train'}, on_bad_annotation='skip')
    assert [i['ann_id'] for i in ds.get_data_info(0)['instances']] == [5]
    short = dict(id=4, bbox=[1, 1, 5, 5], segmentation={'counts': [0, 10], 'size': [H, W]})
    with pytest.raises(DataError, match=r"cover 10 pixels; expected height \* width = 4800"):
        CocoDataset(data_root=str(tmp_path), ann_file=write_set(tmp_path, [short]), classes=['thing'],
                    data_prefix={'img': 'images/train'})


def test_bad_rle_counts_at_decode_time_name_the_annotation():
    from detection.transforms.instance_masks import decode_instance_masks

    short = [{'bbox': [0, 0, 8, 8], 'mask': {'counts': [0, 5], 'size': [H, W]}, 'ann_id': 12}]
    with pytest.raises(DataError, match=r'a\.png: annotation id 12 .*cover 5 pixels'):
        decode_instance_masks(short, H, W, 'a.png')
    bad = [{'bbox': [0, 0, 8, 8], 'mask': {'counts': 'abc', 'size': [H, W]}, 'ann_id': 13}]
    with pytest.raises(DataError, match=r'annotation id 13 .*cannot decode the RLE'):
        decode_instance_masks(bad, H, W, 'a.png')


def test_load_annotations_arguments_and_order():
    with pytest.raises(DataError, match='poly2mask'):
        LoadAnnotations(with_mask=True, poly2mask=False)
    with pytest.raises(DataError, match='needs with_bbox=True'):
        LoadAnnotations(with_bbox=False, with_mask=True)
    results = {'img': np.zeros((30, 40, 3), np.uint8), 'ori_shape': (H, W), 'img_path': 'x.png',
               'instances': [{'bbox': [0, 0, 4, 4], 'bbox_label': 0, 'mask': [[0, 0, 4, 0, 4, 4]]}]}
    with pytest.raises(DataError, match='right after LoadImageFromFile'):
        LoadAnnotations(with_mask=True)(results)


# ---- transforms ---------------------------------------------------------------------------------------------
def sample(seed: int = 0, n: int = 5, h: int = H, w: int = W) -> dict:
    """An image with ``n`` random ellipses/rectangles as masks and their tight boxes; label i for instance i."""
    rng = np.random.default_rng(seed)
    masks = np.zeros((n, h, w), np.uint8)
    for i in range(n):
        cx, cy = rng.integers(8, w - 8), rng.integers(8, h - 8)
        ax, ay = rng.integers(3, 15), rng.integers(3, 12)
        if i % 2:
            cv2.ellipse(masks[i], (int(cx), int(cy)), (int(ax), int(ay)), 0, 0, 360, 1, -1)
        else:
            masks[i, max(cy - ay, 0):cy + ay, max(cx - ax, 0):cx + ax] = 1
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return {'img': img, 'img_shape': (h, w), 'ori_shape': (h, w), 'gt_bboxes': box_of(masks),
            'gt_bboxes_labels': np.arange(n), 'gt_ignore_flags': np.zeros(n, bool), 'gt_masks': masks}


def check_aligned(out: dict, tol: float = 1.0) -> None:
    masks = out['gt_masks']
    assert masks.dtype == np.uint8 and masks.flags['C_CONTIGUOUS']
    assert masks.shape == (len(out['gt_bboxes']), *out['img'].shape[:2])
    assert len(out['gt_bboxes_labels']) == len(out['gt_ignore_flags']) == len(masks)
    assert set(np.unique(masks)) <= {0, 1}
    np.testing.assert_allclose(box_of(masks), out['gt_bboxes'], atol=tol)


TRANSFORMS = {
    'resize_down': lambda: Resize((50, 37), keep_ratio=False),
    'resize_up_keep_ratio': lambda: Resize((200, 150), keep_ratio=True),
    'random_resize': lambda: RandomResize((80, 60), ratio_range=(0.5, 1.5)),
    'hflip': lambda: RandomFlip(prob=1.0),
    'vflip': lambda: RandomFlip(prob=1.0, direction='vertical'),
    'crop': lambda: RandomCrop((40, 50)),
    'pad_divisor': lambda: Pad(size_divisor=32),
    'expand': lambda: Expand(ratio_range=(1.5, 2.0), prob=1.0),
    'min_iou_crop': lambda: MinIoURandomCrop(min_ious=(0.1, 0.3), min_crop_size=0.5),
    'albu': lambda: Albu([{'type': 'Affine', 'scale': 1.3, 'translate_px': {'x': 7, 'y': -3}, 'p': 1.0},
                          {'type': 'HorizontalFlip', 'p': 1.0}]),
}


@pytest.mark.parametrize('name', list(TRANSFORMS))
def test_transform_keeps_masks_aligned_with_boxes(name):
    transform = TRANSFORMS[name]()
    for seed in range(3):
        np.random.seed(seed)
        r = sample(seed)
        before = {int(k): m for k, m in zip(r['gt_bboxes_labels'], r['gt_masks'])}
        out = transform(r)
        check_aligned(out, tol=1.0 if name != 'albu' else 1.5)
        assert len(out['gt_masks']) > 0
        # each kept mask is its own instance's (same pixel count where the transform only moves pixels)
        for label, m in zip(out['gt_bboxes_labels'].tolist(), out['gt_masks']):
            if name in ('hflip', 'vflip', 'expand', 'pad_divisor'):
                assert m.sum() == before[label].sum()


def test_pad_fills_masks_with_zero_and_flip_equals_numpy():
    r = sample(1)
    out = Pad(size=(100, 70), seg_pad_val=255)(dict(r, gt_seg_map=np.zeros((H, W), np.uint8)))
    assert out['gt_masks'].shape == (5, 70, 100) and out['gt_seg_map'][65, 90] == 255
    assert np.array_equal(out['gt_masks'][:, :H, :W], r['gt_masks']) and out['gt_masks'][:, H:].max() == 0
    flipped = RandomFlip(prob=1.0)(sample(1))
    assert np.array_equal(flipped['gt_masks'], r['gt_masks'][:, :, ::-1])
    flipped = RandomFlip(prob=1.0, direction='vertical')(sample(1))
    assert np.array_equal(flipped['gt_masks'], r['gt_masks'][:, ::-1])
    assert np.array_equal(flipped['img'], r['img'][::-1])


def test_albu_padding_with_a_label_map_fill_keeps_masks_binary():
    r = sample(2)
    out = Albu([{'type': 'PadIfNeeded', 'min_height': 90, 'min_width': 100, 'fill_mask': 255, 'border_mode': 0,
                 'position': 'center'}])(r)
    assert out['gt_masks'].shape == (5, 90, 100) and set(np.unique(out['gt_masks'])) == {0, 1}
    check_aligned(out)


def test_resize_masks_equals_albumentations_mask_path():
    masks = sample(2, n=7)['gt_masks']
    for shape in ((37, 50), (150, 200), (60, 81), (1, 3)):
        ref = np.stack([A.Resize(*shape, mask_interpolation=cv2.INTER_NEAREST)(image=m, mask=m)['mask']
                        for m in masks])
        assert np.array_equal(resize_masks(masks, shape), ref)
    assert resize_masks(masks[:1], (30, 40)).shape == (1, 30, 40)
    assert resize_masks(masks[:0], (30, 40)).shape == (0, 30, 40)


def test_resize_of_masks_without_boxes_builds_no_compose_and_equals_the_box_path(monkeypatch):
    calls = []
    real = albu.build_compose
    monkeypatch.setattr(albu, 'build_compose', lambda *a, **k: calls.append(a) or real(*a, **k))
    with_boxes = Resize((50, 37), keep_ratio=False)(sample(3))
    assert len(calls) == 1
    r = sample(3)
    del r['gt_bboxes']
    calls.clear()
    without = Resize((50, 37), keep_ratio=False)(r)
    assert calls == [] and np.array_equal(without['gt_masks'], with_boxes['gt_masks'])
    r = sample(3)
    del r['gt_bboxes']
    np.random.seed(0)
    cropped = RandomCrop((40, 50))(r)
    assert calls == [] and cropped['gt_masks'].shape == (5, 40, 50)


def test_empty_masks_follow_the_image():
    r = sample(0, n=0)
    for t in (Resize((50, 37), keep_ratio=False), RandomFlip(prob=1.0), Pad(size_divisor=32),
              Albu([{'type': 'HorizontalFlip', 'p': 1.0}])):
        r = t(r)
        assert r['gt_masks'].shape == (0, *r['img'].shape[:2]) and r['gt_masks'].dtype == np.uint8


def test_dropping_boxes_drops_their_masks():
    r = sample(4, n=6)
    widths = r['gt_bboxes'][:, 2] - r['gt_bboxes'][:, 0]
    min_w = float(np.sort(widths)[2])
    out = FilterAnnotations(min_gt_bbox_wh=(min_w, 0))(dict(r))
    kept = np.flatnonzero(widths >= min_w)
    assert out['gt_bboxes_labels'].tolist() == kept.tolist()
    assert np.array_equal(out['gt_masks'], r['gt_masks'][kept])
    # a crop window that leaves some instances out: those masks go, the others are the kept boxes' crops
    crop = RandomCrop((30, 40))
    for seed in range(20):
        np.random.seed(seed)
        y1, y2, x1, x2 = crop._window(H, W)
        np.random.seed(seed)
        out = crop(sample(4, n=6))
        if 0 < len(out['gt_masks']) < 6:
            break
    else:
        pytest.fail('no crop window dropped some boxes')
    labels = out['gt_bboxes_labels']
    assert np.array_equal(out['gt_masks'], r['gt_masks'][labels][:, y1:y2, x1:x2])
    dropped = np.setdiff1d(np.arange(6), labels)
    assert all(r['gt_masks'][d][y1:y2, x1:x2].sum() < 2 for d in dropped)  # gone with their box


def test_pack_puts_masks_in_gt_and_ignored_instances():
    r = sample(5, n=4)
    r['gt_ignore_flags'] = np.array([False, True, False, True])
    packed = PackDetInputs()(r)['data_samples']
    gt, ign = packed.gt_instances, packed.ignored_instances
    assert gt.masks.dtype.is_floating_point is False and str(gt.masks.dtype) == 'torch.uint8'
    assert tuple(gt.masks.shape) == (2, H, W) and tuple(ign.masks.shape) == (2, H, W)
    assert np.array_equal(gt.masks.numpy(), r['gt_masks'][[0, 2]])
    assert np.array_equal(ign.masks.numpy(), r['gt_masks'][[1, 3]])
    assert 'masks' not in PackDetInputs()({k: v for k, v in r.items() if k != 'gt_masks'})['data_samples'].gt_instances
    bad = sample(5, n=4)
    bad['gt_masks'] = bad['gt_masks'][:3]
    with pytest.raises(DataError, match=r'gt_masks has shape \(3, 60, 80\); expected \[4, 60, 80\]'):
        PackDetInputs()(bad)


def test_mosaic_and_mixup_reject_masks():
    r = sample(6)
    with pytest.raises(DataError, match='Mosaic does not move instance masks'):
        Mosaic(img_scale=(64, 64))(dict(r, mix_results=[sample(i) for i in range(3)]))
    with pytest.raises(DataError, match='MixUp does not move instance masks'):
        MixUp(img_scale=(64, 64))(dict(r, mix_results=[sample(7)]))
