"""benchmarks/data_scale.py runs at a tiny size as a user calls it (a subprocess from the repository root) and writes
its table and json; a bad size is refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.common import ROOT


@pytest.mark.slow  # ~2 min: each load runs in a fresh interpreter that imports torch
def test_data_scale_runs_at_a_tiny_size_and_writes_its_json(tmp_path):
    out = tmp_path / 'scale.json'
    res = subprocess.run([sys.executable, 'benchmarks/data_scale.py', '--boxes', '200', '400', '--eval-images', '4',
                          '--seg-maps', '3', '--video-list', '50', '--activitynet', '10', '--json', str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    for text in ('| 200 |', '| 400 |', 'fitted exponent of time vs boxes', 'COCO evaluation, 4 images x 100 detections',
                 'mIoU: 3 label maps', 'video list, 50 lines', 'ActivityNet json, 10 videos'):
        assert text in res.stdout, (text, res.stdout)
    result = json.loads(out.read_text())
    assert [r['boxes'] for r in result['coco']] == [200, 400]
    row = result['coco'][0]
    assert row['oars_s'] > 0 and row['pycocotools_s'] > 0 and len(row['worker_uss_mb']) == 4
    assert result['seg']['matrices_kept'] <= 1  # the metric sums matrices, it keeps no label map
    assert result['eval']['detections'] == 400


def test_data_scale_refuses_a_size_that_is_not_positive():
    res = subprocess.run([sys.executable, 'benchmarks/data_scale.py', '--boxes', '0'], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and '--boxes must be positive numbers of boxes, got [0]' in res.stderr
    assert 'Traceback' not in res.stderr
