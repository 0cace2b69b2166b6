"""tools/check_data.py: every sample of every split read once in workers, every bad file reported at once."""

from __future__ import annotations

import json
import os
import shutil

import cv2
import numpy as np
import pytest
from damaged_files import truncate_file
from demo_utils import DEMO_CFG, DET_DEMO_CFG, run_tool

from oars.config import load_config
from oars.data.check import check_config, format_reports


def copy_demo(demo_data: str, tmp_path) -> str:
    root = str(tmp_path / 'demo')
    shutil.copytree(demo_data, root)
    return root


def roots(root: str) -> list[str]:
    return [f'{s}_dataloader.dataset.data_root={root}' for s in ('train', 'val', 'test')]


@pytest.mark.slow  # a subprocess: ~8 s alone, 25 s on a shared machine
def test_check_data_lists_every_bad_file_and_fails(demo_data, tmp_path):
    root = copy_demo(demo_data, tmp_path)
    bad_label = os.path.join(root, 'labels', 'train', '0003.png')
    bad_image = os.path.join(root, 'images', 'val', '0001.png')
    with open(bad_label, 'wb') as f:
        f.write(b'not a png')
    with open(bad_image, 'wb') as f:
        f.write(b'not a png either')
    small = os.path.join(root, 'labels', 'train', '0005.png')
    cv2.imwrite(small, np.zeros((64, 64), np.uint8))  # a label map of another size than its 128x128 image
    proc = run_tool('check_data.py', '-c', DEMO_CFG, '--workers', '2', '-o', *roots(root), check=False)
    out = proc.stdout
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stderr
    assert 'could not read label map' in out and bad_label in out
    assert f'could not read image (unsupported or corrupt file): {bad_image}' in out
    assert f'label map {small} is 64x64 (WxH)' in out
    assert 'train (SegDataset): 16 sample(s) read, 2 bad' in out
    assert 'val (SegDataset): 8 sample(s) read, 1 bad' in out and 'test: same dataset as val' in out
    assert 'error: 3 bad sample(s)' in proc.stderr
    assert 'sample/s' in proc.stderr  # the progress bar


def test_check_config_passes_a_clean_set(demo_data):
    reports = check_config(load_config(DEMO_CFG, roots(demo_data)), ['val'], num_workers=1)
    assert format_reports(reports) == 'val (SegDataset): 8 sample(s) read, 0 bad'


def test_check_config_detection_reports_size_mismatch_and_a_broken_split(demo_data, tmp_path):
    root = copy_demo(demo_data, tmp_path)
    ann_file = os.path.join(root, 'annotations', 'instances_train.json')
    with open(ann_file) as f:
        coco = json.load(f)
    wrong = coco['images'][2]
    wrong['width'] = 200  # the image is 128 wide
    with open(ann_file, 'w') as f:
        json.dump(coco, f)
    with open(os.path.join(root, 'annotations', 'instances_val.json'), 'w') as f:
        json.dump([], f)
    cfg = load_config(DET_DEMO_CFG, [*roots(root), 'train_dataloader.dataset.on_bad_sample=skip'])
    reports = check_config(cfg, num_workers=2)
    text = format_reports(reports)
    train, val, test = reports
    assert train.num_samples == len(coco['images']) and len(train.failures) == 1  # skip does not hide it here
    files, reason = train.failures[0]
    assert files.endswith(wrong['file_name']) and 'is 128x128 (WxH) but its annotation says width 200' in reason
    assert len(val.failures) == 1 and 'holds a JSON list' in val.failures[0][1] and test.same_as == 'val'
    assert 'instances_val.json' in text


@pytest.mark.slow  # a subprocess: ~8 s alone, 25 s on a shared machine
def test_check_data_reports_missing_and_truncated_images_of_one_split_in_one_run(demo_data, tmp_path):
    """A detection split with two missing images and a truncated one: all three in one run, the split's other
    samples read, exit status 2 at the end (before, loading stopped at the first missing image)."""
    root = copy_demo(demo_data, tmp_path)
    missing = [os.path.join(root, 'images', 'val', name) for name in ('0001.png', '0004.png')]
    for path in missing:
        os.remove(path)
    truncated = os.path.join(root, 'images', 'val', '0002.png')
    truncate_file(truncated)
    proc = run_tool('check_data.py', '-c', DET_DEMO_CFG, '--split', 'val', '--workers', '1', '-o', *roots(root),
                    check=False)
    out = proc.stdout
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stdout + proc.stderr
    for path in missing:
        assert f'image file {path} not found; expected an existing file [missing image]' in out, out
    assert f'{truncated}: could not read image' in out, out
    assert 'val (CocoDataset): 6 sample(s) read, 3 bad' in out, out
    assert 'error: 3 bad sample(s)' in proc.stderr

    shutil.rmtree(root)  # the same split intact: nothing to report, exit status 0
    root = copy_demo(demo_data, tmp_path)
    proc = run_tool('check_data.py', '-c', DET_DEMO_CFG, '--split', 'val', '--workers', '1', '-o', *roots(root))
    assert 'val (CocoDataset): 8 sample(s) read, 0 bad' in proc.stdout


def test_check_config_lists_what_on_bad_annotation_skip_drops(demo_data, tmp_path):
    """A split that drops bad annotations on purpose (`on_bad_annotation: skip`) still has them listed here; the
    rest of its samples are read."""
    root = copy_demo(demo_data, tmp_path)
    missing = os.path.join(root, 'images', 'val', '0003.png')
    os.remove(missing)
    cfg = load_config(DET_DEMO_CFG, [*roots(root), 'val_dataloader.dataset.on_bad_annotation=skip'])
    (val,) = check_config(cfg, ['val'], num_workers=0)
    assert val.num_samples == 7 and len(val.failures) == 1
    assert f'image file {missing} not found' in val.failures[0][1]


def test_check_config_names_every_problem_beyond_the_first_five(demo_data, tmp_path):
    """Seven missing images of one annotation file: each is named (a training log keeps the first five and counts
    the rest; check_data names them all)."""
    root = copy_demo(demo_data, tmp_path)
    missing = [os.path.join(root, 'images', 'val', f'{i:04d}.png') for i in range(7)]
    for path in missing:
        os.remove(path)
    cfg = load_config(DET_DEMO_CFG, roots(root))
    (val,) = check_config(cfg, ['val'], num_workers=0)
    text = '\n'.join(reason for _, reason in val.failures)
    for path in missing:
        assert f'image file {path} not found' in text, text
