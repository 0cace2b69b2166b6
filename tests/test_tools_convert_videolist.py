"""tools/convert.py videos2list: a folder of videos -> `path label` lists + classes.txt (MMAction2's
build_file_list), by ratio or by official-style split files, at --level 2 and 1; VideoDataset reads the lists;
every error names the folder, or the split file and line."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from demo_utils import ROOT, load_tool

from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.output_paths import OutputPathError
from video.datasets import VideoDataset
from video.datasets.build_file_list import build_file_lists, read_classes_file

FILES = ('bike/a.mp4', 'bike/b.avi', 'bike/c.MKV', 'bike/notes.txt', 'bike/.hidden.mp4', 'run/r.mp4', 'readme.txt')


def make_tree(root, files=FILES, empty=('swim',)) -> str:
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
        with open(os.path.join(root, rel), 'wb') as f:
            f.write(b'not decoded by the converter')
    for name in empty:
        os.makedirs(os.path.join(root, name), exist_ok=True)
    return str(root)


def read(path) -> str:
    with open(path) as f:
        return f.read()



@pytest.mark.slow  # a subprocess that imports the tasks (5-8 s of CPU)
def test_cli_ratio_split_and_video_dataset_reads_it(tmp_path):
    """bike: 3 videos -> round(0.8 * 3) = 2 train, 1 val; run: 1 video -> train; swim: empty (warned, id 2 kept)."""
    make_tree(tmp_path / 'data' / 'videos')
    cmd = [sys.executable, os.path.join(ROOT, 'tools', 'convert.py'), 'videos2list', '--input', 'data/videos',
           '--out', 'data']
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=ROOT))  # this checkout's tasks
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ('wrote train.txt (3 videos), val.txt (1 video) and classes.txt (3 classes) to data (2 files that are '
            'not videos ignored)') in proc.stdout
    assert 'VideoDataset: ann_file: data/train.txt, data_prefix: {video: data/videos}' in proc.stdout
    assert 'class folder data/videos/swim has no videos' in proc.stderr
    assert read(tmp_path / 'data' / 'train.txt') == 'bike/a.mp4 0\nbike/b.avi 0\nrun/r.mp4 1\n'
    assert read(tmp_path / 'data' / 'val.txt') == 'bike/c.MKV 0\n'
    assert read(tmp_path / 'data' / 'classes.txt') == 'bike\nrun\nswim\n'
    ds = VideoDataset(ann_file=str(tmp_path / 'data' / 'train.txt'), data_prefix=dict(video=str(tmp_path / 'data' /
                      'videos')), classes=str(tmp_path / 'data' / 'classes.txt'), serialize_data=False)
    assert [(os.path.relpath(d['filename'], tmp_path), d['label']) for d in ds.data_list] == [
        ('data/videos/bike/a.mp4', 0), ('data/videos/bike/b.avi', 0), ('data/videos/run/r.mp4', 1)]
    assert list(ds.metainfo['classes']) == ['bike', 'run', 'swim']


def test_shuffle_is_seeded_and_ratio_one_writes_train_only(tmp_path):
    files = [f'c{k}/v{i}.mp4' for k in range(2) for i in range(5)]
    root = make_tree(tmp_path / 'v', files, empty=())
    results = []
    for seed, out in ((3, 'a'), (3, 'b'), (4, 'c')):
        with warnings.catch_warnings():
            warnings.simplefilter('error')  # no empty class here: nothing to warn about
            build_file_lists(root, str(tmp_path / out), shuffle=True, seed=seed)
        results.append((read(tmp_path / out / 'train.txt'), read(tmp_path / out / 'val.txt')))
    assert results[0] == results[1]
    train, val = results[0]
    for k in range(2):  # 5 per class: round(0.8 * 5) = 4 train, 1 val, whatever the order
        assert sum(line.startswith(f'c{k}/') for line in train.splitlines()) == 4
        assert sum(line.endswith(f' {k}') for line in val.splitlines()) == 1
    assert sorted((train + val).splitlines()) == sorted(f'{f} {f[1]}' for f in files)
    build_file_lists(root, str(tmp_path / 'all'), split_ratio=1.0)
    assert sorted(os.listdir(tmp_path / 'all')) == ['classes.txt', 'train.txt']
    assert read(tmp_path / 'all' / 'train.txt') == ''.join(f'{f} {f[1]}\n' for f in files)


def test_split_files_level_2_and_level_1_with_class_index(tmp_path):
    root = make_tree(tmp_path / 'videos', empty=())
    trainlist = tmp_path / 'trainlist01.txt'
    trainlist.write_text('bike/a.mp4 1\n\n# a comment\nrun/r.mp4 2\n')
    testlist = tmp_path / 'testlist01.txt'
    testlist.write_text('bike/c.MKV\n')
    result = build_file_lists(root, str(tmp_path / 'lists'),
                              split_files={'train': str(trainlist), 'val': str(testlist)})
    assert read(tmp_path / 'lists' / 'train.txt') == 'bike/a.mp4 0\nrun/r.mp4 1\n'
    assert read(tmp_path / 'lists' / 'val.txt') == 'bike/c.MKV 0\n'
    assert result['unlisted'] == 1  # bike/b.avi is in neither file
    # UCF101 unpacked flat: the class is the split line's folder, the list names the file alone
    flat = make_tree(tmp_path / 'flat', ['v_Bike_g01.avi', 'v_Run_g01.avi', 'v_Run_g02.avi'], empty=())
    (tmp_path / 'train1.txt').write_text('Run/v_Run_g01.avi 2\nBike/v_Bike_g01.avi 1\n')
    (tmp_path / 'test1.txt').write_text('Run/v_Run_g02.avi\n')
    (tmp_path / 'classInd.txt').write_text('2 Run\n1 Bike\n')
    build_file_lists(flat, str(tmp_path / 'ucf'), level=1, classes_file=str(tmp_path / 'classInd.txt'),
                     split_files={'train': str(tmp_path / 'train1.txt'), 'test': str(tmp_path / 'test1.txt')})
    assert read(tmp_path / 'ucf' / 'train.txt') == 'v_Run_g01.avi 1\nv_Bike_g01.avi 0\n'
    assert read(tmp_path / 'ucf' / 'test.txt') == 'v_Run_g02.avi 1\n'
    assert read(tmp_path / 'ucf' / 'classes.txt') == 'Bike\nRun\n'
    assert read_classes_file(str(tmp_path / 'ucf' / 'classes.txt')) == ['Bike', 'Run']


@pytest.mark.parametrize('lines,pattern', [
    ({'train': 'bike/a.mp4\nbike/zzz.mp4 1\n'}, r'train\.txt line 2: video \'bike/zzz\.mp4\' not found at .*bike/zzz'),
    ({'train': 'bike/a.mp4\n\nbike/a.mp4\n'}, r"train\.txt line 3: video 'bike/a\.mp4' is listed again \(first: "
                                               r'split file .*train\.txt line 1\)'),
    ({'train': 'bike/a.mp4\n', 'val': 'run/r.mp4\nbike/a.mp4\n'}, r'val\.txt line 2: .* listed again .*train\.txt '
                                                                  r'line 1'),
    ({'train': 'a.mp4\n'}, r"train\.txt line 1: 'a\.mp4'; expected <class>/<video>"),
    ({'train': '# nothing\n'}, r'train\.txt lists no videos'),
])
def test_split_file_errors_name_file_and_line(tmp_path, lines, pattern):
    root = make_tree(tmp_path / 'videos', empty=())
    files = {}
    for name, text in lines.items():
        (tmp_path / f'{name}.txt').write_text(text)
        files[name] = str(tmp_path / f'{name}.txt')
    with pytest.raises(DataError, match=pattern):
        build_file_lists(root, str(tmp_path / 'out'), split_files=files)
    assert not (tmp_path / 'out').exists()


def test_folder_errors(tmp_path):
    with pytest.raises(DataFileNotFoundError, match=r'--input .*nowhere: not a folder'):
        build_file_lists(str(tmp_path / 'nowhere'), str(tmp_path / 'out'))
    flat = make_tree(tmp_path / 'flat', ['x.mp4'], empty=())
    with pytest.raises(DataError, match=r'no videos found as ROOT/<class>/<video> \(--level 2\) .*use --level 1'):
        build_file_lists(flat, str(tmp_path / 'out'))
    with pytest.raises(DataError, match=r'--level 1 .* give --split-file lines'):
        build_file_lists(flat, str(tmp_path / 'out'), level=1)
    nested = make_tree(tmp_path / 'nested', ['a/b.mp4'], empty=())
    with pytest.raises(DataError, match=r'ROOT/<video> \(--level 1\) .*use --level 2'):
        build_file_lists(nested, str(tmp_path / 'out'), level=1, split_files={'train': 'unused'})
    spaced = make_tree(tmp_path / 'spaced', ['jump rope/a.mp4'], empty=())
    with pytest.raises(DataError, match=r"'jump rope/a\.mp4' contains whitespace"):
        build_file_lists(spaced, str(tmp_path / 'out'))
    root = make_tree(tmp_path / 'videos', empty=())
    (tmp_path / 'names.txt').write_text('bike\n')
    with pytest.raises(DataError, match=r"--classes .*names\.txt: the classes \['run'\] of the videos are not in it"):
        build_file_lists(root, str(tmp_path / 'out'), classes_file=str(tmp_path / 'names.txt'))
    assert not (tmp_path / 'out').exists()


def test_existing_lists_are_kept_unless_overwrite(tmp_path):
    """Through tools/convert.py's main (in-process), with the flags a user types."""
    tool = load_tool('convert')
    root = make_tree(tmp_path / 'videos', empty=())
    out = tmp_path / 'lists'
    out.mkdir()
    (out / 'val.txt').write_text('precious')
    argv = ['videos2list', '--input', root, '--out', str(out)]
    with pytest.raises(OutputPathError, match=r'val\.txt exists already; nothing was written \(pass --overwrite'):
        tool.main(argv)
    assert sorted(os.listdir(out)) == ['val.txt'] and (out / 'val.txt').read_text() == 'precious'
    (tmp_path / 'train.txt').write_text('bike/a.mp4\n')  # the split file, where train.txt would be written
    with pytest.raises(OutputPathError, match=r'train\.txt is an input of this conversion'):
        tool.main(['videos2list', '--input', root, '--out', str(tmp_path), '--split-file',
                   f'train={tmp_path / "train.txt"}', '--overwrite'])
    with pytest.raises(OutputPathError, match=r'--out .*lists is inside the videos folder --input'):
        tool.main(['videos2list', '--input', root, '--out', os.path.join(root, 'lists')])
    with pytest.raises(SystemExit):  # argparse: NAME=FILE with a known split name
        tool.main([*argv, '--split-file', 'holdout=x.txt'])
    tool.main([*argv, '--overwrite', '--split-ratio', '0.5'])
    # bike: floor(0.5 * 3 + 0.5) = 2 train; run: 1 video -> train
    assert read(out / 'train.txt') == 'bike/a.mp4 0\nbike/b.avi 0\nrun/r.mp4 1\n'
    assert read(out / 'val.txt') == 'bike/c.MKV 0\n'
    assert not [n for n in os.listdir(out) if n.startswith('.')]  # no temporary files left behind
