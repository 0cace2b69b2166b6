"""coco2yolo / yolo2coco: COCO -> YOLO -> COCO keeps boxes and categories; the CLI as users call it (relative paths,
an existing output, a corrupt line); the images folder is never written."""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import subprocess
import sys

import cv2
import numpy as np
import pytest
import yaml

from detection.datasets import CocoDataset, YOLOTxtDataset
from detection.datasets.yolo_converters import coco_to_yolo, yolo_to_coco
from oars.errors import DataError
from oars_deploy.output_paths import OutputPathError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = {'a.jpg': (48, 64), 'sub/b.png': (100, 37), 'c.png': (30, 30)}  # file_name: (H, W)


def write_coco(folder) -> str:
    """``folder/imgs`` with three images (one in a sub-folder, one without objects) and ``folder/ann.json``:
    float boxes, a box partly outside its image, a crowd box; category ids 1, 2 ('zebra' first: ids, not names,
    give the order)."""
    images = []
    for i, (name, (h, w)) in enumerate(SIZES.items(), start=1):
        path = os.path.join(folder, 'imgs', name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cv2.imwrite(path, np.full((h, w, 3), 40 * i, np.uint8))
        images.append({'id': i, 'file_name': name, 'height': h, 'width': w})
    anns = [([3.25, 4.5, 20.125, 10.0], 1, 1, 0), ([50.0, 30.0, 30.0, 30.0], 1, 2, 0),  # the second leaves the image
            ([1.0, 1.0, 5.5, 90.3], 2, 1, 0), ([0.0, 0.0, 10.0, 10.0], 2, 2, 1)]  # crowd
    ann = {'images': images, 'categories': [{'id': 1, 'name': 'zebra'}, {'id': 2, 'name': 'ant'}],
           'annotations': [{'id': k, 'image_id': img, 'category_id': cat, 'bbox': box, 'area': box[2] * box[3],
                            'iscrowd': crowd} for k, (box, img, cat, crowd) in enumerate(anns, start=1)]}
    path = os.path.join(folder, 'ann.json')
    with open(path, 'w') as f:
        json.dump(ann, f)
    return path


def digest(folder) -> dict[str, str]:
    out = {}
    for base, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(base, name), 'rb') as f:
                out[os.path.relpath(os.path.join(base, name), folder)] = hashlib.sha1(f.read()).hexdigest()
    return out


def test_coco_to_yolo_to_coco_keeps_boxes_and_categories(tmp_path):
    ann = write_coco(tmp_path)
    before = digest(tmp_path / 'imgs')
    result = coco_to_yolo(ann, str(tmp_path / 'imgs'), str(tmp_path / 'yolo'), split='val')
    assert digest(tmp_path / 'imgs') == before
    assert result['objects'] == 3 and result['left_out'] == {'crowd (iscrowd: 1)': 1}
    with open(tmp_path / 'yolo' / 'data.yaml') as f:
        assert yaml.safe_load(f) == {'path': '.', 'val': 'images/val', 'names': {0: 'zebra', 1: 'ant'}}
    assert (tmp_path / 'yolo' / 'labels' / 'val' / 'c.txt').read_text() == ''  # no objects: empty file
    assert os.path.islink(tmp_path / 'yolo' / 'images' / 'val' / 'a.jpg')

    coco, image_root = yolo_to_coco(str(tmp_path / 'yolo' / 'data.yaml'), 'val')
    assert image_root == str(tmp_path / 'yolo' / 'images' / 'val')
    assert [(c['id'], c['name']) for c in coco['categories']] == [(1, 'zebra'), (2, 'ant')]
    assert [(i['file_name'], i['height'], i['width']) for i in coco['images']] == \
        sorted((n, h, w) for n, (h, w) in SIZES.items())
    original = CocoDataset(ann_file=ann, data_prefix={'img': str(tmp_path / 'imgs')}, classes=['zebra', 'ant'],
                           test_mode=True, filter_empty_gt=False, serialize_data=False)
    expected = {os.path.relpath(i['img_path'], tmp_path / 'imgs'): [(x['bbox'], x['bbox_label']) for x in
                                                                    i['instances'] if not x['ignore_flag']]
                for i in original.data_list}  # clipped to the image, crowd left out
    by_id = {i['id']: i['file_name'] for i in coco['images']}
    got: dict[str, list] = {name: [] for name in expected}
    for a in coco['annotations']:
        x, y, w, h = a['bbox']
        got[by_id[a['image_id']]].append(([x, y, x + w, y + h], a['category_id'] - 1))
    assert got.keys() == expected.keys()
    for name, boxes in expected.items():
        assert [label for _, label in got[name]] == [label for _, label in boxes]
        np.testing.assert_allclose(np.reshape([b for b, _ in got[name]], (-1, 4)),
                                   np.reshape([b for b, _ in boxes], (-1, 4)), atol=1e-3)
    # the YOLO dataset gives the same data infos as CocoDataset on the round-tripped json
    yolo = YOLOTxtDataset(data_yaml=str(tmp_path / 'yolo' / 'data.yaml'), split='val', test_mode=True,
                          serialize_data=False)
    assert [len(i['instances']) for i in yolo.data_list] == [len(expected[n]) for n in sorted(expected)]


