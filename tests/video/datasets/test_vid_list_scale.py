"""Video lists at scale: the loader's cost does not grow with metainfo copies per line, paths are what
``storage.absolute(storage.join(prefix, path))`` gives, and the records are one serialised array workers share."""

from __future__ import annotations

import os

import numpy as np
from mmengine.dataset import base_dataset

from oars.data import storage
from video.datasets import VideoDataset


def _write_list(path, lines: int) -> None:
    with open(path, 'w') as f:
        for i in range(lines):
            f.write(f'class{i % 3}/../class{i % 3}/v_{i:05d}.mp4 {i % 3}\n')


def test_a_long_list_copies_the_metainfo_a_fixed_number_of_times(tmp_path, monkeypatch):
    calls = []
    real = base_dataset.copy.deepcopy

    def counting(obj, *args, **kwargs):
        calls.append(type(obj).__name__)
        return real(obj, *args, **kwargs)

    counts = {}
    for lines in (20, 2000):
        ann = tmp_path / f'list{lines}.txt'
        _write_list(ann, lines)
        calls.clear()
        monkeypatch.setattr(base_dataset.copy, 'deepcopy', counting)
        ds = VideoDataset(ann_file=str(ann), classes=['a', 'b', 'c'])
        monkeypatch.setattr(base_dataset.copy, 'deepcopy', real)
        assert len(ds) == lines
        counts[lines] = len(calls)
    # mmengine's ``metainfo`` property deep-copies classes and palette: once per line was minutes for 650k lines
    assert counts[2000] == counts[20], counts


def test_list_paths_and_shared_records(tmp_path, monkeypatch):
    ann = tmp_path / 'list.txt'
    _write_list(ann, 30)
    monkeypatch.chdir(tmp_path)
    ds = VideoDataset(ann_file='list.txt', data_prefix={'video': 'videos/./sub'}, classes=['a', 'b', 'c'])
    expected = [storage.absolute(storage.join('videos/./sub', f'class{i % 3}/../class{i % 3}/v_{i:05d}.mp4'))
                for i in range(30)]
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [d['filename'] for d in infos] == expected
    assert all(os.path.isabs(p) and '..' not in p and '/./' not in p for p in expected)
    assert [d['label'] for d in infos] == [i % 3 for i in range(30)]
    assert {d['num_classes'] for d in infos} == {3} and not infos[0]['multi_label']
    # one uint8 array + ends (mmengine's layout): what forked workers share without copying
    assert isinstance(ds.data_bytes, np.ndarray) and ds.data_bytes.dtype == np.uint8
    assert ds.data_address.shape == (30,) and ds.data_list == []
