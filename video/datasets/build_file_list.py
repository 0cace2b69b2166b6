"""A folder of videos -> ``path label`` list files and ``classes.txt``: ``tools/convert.py videos2list``.

MMAction2's ``tools/data/build_file_list.py --format videos`` for one's own data, in the two layouts it knows:

- ``--level 2`` (default): ``ROOT/<class>/<video>``; a video's class is its folder, the classes are the folders
  (sorted, or the order of a ``--classes`` file); the lists name ``<class>/<video>``.
- ``--level 1``: ``ROOT/<video>``, as UCF101's videos unpacked flat; the classes then come from the split files,
  whose lines name ``<class>/<video>`` (UCF101's ``trainlist01.txt`` / ``testlist01.txt``); the lists name
  ``<video>``.

The split is either per class by ``split_ratio`` (the first ``round(ratio * n)`` videos of each class, sorted by
name or shuffled with ``seed``, go to ``train.txt``, the rest to ``val.txt``; a class of two or more videos keeps
at least one in each) or given by split files (``train=trainlist01.txt val=testlist01.txt``: one relative path
per line, further fields such as UCF101's 1-based label ignored, since the class is the path's folder).
Each written line is ``<path relative to ROOT> <class id>``, what ``VideoDataset`` reads with
``data_prefix: {video: ROOT}`` and ``classes: OUT/classes.txt``.

Why the checks: a split-file line naming a video that is not there (a typo, a partial download) would otherwise
surface as a decode error in the middle of training; it is an error naming the split file and the line. A path
with whitespace cannot be a ``path label`` line; the same video twice (or in two splits) is a leak.
"""

from __future__ import annotations

import math
import os
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.atomic import atomic_write
from oars_deploy.words import plural

VIDEO_EXTENSIONS: tuple[str, ...] = ('.mp4', '.avi', '.mkv', '.webm', '.mov', '.m4v', '.mpg', '.mpeg', '.flv',
                                     '.wmv', '.3gp', '.ogv')
SPLIT_NAMES: tuple[str, ...] = ('train', 'val', 'test')
CLASSES_FILE = 'classes.txt'


@dataclass
class VideoFolder:
    """What :func:`scan_videos` found: ``videos`` by class folder (level 2; one ``''`` key for level 1), each a
    sorted list of paths relative to the root, and how many other files were ignored."""

    root: str
    level: int
    videos: dict[str, list[str]]
    ignored: int = 0
    empty: list[str] = field(default_factory=list)


def _visible(names: Sequence[str]) -> list[str]:
    return sorted(n for n in names if not n.startswith('.'))


def scan_videos(root: str, level: int = 2, extensions: Sequence[str] = VIDEO_EXTENSIONS) -> VideoFolder:
    """The videos under ``root`` (hidden files and folders left out; extensions compared case-insensitively).

    Args:
        root: the videos folder.
        level: 2 for ``root/<class>/<video>``, 1 for ``root/<video>``.
        extensions: file suffixes that are videos (with the dot).

    Returns:
        The :class:`VideoFolder`; an empty class folder is listed in ``empty`` (and warned about by the caller).

    Raises:
        DataFileNotFoundError: ``root`` is not a folder.
        DataError: no video at all (the message says which layout was searched and hints at the other level).
    """
    if not os.path.isdir(root):
        raise DataFileNotFoundError(f'--input {root}: not a folder; expected the videos folder (ROOT/<class>/<video> '
                                    'with --level 2, ROOT/<video> with --level 1)')
    exts = tuple(e.lower() for e in extensions)
    entries = _visible(os.listdir(root))
    folders = [n for n in entries if os.path.isdir(os.path.join(root, n))]
    files = [n for n in entries if os.path.isfile(os.path.join(root, n))]
    found = VideoFolder(root, level, {})
    if level == 1:
        found.videos[''] = [n for n in files if n.lower().endswith(exts)]
        found.ignored = len(files) - len(found.videos[''])
    else:
        found.ignored = sum(1 for n in files if not n.lower().endswith(exts))
        for name in folders:
            inside = _visible(os.listdir(os.path.join(root, name)))
            videos = [f'{name}/{n}' for n in inside
                      if n.lower().endswith(exts) and os.path.isfile(os.path.join(root, name, n))]
            found.ignored += len(inside) - len(videos)
            found.videos[name] = videos
            if not videos:
                found.empty.append(name)
    if not any(found.videos.values()):
        hint = ''
        if level == 2 and any(n.lower().endswith(exts) for n in files):
            hint = '; the videos lie directly in it: use --level 1'
        elif level == 1 and folders:
            hint = '; it has sub-folders: use --level 2 for ROOT/<class>/<video>'
        layout = 'ROOT/<class>/<video>' if level == 2 else 'ROOT/<video>'
        raise DataError(f'--input {root}: no videos found as {layout} (--level {level}) with the extensions '
                        f'{list(exts)}{hint}')
    return found


