"""ADE20K, VOC with SBD's labels (a list of splits), PaddleSeg list files and binary mask folders: the pairs each
lists on a tiny layout, their errors, the EXIF rule through a new dataset, and the two new base configs."""

from __future__ import annotations

import copy
import os

import cv2
import numpy as np
import pytest
import yaml
from PIL import Image
from test_seg_dataset import CONFIG_DIR, write_pair

from oars.errors import DataError
from segmentation.datasets import (
    ADE20K_CLASSES,
    ADE20KDataset,
    BinaryMaskFolderDataset,
    ListFileSegDataset,
    LoadBinaryMask,
    PascalVOCDataset,
)
from segmentation.registry import DATASETS
from segmentation.transforms import LoadSegAnnotations

PIPELINE = [dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'), dict(type='PackSegInputs')]


def names(ds) -> list[tuple[str, str | None]]:
    """(image, label) paths of every sample, relative to the dataset root."""
    rel = lambda p: None if p is None else os.path.relpath(p, ds.data_root)
    return [(rel(i['img_path']), rel(i['seg_map_path'])) for i in (ds.get_data_info(k) for k in range(len(ds)))]


def gt(sample: dict) -> np.ndarray:
    return sample['data_samples'].gt_sem_seg.data[0].numpy()


def dataset_cfg(name: str, split: str, root) -> dict:
    with open(os.path.join(CONFIG_DIR, name)) as f:
        cfg = copy.deepcopy(yaml.safe_load(f)[split]['dataset'])
    cfg['data_root'] = str(root)
    return cfg


def test_ade20k_layout_reduces_zero_and_turns_phone_photos_like_their_labels(tmp_path):
    """The config's dataset lists the ADE layout; 0 becomes ignore, k class k-1; a JPEG with EXIF orientation 6
    (stored 10 wide, 6 high) and a label PNG drawn on the picture as shown (6 wide, 10 high, no tag, as labelme
    saves it) come out the same size and aligned."""
    write_pair(tmp_path, 'ADE_train_b', '.jpg', img_dir='images/training', ann_dir='annotations/training',
               values=(0, 150))
    stored = np.zeros((6, 10, 3), np.uint8)
    stored[:2, :4] = 255  # bright corner top-left as stored; orientation 6 shows it top-right
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(stored).save(tmp_path / 'images' / 'training' / 'ADE_train_a.jpg', exif=exif, quality=100)
    shown = np.full((10, 6), 3, np.uint8)  # class 3 (-> 2) everywhere but the bright corner
    shown[:4, -2:] = 1  # class 1 (-> 0) on the corner as displayed
    Image.fromarray(shown, mode='L').save(tmp_path / 'annotations' / 'training' / 'ADE_train_a.png')

    ds = DATASETS.build(dict(dataset_cfg('ade20k.yaml', 'train_dataloader', tmp_path), pipeline=PIPELINE))
    assert isinstance(ds, ADE20KDataset) and ds.metainfo['classes'] == ADE20K_CLASSES and len(ADE20K_CLASSES) == 150
    assert names(ds) == [('images/training/ADE_train_a.jpg', 'annotations/training/ADE_train_a.png'),
                         ('images/training/ADE_train_b.jpg', 'annotations/training/ADE_train_b.png')]
    assert ds.get_data_info(0)['reduce_zero_label'] is True and ds.get_data_info(0)['num_classes'] == 150
    out = ds[0]
    image, label = out['inputs'][0].numpy(), gt(out)
    assert image.shape == label.shape == (10, 6)
    assert np.array_equal(image > 127, label == 0)
    assert set(np.unique(label)) == {0, 2}
    assert set(np.unique(gt(ds[1]))) <= {255, 149}  # 0 -> ignore, 150 -> class 149
    with pytest.raises(FileNotFoundError, match=os.path.join('images', 'validation')):  # the val split's folder
        DATASETS.build(dataset_cfg('ade20k.yaml', 'val_dataloader', tmp_path))


def write_voc(root) -> None:
    for name, labels in (('2007_a', 'SegmentationClass'), ('2007_b', 'SegmentationClass'),
                         ('2008_c', 'SegmentationClassAug'), ('2008_d', 'SegmentationClassAug')):
        write_pair(root, name, '.jpg', img_dir='JPEGImages', ann_dir=labels, values=(0, 20, 255))
    write_pair(root, 'unlabelled', '.jpg', img_dir='JPEGImages', ann_dir=None)
    sets = root / 'ImageSets' / 'Segmentation'
    sets.mkdir(parents=True)
    (sets / 'train.txt').write_text('2007_b\n2007_a\n')
    (sets / 'aug.txt').write_text('2008_c\n\n2008_d\n')


def test_voc_aug_lists_each_split_with_its_label_folder(tmp_path):
    write_voc(tmp_path)
    cfg = dict(dataset_cfg('pascal_voc12_aug.yaml', 'train_dataloader', tmp_path), pipeline=PIPELINE)
    ds = DATASETS.build(cfg)
    assert isinstance(ds, PascalVOCDataset)
    assert names(ds) == [('JPEGImages/2007_b.jpg', 'SegmentationClass/2007_b.png'),
                         ('JPEGImages/2007_a.jpg', 'SegmentationClass/2007_a.png'),
                         ('JPEGImages/2008_c.jpg', 'SegmentationClassAug/2008_c.png'),
                         ('JPEGImages/2008_d.jpg', 'SegmentationClassAug/2008_d.png')]
    assert set(np.unique(gt(ds[3]))) <= {0, 20, 255}
    # the DeepLab layout: one list, one folder for every label
    (tmp_path / 'ImageSets' / 'Segmentation' / 'trainaug.txt').write_text('2008_c\n2008_d\n')
    one = PascalVOCDataset(data_root=str(tmp_path), split='ImageSets/Segmentation/trainaug.txt',
                           ann_dir='SegmentationClassAug')
    assert [n[1] for n in names(one)] == ['SegmentationClassAug/2008_c.png', 'SegmentationClassAug/2008_d.png']


def test_voc_split_list_errors_name_the_files(tmp_path):
    write_voc(tmp_path)
    sets = tmp_path / 'ImageSets' / 'Segmentation'
    two = ['ImageSets/Segmentation/train.txt', 'ImageSets/Segmentation/aug.txt']
    kw = dict(data_root=str(tmp_path), split=two)
    with pytest.raises(DataError, match=r'ann_dir lists 3 folders .* for 2 split files'):
        PascalVOCDataset(**kw, ann_dir=['a', 'b', 'c'])
    with pytest.raises(FileNotFoundError, match=r'split file not found: .*missing\.txt'):
        PascalVOCDataset(data_root=str(tmp_path), split=[two[0], 'ImageSets/Segmentation/missing.txt'])
    # one folder for both lists: the aug names have no label in SegmentationClass
    with pytest.raises(FileNotFoundError) as err:
        PascalVOCDataset(**kw, ann_dir='SegmentationClass')
    assert os.path.join('SegmentationClass', '2008_c.png') in str(err.value)
    assert os.path.join('JPEGImages', '2008_c.jpg') in str(err.value)
    (sets / 'aug.txt').write_text('2008_c\n2007_a\n')  # trainaug.txt passed as aug.txt: train names again
    with pytest.raises(DataError, match=r"'2007_a' is listed twice, in .*aug\.txt and in .*train\.txt"):
        PascalVOCDataset(**kw, ann_dir=['SegmentationClass', 'SegmentationClassAug'])
    (sets / 'aug.txt').write_text('2008_c\nnot_there\n')
    with pytest.raises(FileNotFoundError, match=r'image .*not_there\.jpg listed in .*aug\.txt not found'):
        PascalVOCDataset(**kw, ann_dir=['SegmentationClass', 'SegmentationClassAug'])


def test_list_file_pairs_test_lists_and_separators(tmp_path):
    for name in ('x', 'y'):
        write_pair(tmp_path, name, '.jpg', img_dir='imgs', ann_dir='anns')
    write_pair(tmp_path, 'with space', '.jpg', img_dir='imgs', ann_dir='anns')
    (tmp_path / 'lists').mkdir()
    (tmp_path / 'lists' / 'train.txt').write_text('imgs/y.jpg  anns/y.png\n\nimgs/x.jpg\tanns/x.png\n')
    ds = DATASETS.build(dict(type='ListFileSegDataset', data_root=str(tmp_path), list_file='lists/train.txt',
                             classes=['a', 'b', 'c', 'd'], pipeline=PIPELINE))
    assert names(ds) == [('imgs/y.jpg', 'anns/y.png'), ('imgs/x.jpg', 'anns/x.png')]
    assert gt(ds[0]).shape == (8, 10)
    (tmp_path / 'lists' / 'comma.txt').write_text('imgs/with space.jpg,anns/with space.png\n')
    ds = ListFileSegDataset(data_root=str(tmp_path), list_file='lists/comma.txt', separator=',', classes=['a'])
    assert names(ds) == [('imgs/with space.jpg', 'anns/with space.png')]
    (tmp_path / 'lists' / 'test.txt').write_text('imgs/x.jpg\nimgs/y.jpg\n')
    ds = ListFileSegDataset(data_root=str(tmp_path), list_file='lists/test.txt', classes=['a'])
    assert names(ds) == [('imgs/x.jpg', None), ('imgs/y.jpg', None)]


@pytest.mark.parametrize('text,error,pattern', [
    ('imgs/x.jpg anns/x.png\nimgs/with space.jpg anns/with space.png\n', DataError,
     r'train\.txt line 2: expected "image_path label_path".*got 4 field\(s\).*separator such as'),
    ('imgs/x.jpg anns/x.png\n\nimgs/x.jpg\n', DataError,
     r'train\.txt line 3: an image alone, but the first line lists an image and a label map'),
    ('imgs/x.jpg anns/x.png\nimgs/x.jpg anns/gone.png\n', FileNotFoundError,
     r'train\.txt line 2: label map .*anns/gone\.png not found'),
    ('imgs/gone.jpg anns/x.png\n', FileNotFoundError, r'train\.txt line 1: image .*imgs/gone\.jpg not found'),
    ('\n\n', DataError, r'train\.txt lists no samples'),
])
def test_list_file_errors_name_the_file_and_line(tmp_path, text, error, pattern):
    write_pair(tmp_path, 'x', '.jpg', img_dir='imgs', ann_dir='anns')
    (tmp_path / 'train.txt').write_text(text)
    with pytest.raises(error, match=pattern):
        ListFileSegDataset(data_root=str(tmp_path), list_file='train.txt', classes=['a'])


def test_list_file_argument_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'list file not found: .*nothing\.txt'):
        ListFileSegDataset(data_root=str(tmp_path), list_file='nothing.txt', classes=['a'])
    with pytest.raises(DataError, match=r"\['img_dir'\] do not apply"):
        ListFileSegDataset(data_root=str(tmp_path), list_file='a.txt', img_dir='images', classes=['a'])


