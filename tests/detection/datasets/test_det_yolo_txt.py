"""YOLOTxtDataset: ultralytics layout read directly, same data infos as CocoDataset, errors naming file and line,
evaluation with CocoMetric from the samples' ground truth."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
import yaml

from detection.datasets import BadAnnotationWarning, YOLOTxtDataset
from detection.datasets.yolo_files import label_path
from oars.errors import DataError, DataFileNotFoundError

NAMES = ['cat', 'dog']


def write_yolo(root, images: dict, split: str = 'train', names=NAMES, size=(40, 80)) -> str:
    """``root/images/<split>/<name>.png`` (H x W = ``size``) with ``root/labels/<split>/<name>.txt`` holding the
    given lines (None: no label file), and ``root/data.yaml``; returns the YAML's path."""
    for name, lines in images.items():
        img = os.path.join(root, 'images', split, name + '.png')
        os.makedirs(os.path.dirname(img), exist_ok=True)
        cv2.imwrite(img, np.zeros((*size, 3), np.uint8))
        if lines is not None:
            os.makedirs(os.path.dirname(label_path(img)), exist_ok=True)
            with open(label_path(img), 'w') as f:
                f.write(''.join(line + '\n' for line in lines))
    path = os.path.join(root, 'data.yaml')
    with open(path, 'w') as f:
        yaml.safe_dump({'path': '.', 'train': 'images/train', 'val': 'images/val', 'names': names}, f)
    return path


def test_reads_boxes_in_pixels_and_an_image_without_labels_has_no_objects(tmp_path):
    data_yaml = write_yolo(tmp_path, {'b': ['1 0.5 0.5 0.25 0.5', '', '0 0.1 0.1 0.2 0.2'], 'a': None, 'c': []})
    ds = YOLOTxtDataset(data_yaml=data_yaml, split='train', test_mode=True, filter_empty_gt=False)
    assert ds.metainfo['classes'] == ('cat', 'dog')
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [os.path.basename(i['img_path']) for i in infos] == ['a.png', 'b.png', 'c.png']
    assert [i['img_id'] for i in infos] == [1, 2, 3]
    assert (infos[1]['height'], infos[1]['width']) == (40, 80)
    assert infos[0]['instances'] == [] and infos[2]['instances'] == []
    assert infos[1]['instances'] == [{'bbox': [30.0, 10.0, 50.0, 30.0], 'bbox_label': 1, 'ignore_flag': 0},
                                     {'bbox': [0.0, 0.0, 16.0, 8.0], 'bbox_label': 0, 'ignore_flag': 0}]
    # training drops the images without objects (filter_empty_gt), as CocoDataset does
    assert len(YOLOTxtDataset(data_yaml=data_yaml, split='train')) == 1


def test_names_as_a_mapping_relative_data_root_and_a_subset_of_classes(tmp_path):
    write_yolo(tmp_path, {'a': ['0 0.5 0.5 0.5 0.5', '1 0.5 0.5 0.2 0.2']}, names={0: 'cat', 1: 'dog'})
    ds = YOLOTxtDataset(data_root=str(tmp_path), data_yaml='data.yaml', classes=['dog'])
    assert ds.metainfo['classes'] == ('dog',)
    assert [i['bbox_label'] for i in ds.get_data_info(0)['instances']] == [0]
    with pytest.raises(DataError, match="classes \\['bird'\\] are not names of .*data.yaml"):
        YOLOTxtDataset(data_root=str(tmp_path), data_yaml='data.yaml', classes=['bird']).full_init()


def test_a_split_given_as_an_image_list(tmp_path):
    """``val: val.txt`` listing images (``./`` and plain paths are relative to the list's folder): only those are
    read, and label files of other images in the folder are not "without an image"."""
    write_yolo(tmp_path, {'a': ['0 0.5 0.5 0.5 0.5'], 'b': ['1 0.5 0.5 0.5 0.5'], 'c': None})
    (tmp_path / 'val.txt').write_text('./images/train/b.png\nimages/train/c.png\n')
    data_yaml = tmp_path / 'list.yaml'
    data_yaml.write_text('val: val.txt\nnames: [cat, dog]\n')  # no `path`: the YAML's folder
    ds = YOLOTxtDataset(data_yaml=str(data_yaml), split='val', test_mode=True, serialize_data=False)
    assert [os.path.basename(i['img_path']) for i in ds.data_list] == ['b.png', 'c.png']
    assert [len(i['instances']) for i in ds.data_list] == [1, 0]


