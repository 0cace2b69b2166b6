"""Unreadable, corrupt and mis-sized files in a segmentation dataset; EXIF orientation of images and labels;
the on_bad_sample policy; one dataset signature for the layouts."""

from __future__ import annotations

import inspect
import os
import warnings

import numpy as np
import pytest
from PIL import Image
from test_seg_dataset import write_pair

from oars.data.dataset import BadSampleWarning, OarsDataset
from oars.data.transforms.loading import LoadImageFromFile, apply_orientation, read_label_map
from oars.errors import DataError
from segmentation.datasets import CityscapesDataset, PascalVOCDataset, SegDataset
from segmentation.transforms import LoadSegAnnotations

PIPELINE = [dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'), dict(type='PackSegInputs')]
VAL_PIPELINE = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(4, 4), keep_ratio=False),
                dict(type='LoadSegAnnotations'), dict(type='PackSegInputs')]


def dataset(root, **kw) -> SegDataset:
    kw.setdefault('pipeline', PIPELINE)
    return SegDataset(data_root=str(root), img_dir='images', ann_dir='labels', img_suffix='.png',
                      classes=['a', 'b', 'c', 'd'], **kw)


def with_orientation(path, array: np.ndarray, orientation: int, mode: str | None = None) -> None:
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(array, mode=mode).save(path, exif=exif)


@pytest.mark.parametrize('orientation', range(1, 9))
def test_orientation_matches_opencv_and_pil(tmp_path, orientation):
    """apply_orientation does what OpenCV's imread does to colour images and PIL's exif_transpose to labels."""
    from PIL import ImageOps

    rng = np.random.default_rng(orientation)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    path = str(tmp_path / 'x.png')
    with_orientation(path, rgb, orientation)
    as_cv2 = LoadImageFromFile()({'img_path': path})['img']
    with Image.open(path) as im:
        as_pil = np.array(ImageOps.exif_transpose(im))
    assert np.array_equal(as_cv2[..., ::-1], as_pil)
    assert np.array_equal(apply_orientation(rgb, orientation), as_pil)
    unchanged = LoadImageFromFile(color_type='unchanged')({'img_path': path})['img']  # cv2 alone ignores the tag
    assert np.array_equal(unchanged[..., ::-1], as_pil)


def test_phone_photo_and_its_label_map_are_turned_alike(tmp_path):
    """A JPEG with orientation 6 (stored 10 wide, 8 high; shown 8 wide, 10 high) and a label PNG with the same
    tag: before, OpenCV turned the image and PIL did not turn the label map, so the mask was wrong."""
    h, w = 8, 10
    img = np.zeros((h, w, 3), np.uint8)
    img[:2, :3] = 255  # a bright corner, labelled 1
    seg = np.zeros((h, w), np.uint8)
    seg[:2, :3] = 1
    os.makedirs(tmp_path / 'images')
    os.makedirs(tmp_path / 'labels')
    with_orientation(tmp_path / 'images' / 'a.jpg', img, 6)
    with_orientation(tmp_path / 'labels' / 'a.png', seg, 6, mode='L')
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.jpg',
                    classes=['a', 'b'], pipeline=PIPELINE)
    out = ds[0]
    image = out['inputs'][0].numpy()
    label = out['data_samples'].gt_sem_seg.data[0].numpy()
    assert image.shape == label.shape == (w, h)  # both turned
    assert np.array_equal(image > 127, label == 1)  # the bright corner is where the label says


def test_corrupt_label_png_names_the_file(tmp_path):
    write_pair(tmp_path, 'a')
    (tmp_path / 'labels' / 'a.png').write_bytes(b'\x89PNG\r\n\x1a\n not really')
    with pytest.raises(DataError) as err:  # before: PIL.UnidentifiedImageError, no hint of which dataset
        dataset(tmp_path)[0]
    msg = str(err.value)
    assert 'could not read label map' in msg and str(tmp_path / 'labels' / 'a.png') in msg
    assert 'tools/check_data.py' in msg and 'on_bad_sample: skip' in msg


def test_truncated_label_png_names_the_file(tmp_path):
    write_pair(tmp_path, 'a', size=(64, 64))
    path = tmp_path / 'labels' / 'a.png'
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match='could not read label map .*a.png'):
        read_label_map(str(path))


@pytest.mark.parametrize('pipeline,test_mode', [(PIPELINE, False), (VAL_PIPELINE, True)])
def test_label_map_of_another_size_is_an_error_at_load(tmp_path, pipeline, test_mode):
    """Training on it went on silently; validation failed in IoUMetric after the whole epoch."""
    write_pair(tmp_path, 'a', size=(8, 10))
    write_pair(tmp_path, 'b', size=(8, 10), ann_dir=None)
    Image.fromarray(np.zeros((8, 9), np.uint8), mode='L').save(tmp_path / 'labels' / 'b.png')
    ds = dataset(tmp_path, pipeline=pipeline, test_mode=test_mode)
    ds[0]
    with pytest.raises(DataError) as err:
        ds[1]
    msg = str(err.value)
    for part in (f"label map {tmp_path / 'labels' / 'b.png'} is 9x8 (WxH)", f"image {tmp_path / 'images' / 'b.png'}",
                 'is 10x8'):
        assert part in msg, msg
    assert ('on_bad_sample: skip' in msg) is (not test_mode)  # evaluation cannot skip