def read_classes_file(path: str) -> list[str]:
    """Class names in label order.

    Args:
        path: lines ``name`` (``classes.txt``) or ``index name`` (UCF101's ``classInd.txt``).

    Returns:
        The names, by line order or (``index name`` lines) by index.

    Raises:
        DataFileNotFoundError / DataError: the file is missing, empty, mixes the two forms, or repeats a name
            (``FILE line N``).
    """
    if not os.path.isfile(path):
        raise DataFileNotFoundError(f'--classes {path} not found; expected a text file with one class name per line')
    with open(path, encoding='utf-8') as f:
        lines = [(n, line.strip()) for n, line in enumerate(f, start=1) if line.strip()]
    if not lines:
        raise DataError(f'--classes {path} lists no class names')
    indexed = all(len(t.split(maxsplit=1)) == 2 and t.split()[0].isdigit() for _, t in lines)
    entries = sorted((int(t.split(maxsplit=1)[0]), t.split(maxsplit=1)[1], n) for n, t in lines) if indexed else [
        (0, t, n) for n, t in lines]
    names: dict[str, int] = {}
    for _, name, lineno in entries:
        if name in names:
            raise DataError(f'--classes {path} line {lineno}: class {name!r} again (first at line {names[name]})')
        names[name] = lineno
    return list(names)


def read_split_file(path: str) -> list[tuple[int, str]]:
    """The videos a split file lists.

    Args:
        path: one relative video path per line; further fields are ignored.

    Returns:
        (1-based line number, first field) of every non-blank, non-``#`` line.

    Raises:
        DataFileNotFoundError / DataError: the file is missing, or lists nothing.
    """
    if not os.path.isfile(path):
        raise DataFileNotFoundError(f'split file {path} not found')
    with open(path, encoding='utf-8') as f:
        rows = [(n, line.split()[0]) for n, line in enumerate(f, start=1)
                if line.strip() and not line.lstrip().startswith('#')]
    if not rows:
        raise DataError(f'split file {path} lists no videos; expected one relative video path per line')
    return rows


def _check_path(path: str, where: str) -> None:
    if any(c.isspace() for c in path):
        raise DataError(f"{where}: the video path {path!r} contains whitespace, which a 'path label' list line cannot "
                        'hold; rename the file or folder')


def _ratio_splits(found: VideoFolder, ratio: float, shuffle: bool, rng: random.Random) -> dict[str, list[tuple]]:
    """``{'train': [(path, class), ...], 'val': [...]}`` by class (see the module docstring)."""
    splits: dict[str, list[tuple[str, str]]] = {'train': [], 'val': []}
    for name, videos in found.videos.items():
        videos = list(videos)
        if shuffle:
            rng.shuffle(videos)
        n = len(videos)
        n_train = math.floor(ratio * n + 0.5)
        if ratio < 1 and n >= 2:
            n_train = min(max(n_train, 1), n - 1)
        n_train = max(n_train, min(n, 1))
        splits['train'] += [(v, name) for v in videos[:n_train]]
        splits['val'] += [(v, name) for v in videos[n_train:]]
    return {k: v for k, v in splits.items() if v}


def _file_splits(found: VideoFolder, split_files: dict[str, str]) -> tuple[dict[str, list[tuple]], int]:
    """The listed videos per split name, each checked to exist once; and how many found videos no file lists."""
    seen: dict[str, str] = {}
    splits: dict[str, list[tuple[str, str]]] = {}
    for split, path in split_files.items():
        rows = []
        for lineno, rel in read_split_file(path):
            where = f'split file {path} line {lineno}'
            parts = [p for p in rel.replace('\\', '/').split('/') if p]
            if len(parts) != 2:
                raise DataError(f'{where}: {rel!r}; expected <class>/<video> (the class folder and the file name, '
                                f'as UCF101 split files write them)')
            name, video = parts
            listed = video if found.level == 1 else f'{name}/{video}'
            _check_path(listed, where)
            if not os.path.isfile(os.path.join(found.root, listed)):
                layout = '<video>' if found.level == 1 else '<class>/<video>'
                raise DataError(f'{where}: video {rel!r} not found at {os.path.join(found.root, listed)} '
                                f'(--level {found.level}: the videos lie at ROOT/{layout})')
            if listed in seen:
                raise DataError(f'{where}: video {rel!r} is listed again (first: {seen[listed]})')
            seen[listed] = where
            rows.append((listed, name))
        splits[split] = rows
    unlisted = sum(1 for videos in found.videos.values() for v in videos if v not in seen)
    return splits, unlisted