@pytest.mark.parametrize('line, needle', [
    ('2 0.5 0.5 0.1 0.1', 'class id 2; expected an integer 0..1'),
    ('0 0.5 1.5 0.1 0.1', 'cy = 1.5; expected values divided by the image size, in 0..1'),
    ('0 0.5 0.5 0.1', '4 fields'),
    ('0 0.5 0.5 0.1 0.1 0.3', '6 fields'),
    ('0 0.5 abc 0.1 0.1', 'is not 5 numbers'),
    ('0 0.5 0.5 0 0.1', 'w 0, h 0.1; expected both > 0'),
])
def test_a_bad_line_names_the_file_and_the_line(tmp_path, line, needle):
    data_yaml = write_yolo(tmp_path, {'a': ['0 0.5 0.5 0.1 0.1', line]})
    label = os.path.join(tmp_path, 'labels', 'train', 'a.txt')
    with pytest.raises(DataError, match=f'{label}:2: .*{needle}'.replace('[', '\\[')):
        YOLOTxtDataset(data_yaml=data_yaml).full_init()
    with pytest.warns(BadAnnotationWarning, match='skipped 1 bad annotation'):
        ds = YOLOTxtDataset(data_yaml=data_yaml, on_bad_annotation='skip')
    assert len(ds.get_data_info(0)['instances']) == 1


def test_a_label_file_without_an_image_is_an_error(tmp_path):
    data_yaml = write_yolo(tmp_path, {'a': ['0 0.5 0.5 0.1 0.1']})
    orphan = os.path.join(tmp_path, 'labels', 'train', 'gone.txt')
    with open(orphan, 'w') as f:
        f.write('1 0.5 0.5 0.1 0.1\n')
    with open(os.path.join(tmp_path, 'labels', 'train', 'classes.txt'), 'w') as f:  # LabelImg's, not a label
        f.write('cat\ndog\n')
    with pytest.raises(DataError, match=f'{orphan}: no image of the train split has this label file'):
        YOLOTxtDataset(data_yaml=data_yaml).full_init()


def test_bad_yaml_and_split(tmp_path):
    data_yaml = write_yolo(tmp_path, {'a': ['0 0.5 0.5 0.1 0.1']})
    with pytest.raises(DataFileNotFoundError, match='data.yaml: val: .*images/val not found; expected a folder'):
        YOLOTxtDataset(data_yaml=data_yaml, split='val').full_init()
    with pytest.raises(DataError, match="split 'valid'; expected one of"):
        YOLOTxtDataset(data_yaml=data_yaml, split='valid')
    with open(data_yaml, 'w') as f:
        yaml.safe_dump({'train': 'images/train', 'names': {0: 'cat', 2: 'dog'}}, f)
    with pytest.raises(DataError, match='ids 0..K-1'):
        YOLOTxtDataset(data_yaml=data_yaml)


def test_coco_metric_evaluates_from_the_samples(tmp_path):
    """No COCO json: CocoMetric takes the ground truth from the samples; predictions equal to it score mAP 1."""
    from mmengine.evaluator import Evaluator

    from detection.evaluation import CocoMetric

    data_yaml = write_yolo(tmp_path, {'a': ['1 0.5 0.5 0.25 0.5'], 'b': ['0 0.3 0.4 0.5 0.5', '1 0.7 0.7 0.2 0.3'],
                                      'c': None}, split='val')
    pipeline = [{'type': 'LoadImageFromFile'}, {'type': 'LoadAnnotations', 'with_bbox': True},
                {'type': 'Resize', 'scale': (64, 64), 'keep_ratio': False},
                {'type': 'PackDetInputs', 'meta_keys': ['img_id', 'img_path', 'ori_shape', 'img_shape',
                                                       'scale_factor']}]
    ds = YOLOTxtDataset(data_yaml=data_yaml, split='val', test_mode=True, pipeline=pipeline)
    assert 'ann_file' not in ds.metainfo  # else CocoMetric would read it as a COCO json
    samples = []
    for i in range(len(ds)):
        sample = ds[i]['data_samples']
        info = ds.get_data_info(i)
        pred = sample.gt_instances.clone()
        pred.bboxes = pred.bboxes.new_tensor([inst['bbox'] for inst in info['instances']]).reshape(-1, 4)
        pred.scores = pred.bboxes.new_ones(len(pred.bboxes))
        sample.pred_instances = pred
        samples.append(sample)
    metric = CocoMetric()
    evaluator = Evaluator(metric)
    evaluator.dataset_meta = ds.metainfo
    evaluator.process(samples)
    assert evaluator.evaluate(len(samples))['coco/bbox_mAP'] == pytest.approx(1.0)
