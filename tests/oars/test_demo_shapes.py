"""Demo shapes generator: determinism, label format, COCO consistency, caching and the CLI."""

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image
from pycocotools.coco import COCO

from oars.data import demo_shapes
from oars.data.demo_shapes import CLASSES, PALETTE, generate, main

SMALL = dict(num_train=6, num_val=3, size=64)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob('*')) if p.is_file()}


def _load_coco(path: str) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(path)


def test_layout_counts_and_result(tmp_path):
    res = generate(tmp_path / 'ds', **SMALL)
    root = tmp_path / 'ds'
    assert res['skipped'] is False
    assert res['num_images'] == {'train': 6, 'val': 3}
    for split, n in (('train', 6), ('val', 3)):
        names = sorted(p.name for p in (root / 'images' / split).iterdir())
        assert names == [f'{i:04d}.png' for i in range(n)]
        assert sorted(p.name for p in (root / 'labels' / split).iterdir()) == names
        coco = json.loads(Path(res['annotations'][split]).read_text())
        assert len(coco['images']) == n
        assert len(coco['annotations']) == res['num_annotations'][split] > 0
        img = cv2.imread(str(root / 'images' / split / names[0]), cv2.IMREAD_UNCHANGED)
        assert img.shape == (64, 64, 3) and img.dtype == np.uint8
    meta = json.loads((root / 'meta.json').read_text())
    assert meta['params'] == {'num_train': 6, 'num_val': 3, 'size': 64, 'seed': 0} and meta['complete']


def test_same_seed_identical_bytes_other_seed_differs(tmp_path):
    generate(tmp_path / 'a', **SMALL, seed=3)
    generate(tmp_path / 'b', **SMALL, seed=3)
    generate(tmp_path / 'c', **SMALL, seed=4)
    a, b, c = (_files(tmp_path / d) for d in 'abc')
    assert a == b
    assert a.keys() == c.keys()
    differing = [k for k in a if k.startswith('images/') and a[k] != c[k]]
    assert len(differing) == 9  # every image changes with the seed
    # an image does not depend on how many others were generated
    generate(tmp_path / 'd', num_train=2, num_val=1, size=64, seed=3)
    d = _files(tmp_path / 'd')
    assert d['images/train/0001.png'] == a['images/train/0001.png']
    assert d['labels/val/0000.png'] == a['labels/val/0000.png']
    assert a['images/train/0000.png'] != a['images/val/0000.png']


def test_labels_are_palette_pngs_with_class_ids(tmp_path):
    res = generate(tmp_path / 'ds', **SMALL)
    seen = set()
    for split in ('train', 'val'):
        for path in sorted(Path(res['labels'][split]).glob('*.png')):
            with Image.open(path) as im:
                assert im.mode == 'P'
                assert im.getpalette()[:12] == [v for rgb in PALETTE for v in rgb]
                arr = np.array(im)
            assert arr.shape == (64, 64) and arr.dtype == np.uint8
            assert set(np.unique(arr).tolist()) <= {0, 1, 2, 3}
            seen |= set(np.unique(arr).tolist())
    assert seen == {0, 1, 2, 3}