def build_file_lists(root: str, out_dir: str, *, level: int = 2, split_ratio: float = 0.8,
                     split_files: dict[str, str] | None = None, classes_file: str | None = None,
                     shuffle: bool = False, seed: int = 0, extensions: Sequence[str] = VIDEO_EXTENSIONS,
                     overwrite: bool = False) -> dict:
    """Write ``<split>.txt`` lists and ``classes.txt`` for the videos under ``root``.

    Args:
        root: the videos folder (the lists' paths are relative to it).
        out_dir: the folder for the lists (created if needed; may be ``root``).
        level: 2 (``root/<class>/<video>``) or 1 (``root/<video>``, classes from the split files).
        split_ratio: fraction of each class for ``train.txt`` (0 < r <= 1; 1 writes no ``val.txt``), when no
            ``split_files`` are given.
        split_files: ``{'train': path, 'val': path, ...}`` (names from ``SPLIT_NAMES``) instead of the ratio.
        classes_file: class names in label order (``name`` or ``index name`` lines); default the sorted class
            folders (level 2) or the classes the split files name (level 1).
        shuffle, seed: shuffle each class before the ratio split and each list's lines (``random.Random(seed)``).
        extensions: the video file suffixes.
        overwrite: replace existing list files (else their existence is an error, before any writing).

    Returns:
        ``{'out_dir', 'root', 'lists': {split: (path, number of videos)}, 'classes': [...], 'unlisted': videos in
        no split file, 'ignored': non-video files}``.

    Raises:
        DataFileNotFoundError / DataError: see :func:`scan_videos`, :func:`read_split_file`; a split-file line
            naming a missing video (``FILE line N``), a video listed twice, a path with whitespace, level 1 without
            split files, a class not in ``classes_file``, existing outputs without ``overwrite``.
    """
    if not 0 < split_ratio <= 1:
        raise DataError(f'--split-ratio {split_ratio}: expected a fraction in (0, 1] for the training list')
    if level == 1 and not split_files:
        raise DataError('--level 1 (videos directly in --input) has no class folders: give --split-file lines that '
                        'name <class>/<video> (UCF101 style), or arrange the videos as ROOT/<class>/<video> '
                        '(--level 2)')
    found = scan_videos(root, level, extensions)
    for name in found.empty:
        warnings.warn(f'videos2list: class folder {os.path.join(root, name)} has no videos (extensions '
                      f'{list(extensions)}); the class keeps its label id in {CLASSES_FILE}', UserWarning, stacklevel=2)
    rng = random.Random(seed)
    if split_files:
        splits, unlisted = _file_splits(found, split_files)
    else:
        splits, unlisted = _ratio_splits(found, split_ratio, shuffle, rng), 0
        for rows in splits.values():
            for path, _ in rows:
                _check_path(path, f'--input {root}')
    folder_classes = sorted(found.videos) if level == 2 else sorted({c for rows in splits.values() for _, c in rows})
    names = read_classes_file(classes_file) if classes_file else folder_classes
    label = {n: i for i, n in enumerate(names)}
    missing = sorted({c for rows in splits.values() for _, c in rows} - set(label))
    if missing:
        raise DataError(f'--classes {classes_file}: the classes {missing} of the videos are not in it; add them')
    out = os.fspath(out_dir)
    targets = {split: os.path.join(out, f'{split}.txt') for split in splits}
    if not overwrite:
        existing = [p for p in (*targets.values(), os.path.join(out, CLASSES_FILE)) if os.path.exists(p)]
        if existing:
            raise DataError(f'{len(existing)} output file(s) exist already: {", ".join(existing)}; nothing was written '
                            '(pass --overwrite to replace them, or choose another --out folder)')
    for split, rows in splits.items():
        lines = [f'{path} {label[name]}\n' for path, name in rows]
        if shuffle:
            rng.shuffle(lines)
        atomic_write(targets[split], ''.join(lines))
    atomic_write(os.path.join(out, CLASSES_FILE), ''.join(f'{n}\n' for n in names))
    return {'out_dir': out, 'root': os.fspath(root), 'classes': names, 'unlisted': unlisted, 'ignored': found.ignored,
            'lists': {split: (targets[split], len(rows)) for split, rows in splits.items()}}


def summary(result: dict) -> str:
    """What :func:`build_file_lists` wrote, and the dataset settings that read it."""
    lists = ', '.join(f'{os.path.basename(p)} ({plural(n, "video")})' for p, n in result['lists'].values())
    text = (f"wrote {lists} and {CLASSES_FILE} ({len(result['classes'])} classes) to {result['out_dir']}")
    notes = [f"{result[k]} {what}" for k, what in (('unlisted', 'videos in no split file'),
                                                    ('ignored', 'files that are not videos ignored')) if result[k]]
    if notes:
        text += f" ({'; '.join(notes)})"
    first = next(iter(result['lists'].values()))[0]
    return (f"{text}\nVideoDataset: ann_file: {first}, data_prefix: {{video: {result['root']}}}, classes: "
            f"{os.path.join(result['out_dir'], CLASSES_FILE)}")


__all__ = ['CLASSES_FILE', 'SPLIT_NAMES', 'VIDEO_EXTENSIONS', 'VideoFolder', 'build_file_lists', 'read_classes_file',
           'read_split_file', 'scan_videos', 'summary']
