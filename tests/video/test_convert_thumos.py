"""tools/convert.py thumos2activitynet: a hand-made THUMOS14 annotation folder (3 classes, an Ambiguous file, a test
subset) -> the ActivityNet v1.3 JSON, which ActivityNetFeatureDataset reads with the expected segments and labels;
durations from tools/extract_features.py's videos.json or probed from video files; each bad line is one error naming
the file and line; the output rules (--overwrite, never over an input)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from demo_utils import load_tool

from oars.errors import DataError
from oars_deploy.output_paths import OutputPathError
from video.converters_thumos import convert_thumos, index_durations, probe_durations
from video.datasets import ActivityNetFeatureDataset

C = 4  # feature width
CLASS_FILES = {
    'CliffDiving_val.txt': 'video_validation_0000051 67.5 75.9\nvideo_validation_0000051 85.0 90.1\n',
    'Diving_val.txt': ('video_validation_0000051   67.5\t75.9\n\n'  # whitespace of any kind; blank lines skipped
                       'video_validation_0000052 10.0 20.0\nvideo_validation_0000052 10.0 20.0\n'  # a duplicate
                       'video_validation_0000052 95.0 100.4\n'),  # 0.4 s past the end (100 s): clipped
    'HighJump_val.txt': 'video_validation_0000053 1.0 3.5\n',
    'Ambiguous_val.txt': 'video_validation_0000051 60.0 61.0\nvideo_validation_0000054 1.0 2.0\n',
    'HighJump_test.txt': 'video_test_0000001 4.0 9.0\n',
    'README.md': 'not a class file\n',
}
INDEX = {  # as tools/extract_features.py writes it (fps 30, 16-frame snippets)
    'video_validation_0000051': {'duration_second': 120.0, 'duration_frame': 3600, 'feature_frame': 3584,
                                 'num_frames': 3600, 'fps': 30.0, 'snippet': 16, 'stride': 16},
    'video_validation_0000052': {'duration_second': 100.0, 'duration_frame': 3000, 'feature_frame': 2992,
                                 'fps': 30.0},
    'video_validation_0000053': {'duration_second': 10.0, 'duration_frame': 300, 'feature_frame': 288, 'fps': 30.0},
    'video_validation_0000054': {'duration_second': 5.0},  # ambiguous only: left out
    'video_test_0000001': {'duration_second': 12.0},
    'video_validation_0000099': {'duration_second': 30.0},  # no annotation: left out
}


def make_thumos(root, files=CLASS_FILES, index=INDEX) -> tuple[str, str]:
    """The annotation folder and a features folder with videos.json and tiny [T, C] .npy files."""
    ann = root / 'annotation'
    ann.mkdir(parents=True)
    for name, text in files.items():
        (ann / name).write_text(text)
    feats = root / 'features'
    feats.mkdir()
    (feats / 'videos.json').write_text(json.dumps(index))
    rng = np.random.default_rng(0)
    for vid in index:
        np.save(feats / f'{vid}.npy', rng.standard_normal((8, C)).astype(np.float32))
    return str(ann), str(feats / 'videos.json')


@pytest.fixture(scope='module')
def tool():
    return load_tool('convert')


def test_features_index_to_json_that_the_dataset_reads(tmp_path, tool, capsys):
    ann, index = make_thumos(tmp_path)
    out, classes = tmp_path / 'out' / 'thumos14.json', tmp_path / 'out' / 'classes.txt'
    tool.main(['thumos2activitynet', '--ann-dir', ann, '--out', str(out), '--features-index', index,
               '--classes-out', str(classes)])
    printed = capsys.readouterr().out
    assert 'wrote ' in printed and '4 videos (1 testing, 3 validation), 7 segments of 3 classes' in printed
    for note in ('2 ambiguous region(s) skipped', '1 segment(s) ending past their video clipped',
                 '1 duplicate segment(s) dropped',
                 '2 video(s) of the duration source without a segment in the converted subset(s) left out'):
        assert note in printed
    assert 'subset: validation' in printed and f'data_prefix: {{feature: {tmp_path / "features"}}}' in printed
    assert classes.read_text() == 'CliffDiving\nDiving\nHighJump\n'
    doc = json.loads(out.read_text())
    db = doc['database']
    assert sorted(db) == ['video_test_0000001', 'video_validation_0000051', 'video_validation_0000052',
                          'video_validation_0000053']
    assert db['video_validation_0000051'] == {
        'subset': 'validation', 'duration_second': 120.0, 'duration_frame': 3600, 'feature_frame': 3584,
        'fps': 30.0, 'annotations': [{'segment': [67.5, 75.9], 'label': 'CliffDiving'},
                                     {'segment': [67.5, 75.9], 'label': 'Diving'},
                                     {'segment': [85.0, 90.1], 'label': 'CliffDiving'}]}
    assert db['video_validation_0000052']['annotations'] == [{'segment': [10.0, 20.0], 'label': 'Diving'},
                                                             {'segment': [95.0, 100.0], 'label': 'Diving'}]
    assert db['video_test_0000001']['subset'] == 'testing'
    assert [t['nodeName'] for t in doc['taxonomy']] == ['CliffDiving', 'Diving', 'HighJump']
    assert not [n for n in os.listdir(tmp_path / 'out') if n.startswith('.')]  # no temporary file left

    ds = ActivityNetFeatureDataset(ann_file=str(out), subset='validation', classes=str(classes),
                                   data_prefix={'feature': str(tmp_path / 'features')}, serialize_data=False)
    items = {d['video_name']: d for d in ds.data_list}
    assert sorted(items) == ['video_validation_0000051', 'video_validation_0000052', 'video_validation_0000053']
    v51 = items['video_validation_0000051']
    np.testing.assert_allclose(v51['gt_segments'], [[67.5, 75.9], [67.5, 75.9], [85.0, 90.1]])
    assert v51['gt_labels'].tolist() == [0, 1, 0]
    assert v51['feature_second'] == pytest.approx(3584 / 3600 * 120.0)  # the seconds the snippets cover
    np.testing.assert_allclose(items['video_validation_0000052']['gt_segments'], [[10.0, 20.0], [95.0, 100.0]])
    assert items['video_validation_0000053']['gt_labels'].tolist() == [2]
    assert os.path.isfile(v51['feature_path'])


def test_subset_and_durations_probed_from_video_files(tmp_path, tool):
    from video.demo_data import write_video

    ann, _ = make_thumos(tmp_path, {'HighJump_val.txt': 'clip_a 0.5 1.5\n', 'HighJump_test.txt': 'clip_b 0 1\n'})
    videos = tmp_path / 'videos'
    videos.mkdir()
    write_video(videos / 'clip_a.mp4', np.zeros((16, 16, 16, 3), np.uint8), fps=8)  # 2 s
    (videos / 'clip_c.mp4').write_bytes(b'never opened: not annotated')
    durations = probe_durations([str(videos)], {'clip_a', 'clip_z'})
    assert list(durations) == ['clip_a']
    assert durations['clip_a'][0] == {'duration_second': 2.0, 'duration_frame': 16, 'fps': 8.0}
    out = tmp_path / 'val.json'
    tool.main(['thumos2activitynet', '--ann-dir', ann, '--out', str(out), '--videos', str(videos),
               '--subset', 'validation'])
    assert json.loads(out.read_text())['database'] == {
        'clip_a': {'subset': 'validation', 'duration_second': 2.0, 'duration_frame': 16, 'fps': 8.0,
                   'annotations': [{'segment': [0.5, 1.5], 'label': 'HighJump'}]}}
    with pytest.raises(DataError, match=r'HighJump_test\.txt line 1: video clip_b has no duration: it is not in '
                                        r'--videos videos'):
        convert_thumos(ann, None, durations, '--videos videos')


@pytest.mark.parametrize('files,pattern', [
    ({'Run_val.txt': 'video_validation_0000051 1 2\nvideo_validation_0000051 1.0\n'},
     r"Run_val\.txt line 2: 'video_validation_0000051 1\.0'; expected '<video_id> <start_seconds> <end_seconds>'"),
    ({'Run_val.txt': 'video_validation_0000051 1 two\n'}, r'Run_val\.txt line 1: .*must be numbers of seconds'),
    ({'Run_val.txt': '\nvideo_validation_0000051 5.0 5.0\n'},
     r'Run_val\.txt line 2: video video_validation_0000051 segment \[5\.0, 5\.0\] ends before it starts'),
    ({'Run_val.txt': 'video_validation_0000051 -1 5\n'}, r'Run_val\.txt line 1: .* starts at -1\.0 s, before'),
    ({'Run_val.txt': 'video_validation_0000051 110 125\n'},  # 5 s past 120 s: more than max(1, 1.2)
     r"Run_val\.txt line 1: .*ends 5 s after the video's end \(120 s, from .*videos\.json video "
     r'video_validation_0000051\), more than the tolerance 1\.2 s'),
    ({'Run_val.txt': 'video_validation_0000051 120 121\n'}, r'Run_val\.txt line 1: .*starts at or after the video'),
    ({'Run_val.txt': 'video_validation_0000777 1 2\n'},
     r'Run_val\.txt line 1: video video_validation_0000777 has no duration: it is not in --features-index'),
    ({'Run_val.txt': 'video_validation_0000054 1 2\n', 'Jump_test.txt': 'video_validation_0000054 3 4\n'},
     r'Jump_test\.txt line 1: video video_validation_0000054 is also annotated in the validation subset '
     r'\(.*Run_val\.txt line 1\)'),
    ({'Ambiguous_val.txt': 'video_validation_0000051 1 2\n'}, r'holds no THUMOS14 class file'),
])
def test_errors_name_file_and_line(tmp_path, tool, files, pattern):
    ann, index = make_thumos(tmp_path, files)
    out = tmp_path / 'out.json'
    with pytest.raises(DataError, match=pattern):
        tool.main(['thumos2activitynet', '--ann-dir', ann, '--out', str(out), '--features-index', index])
    assert not out.exists()


def test_index_entry_without_duration_and_subset_without_files(tmp_path):
    ann, index = make_thumos(tmp_path, {'Run_val.txt': 'v1 1 2\n'}, index={'v1': {'duration_frame': 30}})
    with pytest.raises(DataError, match=r"videos\.json video v1: 'duration_second' must be a positive number .*"
                                        r'annotated at .*Run_val\.txt line 1'):
        convert_thumos(ann, None, index_durations([index]), 'videos.json')
    with pytest.raises(DataError, match=r'holds no THUMOS14 class file <ClassName>_test\.txt'):
        convert_thumos(ann, ['test'], index_durations([index]), 'videos.json')


def test_existing_output_is_kept_unless_overwrite_and_inputs_never_replaced(tmp_path, tool):
    ann, index = make_thumos(tmp_path)
    out = tmp_path / 'thumos14.json'
    out.write_text('precious')
    argv = ['thumos2activitynet', '--ann-dir', ann, '--out', str(out), '--features-index', index,
            '--subset', 'test']
    with pytest.raises(OutputPathError, match=r'thumos14\.json exists already; nothing was written \(pass '
                                              r'--overwrite'):
        tool.main(argv)
    assert out.read_text() == 'precious'
    for flag, path in (('--out', index), ('--out', os.path.join(ann, 'Diving_val.txt')),
                       ('--classes-out', os.path.join(ann, 'Diving_val.txt'))):
        swapped = [a if a != str(out) else (path if flag == '--out' else str(tmp_path / 'x.json')) for a in argv]
        extra = ['--classes-out', path] if flag == '--classes-out' else []
        with pytest.raises(OutputPathError, match=f'{flag} .* is an input of this conversion'):
            tool.main([*swapped, *extra, '--overwrite'])
    with pytest.raises(OutputPathError, match=r'would be read as a class file of --ann-dir'):
        tool.main([*argv[:4], os.path.join(ann, 'New_test.txt'), *argv[5:]])
    with pytest.raises(OutputPathError, match=r'--classes-out .* is --out'):
        tool.main([*argv, '--overwrite', '--classes-out', str(out)])
    tool.main([*argv, '--overwrite'])
    assert list(json.loads(out.read_text())['database']) == ['video_test_0000001']
    assert (tmp_path / 'features' / 'videos.json').read_text() == json.dumps(INDEX)
