"""labelme2coco / voc2coco never write a COCO file that lists an image which does not exist: the converter stops
with a message naming the annotation file and the missing image (before: exit 0 and a file nothing could train
on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_det_convert import ROOT, write_labelme
from test_det_voc_dataset import obj, write_voc

from detection.datasets import BadAnnotationWarning
from detection.datasets.converters import labelme_to_coco, voc_to_coco
from oars.errors import DataFileNotFoundError

BOX = [('box', 'rectangle', [[1, 2], [4, 8]])]


def test_labelme2coco_missing_image_names_json_and_image(tmp_path):
    folder = tmp_path / 'lm'
    write_labelme(folder, 'x1', BOX)
    write_labelme(folder, 'x2', BOX, image=False)
    with pytest.raises(DataFileNotFoundError) as err:
        labelme_to_coco(str(folder))
    msg = str(err.value)
    for part in ('x2.json', "imagePath 'x2.png'", str(folder / 'x2.png'), 'not found', '1 of 2 image(s)'):
        assert part in msg, (part, msg)
    assert 'x1.json' not in msg


def test_labelme2coco_image_path_is_relative_to_its_json(tmp_path):
    folder = tmp_path / 'lm'
    write_labelme(folder, 'x1', BOX, image=False)
    (tmp_path / 'images').mkdir()
    os.replace(folder / 'x1.json', folder / 'x1.tmp')
    text = (folder / 'x1.tmp').read_text().replace('"x1.png"', '"../images/x1.png"')
    (folder / 'x1.json').write_text(text)
    os.remove(folder / 'x1.tmp')
    with pytest.raises(DataFileNotFoundError, match=r"x1\.json: imagePath '\.\./images/x1\.png' ->"):
        labelme_to_coco(str(folder))
    write_labelme(tmp_path / 'images', 'x1', [])  # writes images/x1.png (and a json there, unused)
    coco = labelme_to_coco(str(folder), image_root=str(tmp_path))
    assert coco['images'][0]['file_name'] == os.path.join('images', 'x1.png')


def test_labelme2coco_cli_missing_image_is_a_clean_error(tmp_path):
    write_labelme(tmp_path / 'lm', 'x1', BOX, image=False)
    script = os.path.join(ROOT, 'tools', 'convert.py')
    proc = subprocess.run([sys.executable, script, 'labelme2coco', '--input', 'lm', '--out', 'ann.json'],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stdout
    assert 'Traceback' not in proc.stderr, proc.stderr
    assert 'x1.json' in proc.stderr and 'x1.png' in proc.stderr and 'not found' in proc.stderr, proc.stderr
    assert not (tmp_path / 'ann.json').exists()


def test_voc2coco_missing_image_is_an_error_or_left_out_under_skip(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (1, 1, 5, 5))], 'b': [obj('dog', (1, 1, 5, 5))]}, no_image=('b',))
    with pytest.raises(DataFileNotFoundError) as err:
        voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt')
    assert 'b.xml' in str(err.value) and os.path.join('JPEGImages', 'b.jpg') in str(err.value)
    with pytest.warns(BadAnnotationWarning, match='missing image: 1'):
        coco = voc_to_coco(str(tmp_path), 'ImageSets/Main/train.txt', on_bad_annotation='skip')
    assert [i['file_name'] for i in coco['images']] == ['a.jpg']
