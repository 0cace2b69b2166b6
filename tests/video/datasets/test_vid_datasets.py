"""Video, frame-folder and feature lists: samples as the pipeline contract says, class names from a file or a list,
label errors naming the list file and line."""

from __future__ import annotations

import os

import pytest

from oars.errors import DataError, DataFileNotFoundError
from video.datasets import FeatureDataset, RawframeDataset, VideoDataset
from video.registry import DATASETS

CLASSES = ['left', 'right', 'up', 'down']


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_video_dataset_samples_and_classes_file(tmp_path):
    _write(tmp_path / 'classes.txt', 'left\nright\n\nup\ndown\n')
    ann = _write(tmp_path / 'train.txt', 'videos/a.mp4 0\n# a comment\n\nvideos/sub/b.mp4 3\nvideos/c.mp4 up\n')
    ds = VideoDataset(ann_file='train.txt', data_root=str(tmp_path), classes='classes.txt')
    assert ds.metainfo['classes'] == tuple(CLASSES) and ds.num_classes == 4
    assert len(ds) == 3
    info = ds.get_data_info(1)
    assert info['filename'] == os.path.join(str(tmp_path), 'videos/sub/b.mp4') and os.path.isabs(info['filename'])
    assert (info['label'], info['multi_label'], info['num_classes'], info['start_index'], info['modality']) == \
        (3, False, 4, 0, 'RGB')
    assert ds.get_data_info(2)['label'] == 2  # a class name is accepted as a label
    assert ann == ds.ann_file
    # data_prefix puts the list's paths under a folder; built from the registry as a config does
    ds = DATASETS.build(dict(type='VideoDataset', ann_file=ann, data_root=str(tmp_path),
                             data_prefix={'video': 'clips'}, classes=CLASSES))
    assert ds.get_data_info(0)['filename'] == os.path.join(str(tmp_path), 'clips', 'videos/a.mp4')


def test_multi_label_lines(tmp_path):
    ann = _write(tmp_path / 'ml.txt', 'a.mp4 0 2\nb.mp4 3\nc.mp4 2 0 2\n')
    ds = VideoDataset(ann_file=ann, classes=CLASSES, multi_label=True)
    assert [ds.get_data_info(i)['label'] for i in range(3)] == [[0, 2], [3], [0, 2]]
    assert ds.get_data_info(0)['multi_label'] is True and ds.metainfo['multi_label'] is True
    with pytest.raises(DataError, match=r'ml.txt line 1: 2 labels .* single-label line; set multi_label: true'):
        VideoDataset(ann_file=ann, classes=CLASSES)


@pytest.mark.parametrize('text, match', [
    ('a.mp4 0\nb.mp4 4\n', r'bad.txt line 2: label 4 is outside the 4 classes \(0..3'),
    ('a.mp4 0\n\nb.mp4 -1\n', r'bad.txt line 3: label -1 is outside the 4 classes'),
    ('a.mp4 sideways\n', r"bad.txt line 1: label 'sideways' is neither a class id nor one of the 4 classes"),
    ('a.mp4\n', r'bad.txt line 1: expected 2 fields'),
    ('', r'bad.txt lists no samples'),
])
def test_label_errors_name_the_list_file_and_line(tmp_path, text, match):
    ann = _write(tmp_path / 'bad.txt', text)
    with pytest.raises(DataError, match=match):
        VideoDataset(ann_file=ann, classes=CLASSES)


def test_classes_errors(tmp_path):
    ann = _write(tmp_path / 'a.txt', 'a.mp4 0\n')
    with pytest.raises(DataFileNotFoundError, match='classes file not found: nofile.txt'):
        VideoDataset(ann_file=ann, classes='nofile.txt')
    with pytest.raises(DataError, match="'classes' is required"):
        VideoDataset(ann_file=ann)
    with pytest.raises(DataError, match='lists no class names'):
        VideoDataset(ann_file=ann, classes=_write(tmp_path / 'empty.txt', '\n'))
    with pytest.raises(DataFileNotFoundError, match='annotation list not found'):
        VideoDataset(ann_file=str(tmp_path / 'none.txt'), classes=CLASSES)
    with pytest.raises(DataError, match=r"on_bad_video \('skip'\) and on_bad_sample \('error'\) are the same"):
        VideoDataset(ann_file=ann, classes=CLASSES, on_bad_video='skip', on_bad_sample='error')
    with pytest.raises(DataError, match='on_bad_video: skip is for training datasets'):  # the key the user wrote
        VideoDataset(ann_file=ann, classes=CLASSES, on_bad_video='skip', test_mode=True)
    assert VideoDataset(ann_file=ann, classes=CLASSES, on_bad_video='skip').on_bad_sample == 'skip'


def test_rawframe_dataset_samples_and_errors(tmp_path):
    ann = _write(tmp_path / 'frames.txt', 'rawframes/v1 120 1\nrawframes/v2 7 0 3\n')
    ds = RawframeDataset(ann_file=ann, classes=CLASSES, multi_label=True, data_prefix={'img': str(tmp_path)},
                         filename_tmpl='{:06d}.jpg', start_index=0)
    info = ds.get_data_info(0)
    assert info['frame_dir'] == os.path.join(str(tmp_path), 'rawframes/v1')
    assert (info['total_frames'], info['filename_tmpl'], info['start_index'], info['label']) == \
        (120, '{:06d}.jpg', 0, [1])
    assert ds.get_data_info(1)['label'] == [0, 3]
    assert RawframeDataset(ann_file=_write(tmp_path / 'one.txt', 'v 3 2\n'), classes=CLASSES)[0]['start_index'] == 1
    with pytest.raises(DataError, match=r"bad.txt line 2: total_frames must be a positive integer, got 'x'"):
        RawframeDataset(ann_file=_write(tmp_path / 'bad.txt', 'v1 3 0\nv2 x 1\n'), classes=CLASSES)
    with pytest.raises(DataError, match=r'bad2.txt line 1: label 9 is outside'):
        RawframeDataset(ann_file=_write(tmp_path / 'bad2.txt', 'v1 3 9\n'), classes=CLASSES)
    with pytest.raises(DataError, match='filename_tmpl must be a str.format template'):
        RawframeDataset(ann_file=ann, classes=CLASSES, filename_tmpl='img_{name}.jpg')
    with pytest.raises(DataError, match='start_index .* must be an integer >= 0'):
        RawframeDataset(ann_file=ann, classes=CLASSES, start_index=-1)


def test_feature_dataset_samples(tmp_path):
    ann = _write(tmp_path / 'f.txt', 'features/a.npz 1 2\nfeatures/b.pkl 0\n')
    ds = FeatureDataset(ann_file='f.txt', data_root=str(tmp_path), classes=CLASSES, multi_label=True)
    assert ds.get_data_info(0)['filename'] == os.path.join(str(tmp_path), 'features/a.npz')
    assert [ds.get_data_info(i)['label'] for i in range(2)] == [[1, 2], [0]]
    assert ds.get_data_info(1)['num_classes'] == 4 and ann == ds.ann_file
