"""check_videos: every listed video decoded to its last frame, every unreadable one reported with the reason;
the tool exits 2 with the list."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import write_frame_folder
from demo_utils import run_tool

from video.datasets.check import check_video, check_video_list, format_video_report


def _zeroed_middle(src: str, dst: Path) -> str:
    """A file whose index is intact but whose middle third of bytes is zeros (it opens; decoding fails)."""
    data = bytearray(Path(src).read_bytes())
    a, b = len(data) // 3, 2 * len(data) // 3
    data[a:b] = bytes(b - a)
    dst.write_bytes(bytes(data))
    return str(dst)


@pytest.fixture()
def video_list(tmp_path, index_clip, bad_files) -> tuple[str, list[str]]:
    shutil.copy(index_clip, tmp_path / 'good.mp4')
    zeroed = _zeroed_middle(str(Path(bad_files['truncated']).parent / 'fast.mp4'), tmp_path / 'zeroed.mp4')
    bad = [bad_files['truncated'], bad_files['truncated_faststart'], bad_files['notes'], zeroed,
           str(tmp_path / 'missing.mp4')]
    lines = ['good.mp4 0'] + [f'{p} 1' for p in bad] + ['good.mp4 2']
    (tmp_path / 'list.txt').write_text('\n'.join(lines) + '\n')
    return str(tmp_path / 'list.txt'), bad


def test_check_video_list_reports_every_unreadable_file(video_list, index_clip):
    list_file, bad = video_list
    assert check_video(index_clip) is None
    report = check_video_list(list_file)  # root: the list's folder
    assert report.num_files == 7
    assert [name for name, _ in report.failures] == bad
    reasons = dict(report.failures)
    assert 'header lists 30 frames' in reasons[bad[1]]
    assert 'InvalidDataError' in reasons[bad[3]] or 'decode' in reasons[bad[3]]
    assert 'video file not found' in reasons[bad[4]]
    text = format_video_report(report)
    assert '7 file(s) checked with pyav' in text and '5 unreadable' in text
    assert check_video_list(list_file, workers=2).failures == report.failures
    (Path(list_file).parent / 'clean.txt').write_text(f'{index_clip} 0\n')
    clean = check_video_list(str(Path(list_file).parent / 'clean.txt'), root='/elsewhere')  # absolute paths stay
    assert format_video_report(clean).endswith('all readable') and clean.num_files == 1


def test_check_rawframe_folders(tmp_path):
    write_frame_folder(tmp_path / 'ok', start_index=1, tmpl='img_{:05d}.jpg', num=6)
    write_frame_folder(tmp_path / 'short', start_index=1, tmpl='img_{:05d}.jpg', num=4)
    (tmp_path / 'frames.txt').write_text('ok 6 0\nshort 6 1\nnofolder 3 0\nok\n')
    report = check_video_list(str(tmp_path / 'frames.txt'), backend='rawframes')
    names = [n for n, _ in report.failures]
    assert names[0].endswith('frames.txt line 4')
    assert names[1:] == [str(tmp_path / 'short'), str(tmp_path / 'nofolder')]
    assert 'img_00005.jpg is not found' in report.failures[1][1]


@pytest.mark.slow  # a subprocess (imports torch): ~6 s alone, ~20 s on a shared machine
def test_tool_exits_2_with_the_list(video_list):
    list_file, bad = video_list
    proc = run_tool('check_videos.py', list_file, '--workers', '2', check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stderr
    assert all(f'BAD {p}:' in proc.stdout for p in bad)
    assert 'error: 5 of 7 file(s)' in proc.stderr
