"""voc2coco / labelme2coco: outputs load with pycocotools and CocoDataset, numbers right; the CLI."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

import cv2
import numpy as np
import pytest
from pycocotools.coco import COCO
from test_det_voc_dataset import obj, write_voc

from detection.datasets import BadAnnotationWarning, CocoDataset, VOCDataset
from detection.datasets.converters import labelme_to_coco, polygon_area, voc_to_coco, write_coco_json
from oars.errors import DataError, DataFileNotFoundError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def quiet_coco(path) -> COCO:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


def test_voc2coco_matches_voc_dataset(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (11, 6, 30, 15)), obj('cat', (1, 1, 8, 8), difficult=1)],
                         'b': [obj('dog', (50, 40, 80, 60))]})
    coco = voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt')
    out = tmp_path / 'annotations' / 'train.json'
    write_coco_json(coco, str(out))
    assert sorted(os.listdir(out.parent)) == ['train.json']  # no temporary left behind
    api = quiet_coco(out)
    assert [c['name'] for c in api.loadCats(api.getCatIds())] == ['cat', 'dog']  # sorted names found
    anns = api.loadAnns(api.getAnnIds(imgIds=[1]))
    assert anns[0]['bbox'] == [10.0, 5.0, 20.0, 10.0] and anns[0]['area'] == 200.0 and anns[0]['category_id'] == 2
    assert anns[1]['iscrowd'] == 1
    assert api.loadAnns(api.getAnnIds(imgIds=[2]))[0]['bbox'] == [49.0, 39.0, 15.0, 9.0]  # clipped
    assert api.loadImgs([1])[0] == {'id': 1, 'file_name': 'a.jpg', 'height': 48, 'width': 64}

    ds = CocoDataset(data_root=str(tmp_path), ann_file='annotations/train.json', data_prefix={'img': 'JPEGImages'},
                     classes=['cat', 'dog'])
    voc = VOCDataset(data_root=str(tmp_path), ann_file='ImageSets/Main/train.txt', classes=['cat', 'dog'])
    for i in range(2):
        c, v = ds.get_data_info(i), voc.get_data_info(i)
        assert c['img_path'] == v['img_path']
        assert [(x['bbox'], x['bbox_label'], x['ignore_flag']) for x in c['instances']] == \
            [(x['bbox'], x['bbox_label'], x['ignore_flag']) for x in v['instances']]


def test_voc2coco_classes_and_errors(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (1, 1, 5, 5)), obj('horse', (1, 1, 5, 5))]})
    coco = voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt', classes=['horse', 'dog'])
    assert [c['id'] for c in coco['categories']] == [1, 2]
    assert [a['category_id'] for a in coco['annotations']] == [2, 1]
    with pytest.raises(DataError, match="'horse'.*on_bad_annotation"):
        voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt', classes=['dog'])
    with pytest.warns(BadAnnotationWarning, match='unknown class name: 1'):
        coco = voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt', classes=['dog'], on_bad_annotation='skip')
    assert len(coco['annotations']) == 1
    with pytest.raises(DataFileNotFoundError, match='nowhere'):
        voc_to_coco(str(tmp_path / 'nowhere'), 'ImageSets/Main/train.txt')


def write_labelme(folder, name, shapes, h=40, w=50, image=True) -> None:
    os.makedirs(folder, exist_ok=True)
    if image:
        cv2.imwrite(os.path.join(folder, name + '.png'), np.zeros((h, w, 3), np.uint8))
    doc = {'version': '5.0.1', 'imagePath': name + '.png', 'imageHeight': h, 'imageWidth': w, 'imageData': None,
           'shapes': [dict(label=label, points=pts, shape_type=kind, flags={}) for label, kind, pts in shapes]}
    with open(os.path.join(folder, name + '.json'), 'w') as f:
        json.dump(doc, f)


def test_polygon_area_shoelace():
    assert polygon_area(np.array([[0, 0], [10, 0], [0, 10]], float)) == 50.0
    assert polygon_area(np.array([[0, 0], [0, 4], [3, 4], [3, 0]], float)) == 12.0  # clockwise too


def labelme_folder(tmp_path):
    folder = tmp_path / 'lm'
    write_labelme(folder, 'x1', [('tri', 'polygon', [[2, 3], [12, 3], [2, 13]]),
                                 ('box', 'rectangle', [[30, 20], [10, 5]]),
                                 ('tri', 'circle', [[5, 5], [8, 8]]),
                                 ('tri', 'polygon', [[1, 1], [2, 2]])])
    write_labelme(folder, 'x2', [('box', 'rectangle', [[1, 2], [4, 8]])])
    return folder


def test_labelme2coco_numbers_and_loading(tmp_path):
    folder = labelme_folder(tmp_path)
    with pytest.warns(BadAnnotationWarning) as rec:
        coco = labelme_to_coco(str(folder))
    msg = str(rec[0].message)
    assert len(rec) == 1 and "shape type 'circle': 1" in msg and 'degenerate shape: 1' in msg and 'x1.json' in msg
    assert [(c['id'], c['name']) for c in coco['categories']] == [(1, 'box'), (2, 'tri')]
    tri, rect, rect2 = coco['annotations']
    assert tri['bbox'] == [2.0, 3.0, 10.0, 10.0] and tri['area'] == 50.0 and tri['category_id'] == 2
    assert tri['segmentation'] == [[2.0, 3.0, 12.0, 3.0, 2.0, 13.0]]
    assert rect['bbox'] == [10.0, 5.0, 20.0, 15.0] and rect['area'] == 300.0
    assert rect['segmentation'] == [[10.0, 5.0, 30.0, 5.0, 30.0, 20.0, 10.0, 20.0]]
    assert rect2['image_id'] == 2 and [a['id'] for a in coco['annotations']] == [1, 2, 3]
    assert coco['images'][0] == {'id': 1, 'file_name': 'x1.png', 'height': 40, 'width': 50}

    out = tmp_path / 'ann.json'
    write_coco_json(coco, str(out))
    api = quiet_coco(out)
    mask = api.annToMask(api.loadAnns([2])[0])
    assert mask.shape == (40, 50) and abs(int(mask.sum()) - 300) <= 40  # rasterised rectangle ~ its area
    ds = CocoDataset(data_root=str(tmp_path), ann_file='ann.json', data_prefix={'img': 'lm'}, classes=['tri', 'box'])
    info = ds.get_data_info(0)
    assert [(i['bbox'], i['bbox_label']) for i in info['instances']] == [([2.0, 3.0, 12.0, 13.0], 0),
                                                                        ([10.0, 5.0, 30.0, 20.0], 1)]


def test_labelme2coco_classes_image_root_and_bad_files(tmp_path):
    folder = labelme_folder(tmp_path)
    with pytest.warns(BadAnnotationWarning, match='label not in classes: 2'):
        coco = labelme_to_coco(str(folder), classes=['box'], image_root=str(tmp_path))
    assert [a['category_id'] for a in coco['annotations']] == [1, 1]
    assert coco['images'][0]['file_name'] == os.path.join('lm', 'x1.png')
    (folder / 'x3.json').write_text('{"imagePath": "x3.png", "shapes": []}')
    with pytest.raises(DataError, match=r"x3\.json.*'imageHeight'"):
        labelme_to_coco(str(folder))
    (folder / 'x3.json').write_text('{not json')
    with pytest.raises(DataError, match=r'x3\.json'):
        labelme_to_coco(str(folder))
    (tmp_path / 'empty').mkdir()
    with pytest.raises(DataFileNotFoundError, match='no labelme'):
        labelme_to_coco(str(tmp_path / 'empty'))


def test_cli_writes_file_and_reports_errors_cleanly(tmp_path, monkeypatch, capsys):
    folder = tmp_path / 'lm'
    write_labelme(folder, 'x2', [('box', 'rectangle', [[1, 2], [4, 8]])])
    out = tmp_path / 'out' / 'ann.json'
    script = os.path.join(ROOT, 'tools', 'convert.py')
    proc = subprocess.run([sys.executable, script, 'labelme2coco', '--input', str(folder), '--out', str(out),
                           '--classes', 'box'], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 'wrote' in proc.stdout and str(out) in proc.stdout
    assert json.loads(out.read_text())['annotations'][0]['bbox'] == [1.0, 2.0, 3.0, 6.0]

    # a bad input, through the same entry point in-process (a second interpreter start costs seconds)
    (tmp_path / 'bad').mkdir()
    (tmp_path / 'bad' / 'x.json').write_text('[]')
    monkeypatch.setattr(sys, 'argv', [script, 'labelme2coco', '--input', str(tmp_path / 'bad'),
                                      '--out', str(tmp_path / 'x.json')])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(script, run_name='__main__')
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith('error: labelme file') and 'x.json' in err and 'Traceback' not in err
    assert not (tmp_path / 'x.json').exists()