def run_in(cwd, *args: str) -> subprocess.CompletedProcess:
    """``python <repo>/tools/convert.py ARGS`` started in ``cwd`` (relative paths resolve there, as for a user)."""
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env['PYTHONPATH'] = os.pathsep.join([ROOT, os.path.join(ROOT, 'deploy/python'), env.get('PYTHONPATH', '')])
    return subprocess.run([sys.executable, os.path.join(ROOT, 'tools/convert.py'), *args], cwd=str(cwd),
                          capture_output=True, text=True, timeout=300, env=env)


def test_cli_relative_paths_existing_outputs_and_a_corrupt_line(tmp_path, monkeypatch, capsys):
    """In this process (``tools/convert.py``'s main with the user's working folder) for the conversions and the
    refusals; one real command line for the corrupt line: exit status 2, one message, no traceback."""
    convert = runpy.run_path(os.path.join(ROOT, 'tools/convert.py'))['main']
    write_coco(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = digest('imgs')
    convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo', '--split', 'train'])
    out = capsys.readouterr().out
    assert 'wrote yolo: 3 images' in out and 'left out 1 crowd' in out
    convert(['yolo2coco', '--data', 'yolo/data.yaml', '--out', 'back.json'])
    assert 'wrote back.json: 3 images, 3 annotations' in capsys.readouterr().out
    back = (tmp_path / 'back.json').read_bytes()

    # existing outputs are refused before anything is read; the images folder is never an output
    with pytest.raises(OutputPathError, match='back.json exists already.*--overwrite'):
        convert(['yolo2coco', '--data', 'yolo/data.yaml', '--out', 'back.json'])
    with pytest.raises(OutputPathError, match="--out yolo holds the split 'train' already .*--overwrite"):
        convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo'])
    with pytest.raises(OutputPathError, match='is inside the input folder --images imgs'):
        convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'imgs/yolo', '--overwrite'])
    convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo', '--overwrite'])
    assert digest('imgs') == before

    # a corrupt line: one message naming the file and the line, nothing written
    with open(tmp_path / 'yolo' / 'labels' / 'train' / 'a.txt', 'a') as f:
        f.write('0 0.5 0.5 nan-ish 0.1\n')
    proc = run_in(tmp_path, 'yolo2coco', '--data', 'yolo/data.yaml', '--out', 'back.json', '--overwrite')
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert os.path.join('yolo', 'labels', 'train', 'a.txt') + ':3: ' in proc.stderr, proc.stderr
    assert 'is not 5 numbers' in proc.stderr
    assert (tmp_path / 'back.json').read_bytes() == back


def test_a_second_split_into_the_same_folder_keeps_the_first_in_the_yaml(tmp_path):
    ann = write_coco(tmp_path)
    coco_to_yolo(ann, str(tmp_path / 'imgs'), str(tmp_path / 'yolo'), split='train')
    coco_to_yolo(ann, str(tmp_path / 'imgs'), str(tmp_path / 'yolo'), split='val', copy_images=True)
    with open(tmp_path / 'yolo' / 'data.yaml') as f:
        data = yaml.safe_load(f)
    assert data['train'] == 'images/train' and data['val'] == 'images/val'
    assert not os.path.islink(tmp_path / 'yolo' / 'images' / 'val' / 'a.jpg')


def test_cli_adds_a_split_to_an_existing_output_and_refuses_other_classes(tmp_path, monkeypatch, capsys):
    """As --help says: a second split into the same --out is added (the first kept, data.yaml merged); the same
    split again needs --overwrite; other class names are one message naming both lists; a folder that is not a
    YOLO dataset is refused. Each refusal writes nothing."""
    convert = runpy.run_path(os.path.join(ROOT, 'tools/convert.py'))['main']
    write_coco(tmp_path)
    monkeypatch.chdir(tmp_path)
    convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo', '--split', 'train'])
    train = digest('yolo/labels/train')
    convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo', '--split', 'val'])
    assert 'wrote yolo: 3 images (labels/val, images/val)' in capsys.readouterr().out
    data = yaml.safe_load((tmp_path / 'yolo' / 'data.yaml').read_text())
    assert data == {'path': '.', 'train': 'images/train', 'val': 'images/val', 'names': {0: 'zebra', 1: 'ant'}}
    assert digest('yolo/labels/train') == train and digest('yolo/labels/val') == train  # same json, same labels
    before = digest('yolo')

    with pytest.raises(OutputPathError, match="--out yolo holds the split 'val' already"):
        convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'yolo', '--split', 'val'])
    other = json.loads((tmp_path / 'ann.json').read_text())
    other['categories'][1]['name'] = 'bee'
    (tmp_path / 'other.json').write_text(json.dumps(other))
    with pytest.raises(DataError, match=r"yolo/data.yaml \(splits \['train', 'val'\]\) lists the classes "
                                        r"\['zebra', 'ant'\] but other.json has \['zebra', 'bee'\]"):
        convert(['coco2yolo', '--ann', 'other.json', '--images', 'imgs', '--out', 'yolo', '--split', 'test'])
    assert digest('yolo') == before  # nothing written by either refusal

    os.makedirs('notyolo')
    (tmp_path / 'notyolo' / 'notes.txt').write_text('mine')
    with pytest.raises(OutputPathError, match='--out notyolo is not empty and holds no data.yaml'):
        convert(['coco2yolo', '--ann', 'ann.json', '--images', 'imgs', '--out', 'notyolo'])
