"""The pix2pix demo's paired set: a deterministic rendering of the demo shapes' label maps (a function of the label
map alone, unchanged by a shift), the PairedImageDataset layout, reuse, and its errors."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from gan.datasets import PairedImageDataset
from gan.demo_pairs import CLASS_COLOURS, generate, main, render_photo
from oars.data.demo_shapes import generate as generate_shapes
from oars.data.transforms.loading import read_label_map


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = tmp_path_factory.mktemp('shapes')
    generate_shapes(root, num_train=3, num_val=2, size=64)
    return root


def test_render_is_a_function_of_the_label_map():
    label = np.zeros((48, 48), np.uint8)
    label[10:30, 12:34] = 2  # a square
    label[32:42, 30:40] = 1
    photo = render_photo(label)
    assert photo.shape == (48, 48, 3) and photo.dtype == np.uint8
    np.testing.assert_array_equal(photo, render_photo(label.copy().astype(np.int64)))
    # the class colour (BGR) at the centre of a region, brightened by the shading; background far from shapes as is
    assert np.abs(photo[20, 23].astype(int) - np.array(CLASS_COLOURS[2][::-1]) * 1.1).max() <= 2
    np.testing.assert_array_equal(photo[2, 2], np.array(CLASS_COLOURS[0][::-1], np.uint8))
    assert photo[10, 20].max() < photo[20, 23].max() * 0.5  # outline darker than the inside
    assert photo[31, 14:34].mean() < photo[2, 2].mean() - 20  # drop shadow below the square
    # shifting the label map shifts the photo (training crops see the same mapping everywhere)
    shifted = render_photo(np.roll(label, (2, 3), axis=(0, 1)))
    np.testing.assert_array_equal(shifted[2:44, 3:44], photo[:42, :41])
    # another class in the same place changes the colour, nothing else in the rule does
    other = label.copy()
    other[other == 2] = 3
    assert not np.array_equal(render_photo(other)[20, 23], photo[20, 23])


@pytest.mark.parametrize('label, match', [
    (np.zeros((8, 8, 3), np.uint8), r'\[H, W\] integer array'),
    (np.zeros((8, 8), np.float32), r'\[H, W\] integer array'),
    (np.full((8, 8), 255, np.uint8), r'class ids \[255\] have no colour'),
    (np.full((8, 8), 4, np.uint8), r'expected ids in \[0, 3\]'),
])
def test_render_rejects_bad_label_maps(label, match):
    with pytest.raises(ValueError, match=match):
        render_photo(label)


def test_paired_set_layout_reproduces_reuses_and_refuses(shapes, tmp_path, capsys):
    root = tmp_path / 'pairs'
    res = generate(shapes, root)
    assert res['skipped'] is False and res['num_pairs'] == {'train': 3, 'val': 2}
    src_label = shapes / 'labels' / 'val' / '0001.png'
    assert (root / 'labels' / 'val' / '0001.png').read_bytes() == src_label.read_bytes()
    photo = cv2.imread(str(root / 'images' / 'val' / '0001.png'))
    np.testing.assert_array_equal(photo, render_photo(read_label_map(str(src_label))))
    assert (generate(shapes, tmp_path / 'again')['out_dir'] and
            (tmp_path / 'again' / 'images' / 'train' / '0002.png').read_bytes()
            == (root / 'images' / 'train' / '0002.png').read_bytes())
    ds = PairedImageDataset(data_root=str(root), dir_A='labels/train', dir_B='images/train',
                            pipeline=[dict(type='LoadGANImageFromFile', keys=['img_A', 'img_B']),
                                      dict(type='PackGANInputs', keys=['img_A', 'img_B'])])
    assert len(ds) == 3 and ds[0]['inputs']['img_B'].shape == (3, 64, 64)

    probe = root / 'images' / 'train' / '0000.png'
    probe.write_bytes(b'marker')
    assert generate(shapes, root)['skipped'] and probe.read_bytes() == b'marker'
    assert not generate(shapes, root, overwrite=True)['skipped'] and probe.read_bytes() != b'marker'
    assert json.loads((root / 'meta.json').read_text())['complete'] is True
    (root / 'labels' / 'val' / '0000.png').unlink()  # incomplete: regenerated
    assert not generate(shapes, root)['skipped']

    foreign = tmp_path / 'foreign'
    foreign.mkdir()
    (foreign / 'keep.txt').write_text('mine')
    with pytest.raises(FileExistsError, match='not empty and has no meta.json'):
        generate(shapes, foreign)
    with pytest.raises(ValueError, match='is the source set itself'):
        generate(shapes, shapes)
    with pytest.raises(ValueError, match='holds no complete demo shapes set'):
        generate(tmp_path / 'missing', tmp_path / 'out')

    assert main(['--shapes', str(shapes), '--out', str(root)]) == 0
    assert 'already holds this set' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(['--shapes', str(tmp_path / 'missing'), '--out', str(tmp_path / 'y')])
    assert 'python -m oars.data.demo_shapes --out' in capsys.readouterr().err


def test_label_map_with_an_unknown_class_names_the_file(shapes, tmp_path):
    import shutil

    from oars_deploy.draw import save_label_png

    bad = tmp_path / 'bad_shapes'
    shutil.copytree(shapes, bad)
    save_label_png(np.full((64, 64), 7, np.uint8), [(0, 0, 0)] * 8, bad / 'labels' / 'train' / '0001.png')
    with pytest.raises(ValueError, match=r'0001\.png: render_photo: class ids \[7\] have no colour'):
        generate(bad, tmp_path / 'out')