def test_coco_annotations_match_masks_and_labels(tmp_path):
    res = generate(tmp_path / 'ds', num_train=24, num_val=0, size=64, seed=1)
    coco = _load_coco(res['annotations']['train'])
    assert [(c['id'], c['name']) for c in coco.loadCats(coco.getCatIds())] == list(enumerate(CLASSES))[1:]
    assert len(coco.getImgIds()) == 24
    covered = total = 0
    for img_id in coco.getImgIds():
        info = coco.imgs[img_id]
        label = np.array(Image.open(Path(res['labels']['train']) / info['file_name']))
        union = np.zeros((4, 64, 64), dtype=bool)
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=img_id)):
            assert ann['iscrowd'] == 0 and ann['area'] >= demo_shapes.MIN_VISIBLE_AREA
            assert ann['segmentation'] and all(len(p) >= 6 and len(p) % 2 == 0 for p in ann['segmentation'])
            m = coco.annToMask(ann).astype(bool)
            ys, xs = np.nonzero(m)
            mask_box = [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
            assert np.abs(np.array(mask_box) - np.array(ann['bbox'])).max() <= 1, (ann['bbox'], mask_box)
            # the visible pixels of this instance carry its class in the label map
            assert (label[m] == ann['category_id']).sum() >= 0.9 * ann['area']
            union[ann['category_id']] |= m
        for cls in (1, 2, 3):
            covered += int((union[cls] & (label == cls)).sum())
            total += int((label == cls).sum())
    assert total > 0 and covered / total > 0.98  # only slivers under MIN_VISIBLE_AREA lack an annotation


def test_shapes_contrast_with_their_surroundings(tmp_path):
    """Learnability: most instances differ clearly in colour from the ring of background around them."""
    res = generate(tmp_path / 'ds', num_train=30, num_val=0, size=64, seed=2)
    coco = _load_coco(res['annotations']['train'])
    dists = []
    for ann in coco.dataset['annotations']:
        info = coco.imgs[ann['image_id']]
        img = cv2.imread(str(Path(res['images']['train']) / info['file_name'])).astype(np.float32)
        label = np.array(Image.open(Path(res['labels']['train']) / info['file_name']))
        m = coco.annToMask(ann).astype(np.uint8)
        ring = (cv2.dilate(m, np.ones((7, 7), np.uint8)) > 0) & (m == 0) & (label == 0)
        inside = (m > 0) & (label == ann['category_id'])
        if ring.sum() >= 10 and inside.sum() >= 10:
            dists.append(np.linalg.norm(img[inside].mean(0) - img[ring].mean(0)))
    assert len(dists) > 30
    assert np.mean(np.array(dists) > 40) > 0.8


def test_skip_if_exists_overwrite_and_param_change(tmp_path):
    root = tmp_path / 'ds'
    generate(root, **SMALL)
    probe = root / 'images' / 'train' / '0000.png'
    probe.write_bytes(b'marker')  # survives only if the set is reused
    res = generate(root, **SMALL)
    assert res['skipped'] is True and probe.read_bytes() == b'marker'
    assert res['num_annotations'] == json.loads((root / 'meta.json').read_text())['num_annotations']

    res = generate(root, **SMALL, overwrite=True)
    assert res['skipped'] is False and probe.read_bytes() != b'marker'

    res = generate(root, num_train=2, num_val=1, size=64)  # other parameters: replaced, stale files gone
    assert res['skipped'] is False
    assert sorted(p.name for p in (root / 'images' / 'train').iterdir()) == ['0000.png', '0001.png']
    assert len(json.loads((root / 'annotations' / 'instances_train.json').read_text())['images']) == 2

    (root / 'labels' / 'val' / '0000.png').unlink()  # incomplete set: regenerated
    res = generate(root, num_train=2, num_val=1, size=64)
    assert res['skipped'] is False and (root / 'labels' / 'val' / '0000.png').is_file()


def test_foreign_directory_is_refused_unless_overwrite(tmp_path):
    root = tmp_path / 'mine'
    root.mkdir()
    (root / 'notes.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match='meta.json'):
        generate(root, **SMALL)
    generate(root, **SMALL, overwrite=True)
    assert (root / 'notes.txt').read_text() == 'keep me'
    assert (root / 'meta.json').is_file()


@pytest.mark.parametrize('kwargs, word', [
    (dict(num_train=-1), 'num_train'), (dict(num_val=1.5), 'num_val'), (dict(size=16), 'size'),
    (dict(seed=-3), 'seed'), (dict(num_train=0, num_val=0), 'nothing'), (dict(object_scale=0), 'object_scale'),
    (dict(object_scale=True), 'object_scale'), (dict(max_objects=0), 'max_objects'),
])
def test_bad_arguments(tmp_path, kwargs, word):
    with pytest.raises(ValueError, match=word):
        generate(tmp_path / 'ds', **kwargs)


def test_object_scale_and_max_objects(tmp_path):
    """Larger, fewer shapes (benchmarks/large_objects.py's photo-like set): the boxes grow with the scale, the count
    per image is capped, and only non-default values enter meta.json (older sets stay reusable)."""
    def boxes(root):
        coco = json.loads((root / 'annotations' / 'instances_train.json').read_text())
        per_image = np.bincount([a['image_id'] for a in coco['annotations']])
        return np.array([max(a['bbox'][2:]) for a in coco['annotations']]), per_image.max()

    small, _ = boxes(Path(generate(tmp_path / 'small', num_train=20, num_val=0, size=64)['out_dir']))
    res = generate(tmp_path / 'large', num_train=20, num_val=0, size=64, object_scale=2.0, max_objects=2)
    large, most = boxes(Path(res['out_dir']))
    assert np.median(large) > 1.6 * np.median(small) and most <= 2
    assert json.loads((tmp_path / 'large' / 'meta.json').read_text())['params']['max_objects'] == 2
    assert 'object_scale' not in json.loads((tmp_path / 'small' / 'meta.json').read_text())['params']


def test_cli_main_and_module(tmp_path, capsys):
    out = tmp_path / 'cli'
    assert main(['--out', str(out), '--num-train', '2', '--num-val', '1', '--size', '48', '--seed', '5']) == 0
    text = capsys.readouterr().out
    assert 'wrote' in text and 'train: 2 images' in text and 'val: 1 image' in text
    proc = subprocess.run(
        [sys.executable, '-m', 'oars.data.demo_shapes', '--out', str(out), '--num-train', '2', '--num-val', '1',
         '--size', '48', '--seed', '5'], capture_output=True, text=True, timeout=60,
        cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    assert 'already holds this set' in proc.stdout
    with pytest.raises(SystemExit):
        main(['--out', str(out), '--size', '8'])
    assert 'size must be an integer >= 32' in capsys.readouterr().err