def write_mask_pair(root, name: str, mask: np.ndarray, mode: str, size=None) -> None:
    h, w = mask.shape[:2] if size is None else size
    os.makedirs(root / 'images', exist_ok=True)
    os.makedirs(root / 'masks', exist_ok=True)
    cv2.imwrite(str(root / 'images' / f'{name}.jpg'), np.full((h, w, 3), 90, np.uint8))
    Image.fromarray(mask, mode=mode).save(root / 'masks' / f'{name}.png')


def test_binary_masks_any_nonzero_or_above_threshold_is_foreground(tmp_path):
    fg = np.zeros((6, 8), bool)
    fg[1:4, 2:7] = True
    write_mask_pair(tmp_path, 'a', np.where(fg, 255, 0).astype(np.uint8), 'L')  # 0/255 PNG
    rgb = np.zeros((6, 8, 3), np.uint8)
    rgb[fg] = (0, 0, 200)  # a mask saved in colour
    write_mask_pair(tmp_path, 'b', rgb, 'RGB')
    grey = np.where(fg, 200, 40).astype(np.uint8)  # a JPEG-ish mask: dark grey background
    write_mask_pair(tmp_path, 'c', grey, 'L')
    ds = DATASETS.build(dict(type='BinaryMaskFolderDataset', data_root=str(tmp_path), pipeline=PIPELINE))
    assert ds.metainfo['classes'] == ('background', 'foreground')
    assert names(ds) == [(f'images/{n}.jpg', f'masks/{n}.png') for n in 'abc']
    assert isinstance(ds.pipeline.transforms[1], LoadBinaryMask)
    assert not any(type(t) is LoadSegAnnotations for t in ds.pipeline.transforms)
    assert np.array_equal(gt(ds[0]), fg.astype(np.uint8)) and np.array_equal(gt(ds[1]), fg.astype(np.uint8))
    assert gt(ds[2]).all()  # threshold 0: the dark grey background counts as foreground
    ds = BinaryMaskFolderDataset(data_root=str(tmp_path), threshold=127, pipeline=PIPELINE)
    assert np.array_equal(gt(ds[2]), fg.astype(np.uint8)) and np.array_equal(gt(ds[0]), fg.astype(np.uint8))
    with pytest.raises(DataError, match='threshold must be a number'):
        BinaryMaskFolderDataset(data_root=str(tmp_path), threshold='high')
    with pytest.raises(DataError, match='reduce_zero_label does not apply'):
        BinaryMaskFolderDataset(data_root=str(tmp_path), reduce_zero_label=True)


