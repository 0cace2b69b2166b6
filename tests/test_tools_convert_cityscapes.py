"""tools/convert.py cityscapes2seg: Cityscapes polygons -> *_labelTrainIds.png as cityscapesScripts'
createTrainIdLabelImgs draws them (hand-counted pixels, PIL's own drawing); CityscapesDataset reads the result;
every bad file names the json and the object; existing maps are kept unless --overwrite."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from demo_utils import ROOT, load_tool
from PIL import Image, ImageDraw

from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.output_paths import OutputPathError
from segmentation.datasets import CityscapesDataset
from segmentation.datasets.cityscapes_labels import LABELS, lookup_label, train_class_names
from segmentation.datasets.cityscapes_polygons import cityscapes_to_train_ids, read_polygons

STEM = 'aachen_000000_000019'


def obj(label: str, polygon, **extra) -> dict:
    return dict(label=label, polygon=[list(p) for p in polygon], **extra)


def write_polygons(folder, stem: str, objects: list, height: int = 6, width: int = 8, **override) -> str:
    os.makedirs(folder, exist_ok=True)
    doc = dict(imgHeight=height, imgWidth=width, objects=objects)
    doc.update(override)
    path = os.path.join(folder, f'{stem}_gtFine_polygons.json')
    with open(path, 'w') as f:
        json.dump(doc, f)
    return path


def box(x1: int, y1: int, x2: int, y2: int) -> list:
    return [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]


# drawn in this order: road, then a car group over it, a license plate (id -1: not drawn), a deleted sky (not
# drawn), an 'out of roi' (train id 255) over the road's corner, a triangle of person
OBJECTS = [obj('road', box(0, 3, 7, 5)), obj('cargroup', box(1, 1, 3, 4)), obj('license plate', box(0, 0, 7, 5)),
           obj('sky', box(0, 0, 7, 5), deleted=1), obj('out of roi', box(6, 4, 7, 5)),
           obj('person', [(5, 0), (7, 0), (7, 2)])]


def expected_map() -> np.ndarray:
    expected = np.full((6, 8), 255, np.uint8)
    expected[3:6, 0:8] = 0  # road: rows 3..5, columns 0..7, outline included (PIL)
    expected[1:5, 1:4] = 13  # cargroup -> car (train id 13), drawn over the road
    expected[4:6, 6:8] = 255  # out of roi
    expected[0, 5:8] = 11  # the person triangle: (5,0)-(7,0)-(7,2), its edges included
    expected[1, 6:8] = 11
    expected[2, 7] = 11
    return expected



@pytest.mark.slow  # a subprocess that imports the tasks (5-8 s of CPU)
def test_cli_writes_beside_the_json_and_cityscapes_dataset_reads_them(tmp_path):
    """As a user runs it: --out is --input (the maps beside the json files, where CityscapesDataset looks)."""
    gt = tmp_path / 'gtFine' / 'train' / 'aachen'
    write_polygons(gt, STEM, OBJECTS)
    write_polygons(gt, 'aachen_000001_000019', [obj('bicycle', box(0, 0, 1, 1))])
    img_dir = tmp_path / 'leftImg8bit' / 'train' / 'aachen'
    img_dir.mkdir(parents=True)
    for stem in (STEM, 'aachen_000001_000019'):
        Image.new('RGB', (8, 6)).save(img_dir / f'{stem}_leftImg8bit.png')
    cmd = [sys.executable, os.path.join(ROOT, 'tools', 'convert.py'), 'cityscapes2seg', '--input', 'gtFine',
           '--out', 'gtFine']
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=ROOT))  # this checkout's tasks
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'wrote 2 train-id label maps (_labelTrainIds.png) to gtFine: 5 objects drawn' in proc.stdout
    assert 'not drawn (as cityscapesScripts): deleted: 1, no id (license plate): 1' in proc.stdout
    out = gt / f'{STEM}_gtFine_labelTrainIds.png'
    with Image.open(out) as im:
        assert im.mode == 'L'
        assert np.array_equal(np.array(im), expected_map())
    ds = CityscapesDataset(data_root=str(tmp_path), pipeline=[dict(type='LoadImageFromFile'),
                                                              dict(type='LoadSegAnnotations'),
                                                              dict(type='PackSegInputs')])
    assert len(ds) == 2
    assert np.array_equal(ds[0]['data_samples'].gt_sem_seg.data[0].numpy(), expected_map())
    second = ds[1]['data_samples'].gt_sem_seg.data[0].numpy()
    assert (second[0:2, 0:2] == 18).all() and second.sum() == 18 * 4 + 255 * 44


def test_label_table_matches_the_dataset_and_groups():
    assert train_class_names() == list(CityscapesDataset.METAINFO['classes'])
    assert sum(1 for label in LABELS if 0 <= label.train_id < 255) == 19
    assert lookup_label('cargroup').name == 'car' and lookup_label('persongroup').train_id == 11
    assert lookup_label('polegroup').train_id == 255  # a row of its own, not 'pole'
    assert lookup_label('skygroupx') is None and lookup_label('foogroup') is None


def test_drawing_is_pil_polygon_fill_in_file_order(tmp_path):
    """Fractional vertices and a concave shape: the same call cityscapesScripts makes (ImageDraw.polygon)."""
    star = [(8, 1), (10.4, 7), (15, 7.6), (11, 10), (13, 15), (8, 12), (3, 15), (5, 10), (1, 7), (6, 7)]
    write_polygons(tmp_path / 'gt' / 'a', 'a_0', [obj('building', star), obj('wall', box(7, 6, 9, 8))],
                   height=16, width=16)
    cityscapes_to_train_ids(str(tmp_path / 'gt'), str(tmp_path / 'out'))
    ref = Image.new('L', (16, 16), 255)
    ImageDraw.Draw(ref).polygon(star, fill=2)
    ImageDraw.Draw(ref).polygon(box(7, 6, 9, 8), fill=3)
    with Image.open(tmp_path / 'out' / 'a' / 'a_0_gtFine_labelTrainIds.png') as im:
        got = np.array(im)
    assert np.array_equal(got, np.array(ref))
    assert (got == 3).sum() == 9 and (got == 2).sum() > 40


@pytest.mark.parametrize('content,pattern', [
    ('{"imgHeight": 4,\n "imgWidth": 4 "objects": []}', r'b_gtFine_polygons\.json: invalid JSON at line 2 column'),
    (dict(imgWidth=8, objects=[]), r"b_gtFine_polygons\.json: no 'imgHeight'; expected the image size"),
    (dict(imgHeight=6, imgWidth=0, objects=[]), r"'imgWidth' is 0; expected a positive whole number"),
    (dict(imgHeight=6, imgWidth=8, objects={}), r"'objects' is dict; expected a list"),
    (dict(imgHeight=6, imgWidth=8, objects=[obj('road', box(0, 0, 2, 2)), obj('car', [(0, 0), (3, 3)])]),
     r"b_gtFine_polygons\.json: object 1 \('car'\): polygon has 2 point\(s\) .*expected at least 3"),
    (dict(imgHeight=6, imgWidth=8, objects=[obj('car', [(0, 0), (3, 'x'), (0, 3)])]),
     r"object 0 \('car'\): point 1 is \[3, 'x'\]; expected \[x, y\] with finite numbers"),
    (dict(imgHeight=6, imgWidth=8, objects=[obj('road', box(0, 0, 2, 2)), obj('spaceship', box(0, 0, 2, 2))]),
     r"object 1 \('spaceship'\): label 'spaceship' is not a Cityscapes label"),
    (dict(imgHeight=6, imgWidth=8, objects=[{'polygon': box(0, 0, 2, 2)}]),
     r"object 0 is .*expected an object with a 'label' string and a 'polygon'"),
])
def test_bad_file_names_the_json_and_object_and_writes_nothing(tmp_path, content, pattern):
    write_polygons(tmp_path / 'gt' / 'city', 'a', OBJECTS)
    path = tmp_path / 'gt' / 'city' / 'b_gtFine_polygons.json'
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DataError, match=pattern):
        cityscapes_to_train_ids(str(tmp_path / 'gt'), str(tmp_path / 'out'))
    assert not (tmp_path / 'out').exists()  # a.json was fine, but nothing is written before every file is checked


def test_deleted_objects_are_not_checked_and_no_files_found(tmp_path):
    path = write_polygons(tmp_path, 'x', [obj('car', [(0, 0)], deleted=1), obj('unknown thing', [], deleted=True)])
    doc = read_polygons(path)
    assert doc.shapes == [] and doc.skipped['deleted'] == 2
    (tmp_path / 'empty').mkdir()
    with pytest.raises(DataFileNotFoundError, match=r'empty: no \*_gt\*_polygons\.json files found'):
        cityscapes_to_train_ids(str(tmp_path / 'empty'), str(tmp_path / 'out'))
    with pytest.raises(DataFileNotFoundError, match=r'--input .*nothing_here: not a folder'):
        cityscapes_to_train_ids(str(tmp_path / 'nothing_here'), str(tmp_path / 'out'))


def test_existing_maps_are_kept_unless_overwrite_and_out_may_not_mix_layouts(tmp_path):
    """Through tools/convert.py's main (in-process)."""
    tool = load_tool('convert')
    gt = tmp_path / 'gtFine'
    write_polygons(gt / 'val' / 'lindau', STEM, OBJECTS)
    precious = gt / 'val' / 'lindau' / f'{STEM}_gtFine_labelTrainIds.png'
    precious.write_bytes(b'precious')
    argv = ['cityscapes2seg', '--input', str(gt), '--out', str(gt)]
    with pytest.raises(DataError, match=r'1 label map\(s\) exist already: .*_labelTrainIds\.png; nothing was '
                                        r'written \(pass --overwrite'):
        tool.main(argv)
    assert precious.read_bytes() == b'precious'
    tool.main([*argv, '--overwrite'])
    with Image.open(precious) as im:
        assert np.array_equal(np.array(im), expected_map())
    assert not [n for n in os.listdir(precious.parent) if n.startswith('.')]  # no temporary files left behind
    for out in (gt / 'val', tmp_path):  # inside the input, or holding it: refused before anything is read
        with pytest.raises(OutputPathError, match='the input folder --input'):
            tool.main(['cityscapes2seg', '--input', str(gt), '--out', str(out)])
