"""The CGAN demo set: layout for ImageFolderGANDataset, reproducible bytes, reuse and refusal of foreign folders."""

from __future__ import annotations

import json

import cv2
import pytest

from gan.datasets import ImageFolderGANDataset
from gan.demo_data import CLASSES, generate, main


def test_layout_loads_reproduces_reuses_and_refuses(tmp_path, capsys):
    root = tmp_path / 'demo'
    res = generate(root, num_per_class_train=3, num_per_class_val=1, seed=2)
    assert res['skipped'] is False and res['num_images'] == {'train': 30, 'val': 10}
    ds = ImageFolderGANDataset(data_root=str(root), img_dir='train',
                               pipeline=[dict(type='LoadGANImageFromFile'), dict(type='PackGANInputs',
                                                                                 keys=['img', 'label'])])
    assert ds.metainfo['classes'] == CLASSES and len(ds) == 30
    out = ds[7]
    assert out['inputs']['img'].shape == (3, 32, 32) and int(out['inputs']['label']) == 2
    img = cv2.imread(str(root / 'train' / '5' / '0001.png'))
    assert img.shape == (32, 32, 3) and img.std() > 15  # a glyph on a background, not a flat square
    other = generate(tmp_path / 'other', num_per_class_train=3, num_per_class_val=1, seed=2)
    same = generate(tmp_path / 'other2', num_per_class_train=3, num_per_class_val=1, seed=3)
    rel = 'train/5/0001.png'
    assert (root / rel).read_bytes() == (tmp_path / 'other' / rel).read_bytes()
    assert (root / rel).read_bytes() != (tmp_path / 'other2' / rel).read_bytes()
    assert other['classes'] == same['classes'] == list(CLASSES)

    probe = root / 'val' / '0' / '0000.png'
    probe.write_bytes(b'marker')
    assert generate(root, num_per_class_train=3, num_per_class_val=1, seed=2)['skipped']
    assert probe.read_bytes() == b'marker'
    res = generate(root, num_per_class_train=2, num_per_class_val=1, seed=2)  # other parameters: replaced
    assert not res['skipped'] and sorted(p.name for p in (root / 'train' / '0').iterdir()) == ['0000.png', '0001.png']
    assert json.loads((root / 'meta.json').read_text())['complete'] is True
    (root / 'train' / '9' / '0001.png').unlink()  # incomplete: regenerated
    assert not generate(root, num_per_class_train=2, num_per_class_val=1, seed=2)['skipped']

    foreign = tmp_path / 'foreign'
    foreign.mkdir()
    (foreign / 'keep.txt').write_text('mine')
    with pytest.raises(FileExistsError, match='not empty and has no meta.json'):
        generate(foreign, num_per_class_train=1, num_per_class_val=0)
    generate(foreign, num_per_class_train=1, num_per_class_val=0, overwrite=True)
    assert (foreign / 'keep.txt').read_text() == 'mine'
    with pytest.raises(ValueError, match='size must be an integer >= 16'):
        generate(tmp_path / 'x', size=8)

    assert main(['--out', str(root), '--num-per-class-train', '2', '--num-per-class-val', '1', '--seed', '2']) == 0
    assert 'already holds this set' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(['--out', str(tmp_path / 'y'), '--num-per-class-train', '0', '--num-per-class-val', '0'])
    assert 'nothing to generate' in capsys.readouterr().err