def test_binary_mask_of_another_size_names_both_files_and_sizes(tmp_path):
    write_mask_pair(tmp_path, 'a', np.zeros((6, 7), np.uint8), 'L', size=(6, 8))
    ds = BinaryMaskFolderDataset(data_root=str(tmp_path), pipeline=PIPELINE, test_mode=True)
    with pytest.raises(DataError) as err:
        ds[0]
    msg = str(err.value)
    for part in (f"label map {tmp_path / 'masks' / 'a.png'} is 7x6 (WxH)", f"image {tmp_path / 'images' / 'a.jpg'}",
                 'is 8x6'):
        assert part in msg, msg


@pytest.mark.parametrize('dataset_file,num_classes', [('ade20k.yaml', 150), ('pascal_voc12_aug.yaml', 21)])
def test_new_base_configs_check_and_their_pipelines_run(tmp_path, dataset_file, num_classes):
    """A model config on each new dataset file passes check_config (every type and argument) and its train and
    test pipelines run on a synthetic sample."""
    import config_checks_segmentation

    from oars.config import load_config
    from oars.config.check import check_config
    from oars.engine.runner import prepare_config

    base = os.path.dirname(CONFIG_DIR)
    path = tmp_path / 'cfg.yaml'
    path.write_text(yaml.safe_dump({
        '_base_': [os.path.join(base, 'models', 'deeplabv3_r50.yaml'), os.path.join(CONFIG_DIR, dataset_file),
                   os.path.join(base, 'schedules', 'sgd_poly_40k.yaml'), os.path.join(base, 'runtime.yaml')],
        'default_scope': 'segmentation', 'model': {'num_classes': num_classes}}))
    cfg = prepare_config(load_config(str(path)), work_dir=str(tmp_path / 'work'))
    check_config(cfg)
    config_checks_segmentation.run_pipelines(cfg, tmp_path)