def test_skip_substitutes_loudly_and_counts(tmp_path):
    for name in 'abc':
        write_pair(tmp_path, name)
    (tmp_path / 'images' / 'b.png').write_bytes(b'broken')
    ds = dataset(tmp_path, on_bad_sample='skip')
    with pytest.warns(BadSampleWarning) as record:
        out = ds[1]
    assert not out['data_samples'].img_path.endswith('b.png')
    msg = str(record[0].message)
    for part in ('skipped', str(tmp_path / 'images' / 'b.png'), 'corrupt file', '1 sample(s) skipped so far',
                 'random other sample'):
        assert part in msg, msg
    assert list(ds.skipped) == [f"{tmp_path / 'images' / 'b.png'} + {tmp_path / 'labels' / 'b.png'}"]
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # the same file is warned about once
        ds[1]


def test_skip_with_only_bad_samples_says_so(tmp_path):
    write_pair(tmp_path, 'a')
    (tmp_path / 'images' / 'a.png').write_bytes(b'broken')
    ds = dataset(tmp_path, on_bad_sample='skip', max_refetch=3)
    with pytest.warns(BadSampleWarning), pytest.raises(DataError, match=r'no usable sample in 4 tries.*a\.png'):
        ds[0]


def test_policy_is_checked(tmp_path):
    write_pair(tmp_path, 'a')
    with pytest.raises(DataError, match="on_bad_sample must be one of \\['error', 'skip'\\]"):
        dataset(tmp_path, on_bad_sample='ignore')
    with pytest.raises(DataError, match='skip is for training datasets'):
        dataset(tmp_path, on_bad_sample='skip', test_mode=True)


def test_layouts_share_one_signature():
    """VOC and Cityscapes change defaults only; every SegDataset argument reaches them (before: the 16-argument
    signature was written three times)."""
    base = inspect.signature(SegDataset.__init__).parameters
    assert issubclass(SegDataset, OarsDataset) and 'on_bad_sample' in base
    for cls, own in ((PascalVOCDataset, {'split', 'img_dir', 'ann_dir'}),
                     (CityscapesDataset, {'img_dir', 'ann_dir', 'img_suffix', 'seg_map_suffix'})):
        params = inspect.signature(cls.__init__).parameters
        assert set(params) - {'self', 'kwargs'} == own
        assert all(name in base for name in own)


def test_layout_passes_the_policy_through(tmp_path):
    write_pair(tmp_path, 'c/x', img_suffix='_leftImg8bit.png', img_dir='leftImg8bit/train', ann_dir=None)
    ds = CityscapesDataset(data_root=str(tmp_path), ann_dir=None, on_bad_sample='skip', classes=['a'],
                           pipeline=[LoadSegAnnotations()])
    assert ds.on_bad_sample == 'skip' and ds.metainfo['classes'] == ('a',)


def test_error_from_a_dataloader_worker_reads_as_the_message(tmp_path):
    """What tools print (oars.cli.user_message) for a bad file met in a worker: the loader's one-line message."""
    from torch.utils.data import DataLoader

    from oars.cli import user_message

    write_pair(tmp_path, 'a')
    (tmp_path / 'images' / 'a.png').write_bytes(b'broken')
    loader = DataLoader(dataset(tmp_path), batch_size=1, num_workers=1, collate_fn=lambda b: b)
    with pytest.raises(DataError) as err:
        next(iter(loader))
    assert 'Original Traceback' in str(err.value)
    assert user_message(err.value) == (
        f"could not read image (unsupported or corrupt file): {tmp_path / 'images' / 'a.png'} [SegDataset sample 0; "
        'tools/check_data.py -c CONFIG lists every bad file; `on_bad_sample: skip` trains without such samples]')


def test_pipeline_is_built_in_the_task_scope_whatever_scope_is_current(tmp_path):
    """A segmentation dataset made in a process where a detection runner or predictor set the default scope last
    (the Python API, a notebook, a test session) still finds its own transforms."""
    from mmengine.registry import DefaultScope

    with DefaultScope.overwrite_default_scope('detection'):
        ds = dataset(tmp_path, lazy_init=True)
    assert [type(t).__name__ for t in ds.pipeline.transforms] == ['LoadImageFromFile', 'LoadSegAnnotations',
                                                                  'PackSegInputs']
