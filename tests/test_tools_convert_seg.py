"""tools/convert.py labelme2seg: labelme shapes -> class-id label PNGs, checked against PIL's drawing (what labelme
itself uses) and hand-counted pixels; the CLI once as a user runs it; errors name the json file."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
from demo_utils import ROOT
from PIL import Image, ImageDraw

from oars.errors import DataError
from segmentation.datasets import SegDataset
from segmentation.datasets.labelme import CLASS_NAMES_FILE, class_table, labelme_to_seg


def shape(label: str, points, kind: str = 'polygon', **extra) -> dict:
    return dict(label=label, points=[list(map(float, p)) for p in points], shape_type=kind, flags={}, **extra)


def write_json(folder, stem: str, shapes: list[dict], height: int = 12, width: int = 16, **extra) -> None:
    os.makedirs(folder, exist_ok=True)
    doc = dict(version='5.4.1', flags={}, shapes=shapes, imagePath=f'../images/{stem}.jpg', imageData=None,
               imageHeight=height, imageWidth=width, **extra)
    with open(os.path.join(folder, f'{stem}.json'), 'w') as f:
        json.dump(doc, f)


def read(path) -> np.ndarray:
    with Image.open(path) as im:
        assert im.mode == 'P'
        return np.array(im)


@pytest.mark.slow  # a subprocess that imports torch (5-8 s of CPU)
def test_cli_writes_label_maps_a_dataset_reads(tmp_path):
    """As a user runs it: relative paths, an --out folder that exists (with a file of its own), default classes
    (the sorted names found); then SegDataset pairs the label maps with the images."""
    write_json(tmp_path / 'ann', 'a', [shape('dog', [(1, 2), (4, 5)], 'rectangle'),
                                       shape('cat', [(3, 3), (9, 3), (9, 9), (3, 9)])])
    write_json(tmp_path / 'ann', 'b', [shape('cat', [(0, 0), (2, 0), (0, 2)]),
                                       shape('cat', [(5, 5)], 'point')])
    (tmp_path / 'labels').mkdir()
    (tmp_path / 'labels' / 'README').write_text('mine')
    os.makedirs(tmp_path / 'images')
    for stem in 'ab':
        Image.new('RGB', (16, 12)).save(tmp_path / 'images' / f'{stem}.jpg')
    cmd = [sys.executable, os.path.join(ROOT, 'tools', 'convert.py'), 'labelme2seg', '--input', 'ann', '--out',
           'labels']
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'wrote 2 label maps and class_names.txt to labels: 3 shapes, 3 classes' in proc.stdout
    assert 'classes: ["background", "cat", "dog"]' in proc.stdout
    assert 'left out 1 shape(s) without area' in proc.stderr and 'point: 1' in proc.stderr
    assert (tmp_path / 'labels' / CLASS_NAMES_FILE).read_text() == 'background\ncat\ndog\n'
    assert (tmp_path / 'labels' / 'README').read_text() == 'mine'
    a = read(tmp_path / 'labels' / 'a.png')
    expected = np.zeros((12, 16), np.uint8)
    expected[2:6, 1:5] = 2  # the rectangle: columns 1..4, rows 2..5, edges included
    expected[3:10, 3:10] = 1  # the cat polygon, drawn later, over it
    assert np.array_equal(a, expected)
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', classes=['background', 'cat', 'dog'],
                    pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'),
                              dict(type='PackSegInputs')])
    assert len(ds) == 2 and np.array_equal(ds[0]['data_samples'].gt_sem_seg.data[0].numpy(), expected)


def test_shapes_match_pil_drawing_and_ignore_background_mask(tmp_path):
    """Polygons and circles as labelme draws them with PIL (its pixel i spans [i, i + 1)); ``__ignore__`` paints
    255, a background label paints 0 over earlier shapes; a ``mask`` shape is placed at its first point."""
    star = [(8, 1), (10, 7), (15, 7), (11, 10), (13, 15), (8, 12), (3, 15), (5, 10), (1, 7), (6, 7)]
    patch = np.zeros((3, 4), np.uint8)
    patch[0, :] = 255
    patch[:, 0] = 255
    buf = io.BytesIO()
    Image.fromarray(patch).save(buf, format='PNG')
    shapes = [shape('star', star), shape('ring', [(20, 8), (24, 8)], 'circle'),
              shape('_background_', [(19, 7), (21, 9)], 'rectangle'),
              shape('__ignore__', [(0, 0), (1, 0), (1, 1), (0, 1)]),
              shape('blob', [(26, 14), (29, 16)], 'mask', mask=base64.b64encode(buf.getvalue()).decode())]
    write_json(tmp_path / 'ann', 'x', shapes, height=18, width=30)
    box = [(0.6, 0.6), (3.4, 0.6), (3.4, 3.4), (0.6, 3.4)]  # a polygon between whole pixels
    write_json(tmp_path / 'ann', 'y', [shape('star', box), shape('ring', [(4.4, 1.6), (5.6, 4.4)], 'rectangle')],
               height=6, width=7)
    result = labelme_to_seg(str(tmp_path / 'ann'), str(tmp_path / 'out'), classes=['star', 'ring', 'blob'])
    assert result['classes'] == ['background', 'star', 'ring', 'blob']
    got = read(tmp_path / 'out' / 'x.png')

    ref = Image.new('L', (30, 18), 0)
    ImageDraw.Draw(ref).polygon(star, fill=1)
    ref = np.array(ref)
    yy, xx = np.mgrid[:18, :30] + 0.5  # pixel centres in labelme's coordinates
    # the disk and the pixels its rim passes through, as for polygons (labelme's PIL ellipse sits half a pixel
    # lower right: PIL takes coordinates as pixel centres there)
    ref[np.hypot(xx - 20, yy - 8) <= 4.5] = 2
    ref[7:10, 19:22] = 0
    # OpenCV, PIL and the exact disk may disagree only on pixels whose centre lies near the outline (PIL rounds the
    # vertices to whole pixels first)
    contour = np.array(star, np.float32)
    for value, near_edge in ((1, lambda x, y: abs(cv2.pointPolygonTest(contour, (x + 0.5, y + 0.5), True)) <= 1.5),
                             (2, lambda x, y: abs(np.hypot(x + 0.5 - 20, y + 0.5 - 8) - 4.5) <= 1)):
        differ = np.argwhere((got == value) != (ref == value))
        assert len(differ) <= 6 and all(near_edge(x, y) for y, x in differ), (value, differ)
        assert abs(int((got == value).sum()) - int((ref == value).sum())) <= 4
    assert (got[7:10, 19:22] == 0).all()  # the background rectangle, drawn later, over the circle
    assert np.array_equal(got[14:17, 26:30], np.where(patch > 0, 3, 0))
    assert got[0, 0] == 255 and got[8, 20] == 0 and got[8, 23] == 2
    ref = Image.new('L', (7, 6), 0)
    ImageDraw.Draw(ref).polygon(box, fill=1)
    ImageDraw.Draw(ref).polygon([(4.4, 1.6), (5.6, 1.6), (5.6, 4.4), (4.4, 4.4)], fill=2)
    expected = np.zeros((6, 7), np.uint8)
    expected[0:4, 0:4] = 1  # columns and rows 0..3: the pixels [0, 1) .. [3, 4) the box reaches into
    expected[1:5, 4:6] = 2
    assert np.array_equal(np.array(ref), expected)  # what labelme's own PIL drawing gives
    assert np.array_equal(read(tmp_path / 'out' / 'y.png'), expected)


def test_class_order_labels_txt_and_count_limit():
    assert class_table(['__ignore__', '_background_', 'cat', 'dog'], [], 'x') == ['_background_', 'cat', 'dog']
    assert class_table(None, ['dog', 'cat', '__ignore__', 'dog', 'background'], 'x') == ['background', 'cat', 'dog']
    with pytest.raises(DataError, match='duplicate class names'):
        class_table(['a', 'a'], [], 'x')
    with pytest.raises(DataError, match=r"\['background'\] can only come first"):
        class_table(['a', 'background'], [], 'x')
    with pytest.raises(DataError, match='no shape labels found in x'):
        class_table(None, ['__ignore__'], 'x')
    with pytest.raises(DataError, match='holds ids 0..254'):
        class_table([f'c{i}' for i in range(255)], [], 'x')


@pytest.mark.parametrize('doc,pattern', [
    (dict(imageWidth=8, shapes=[]), r"b\.json: no 'imageHeight'"),
    (dict(imageHeight=0, imageWidth=8, shapes=[]), r"b\.json: 'imageHeight' is 0; expected a positive"),
    (dict(imageHeight=8, imageWidth=8, shapes=[shape('cat', [(0, 0), (3, 3)])]),
     r"b\.json: shape 0 \('cat', polygon\): points .*expected at least 3 \[x, y\] pairs"),
    (dict(imageHeight=8, imageWidth=8, shapes=[shape('cat', [(0, 0), (3, 3)], 'cuboid')]),
     r"b\.json: shape 0: shape_type 'cuboid' is not one of"),
    (dict(imageHeight=8, imageWidth=8, shapes=[shape('cat', [(0, 0), (3, 3), (0, 3)]), shape('cow', [(0, 0)] * 3)]),
     r"b\.json: shape 1 has label 'cow', which is not in --classes \['cat'\]"),
])
def test_bad_file_names_the_json_and_writes_nothing(tmp_path, doc, pattern):
    write_json(tmp_path / 'ann', 'a', [shape('cat', [(0, 0), (3, 0), (0, 3)])])
    with open(tmp_path / 'ann' / 'b.json', 'w') as f:
        json.dump(doc, f)
    with pytest.raises(DataError, match=pattern):
        labelme_to_seg(str(tmp_path / 'ann'), str(tmp_path / 'out'), classes=['cat'])
    assert not (tmp_path / 'out').exists()  # a.json was fine, but nothing is written before every file is read


def test_existing_outputs_are_kept_unless_overwrite(tmp_path):
    """Through tools/convert.py's main (in-process): the message names the files and the flag."""
    spec = importlib.util.spec_from_file_location('convert_tool', os.path.join(ROOT, 'tools', 'convert.py'))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    write_json(tmp_path / 'ann', 'a', [shape('cat', [(0, 0), (3, 0), (0, 3)])])
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'a.png').write_bytes(b'precious')
    argv = ['convert.py', 'labelme2seg', '--input', str(tmp_path / 'ann'), '--out', str(out)]
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(sys, 'argv', argv)
        with pytest.raises(DataError, match=r'1 output file\(s\) exist already: .*a\.png; nothing was written '
                                            r'\(pass --overwrite'):
            tool.main()
        assert (out / 'a.png').read_bytes() == b'precious' and not (out / CLASS_NAMES_FILE).exists()
        m.setattr(sys, 'argv', [*argv, '--overwrite'])
        tool.main()
    assert read(out / 'a.png')[1, 1] == 1 and (out / CLASS_NAMES_FILE).read_text() == 'background\ncat\n'
    assert not [n for n in os.listdir(out) if n.startswith('.')]  # no temporary files left behind
    # the label map of an image stored beside its json, written into that folder, would replace the image
    Image.new('RGB', (16, 12)).save(tmp_path / 'ann' / 'c.png')
    write_json(tmp_path / 'ann', 'c', [shape('cat', [(0, 0), (3, 0), (0, 3)])])
    with open(tmp_path / 'ann' / 'c.json') as f:
        doc = json.load(f)
    doc['imagePath'] = 'c.png'
    with open(tmp_path / 'ann' / 'c.json', 'w') as f:
        json.dump(doc, f)
    with pytest.raises(DataError, match=r'c\.json would be written over its image .*c\.png'):
        labelme_to_seg(str(tmp_path / 'ann'), str(tmp_path / 'ann'), overwrite=True)
