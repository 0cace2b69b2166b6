"""What the video datasets share: class names from a file or a list, annotation lists parsed with line numbers,
labels checked against the classes, and ``on_bad_video`` as the video name of ``on_bad_sample``.

Why line numbers: a label outside the classes (or a typo in a path column) in a 240 000-line Kinetics list is
found at construction, and the message names the list file and the line, not only the value.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

from oars.data import storage
from oars.data.dataset import CHECK_HINT, BadSampleWarning, OarsDataset
from oars.errors import DataError, DataFileNotFoundError
from video.registry import TRANSFORMS

VIDEO_CHECK_HINT = 'tools/check_videos.py LIST --root DIR lists every unreadable video'


def read_classes(classes: str | Sequence[str] | None, data_root: str = '', owner: str = 'dataset') -> list[str] | None:
    """Class names from a list, or from a text file (one name per line, blank lines ignored; line k = label k).

    A relative file path is tried as given, then under ``data_root``.
    """
    if classes is None or not isinstance(classes, str):
        return None if classes is None else list(classes)
    candidates = [classes] if os.path.isabs(classes) or storage.is_url(classes) or not data_root \
        else [classes, storage.join(data_root, classes)]
    path = next((p for p in candidates if storage.isfile(p)), None)
    if path is None:
        raise DataFileNotFoundError(f"{owner}: classes file not found: {' or '.join(candidates)} ('classes' is a "
                                    "text file with one class name per line, or a list of names)")
    with storage.open_file(path, 'r', encoding='utf-8') as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise DataError(f'{owner}: classes file {path} lists no class names')
    return names


def iter_annotation_lines(path: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, whitespace-split fields) of every non-blank, non-``#`` line of ``path``."""
    if not storage.isfile(path):
        raise DataFileNotFoundError(f'annotation list not found: {path}')
    with storage.open_file(path, 'r', encoding='utf-8') as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if fields and not fields[0].startswith('#'):
                yield lineno, fields


def parse_labels(tokens: Sequence[str], classes: Sequence[str], multi_label: bool, where: str) -> int | list[int]:
    """The label(s) of one annotation line: an integer class id in ``[0, len(classes))`` or a class name.

    Args:
        tokens: the label fields of the line (one, or one or more with ``multi_label``).
        classes: the class names.
        multi_label: whether several labels are allowed (then a list is returned).
        where: ``'FILE line N'`` for messages.
    """
    if not tokens:
        raise DataError(f'{where}: no label (expected {"one or more class ids" if multi_label else "a class id"})')
    if len(tokens) > 1 and not multi_label:
        raise DataError(f'{where}: {len(tokens)} labels {list(tokens)} on a single-label line; set multi_label: '
                        'true for lines with several labels')
    ids = []
    for tok in tokens:
        try:
            cid = int(tok)
        except ValueError:
            if tok not in classes:
                raise DataError(f'{where}: label {tok!r} is neither a class id nor one of the {len(classes)} '
                                f'classes {list(classes)[:10]}{"..." if len(classes) > 10 else ""}') from None
            cid = list(classes).index(tok)
        if not 0 <= cid < len(classes):
            raise DataError(f'{where}: label {cid} is outside the {len(classes)} classes (0..{len(classes) - 1}: '
                            f'{list(classes)[:10]}{"..." if len(classes) > 10 else ""}); check `classes` or the list')
        ids.append(cid)
    if multi_label:
        return sorted(set(ids))
    return ids[0]


def resolve_bad_sample(owner: str, on_bad_sample: str | None, on_bad_video: str | None) -> tuple[str, str]:
    """``on_bad_video`` is the same setting as ``on_bad_sample`` (one mechanism); giving both differently is an
    error.

    Returns:
        (the policy, default ``'error'``; the key it came from, for messages: ``'on_bad_video'`` when the config
        wrote that one, else ``'on_bad_sample'``).
    """
    if on_bad_video is not None and on_bad_sample is not None and on_bad_video != on_bad_sample:
        raise DataError(f'{owner}: on_bad_video ({on_bad_video!r}) and on_bad_sample ({on_bad_sample!r}) are the same '
                        'setting; give one of them')
    if on_bad_video is not None:
        return on_bad_video, 'on_bad_video'
    return on_bad_sample or 'error', 'on_bad_sample'


def _listed(names: list[str], limit: int = 10) -> str:
    return ', '.join(names[:limit]) + (f' and {len(names) - limit} more' if len(names) > limit else '')


class VideoBaseDataset(OarsDataset):
    """``OarsDataset`` for lists of videos, frame folders or feature files (``path ... label [label ...]``).

    Args:
        ann_file: the list (relative paths are under ``data_root``).
        classes: names, or a text file of names (one per line; relative: as given, then under ``data_root``).
        multi_label: lines carry one or more labels (``path l1 l2 ...``); ``label`` is then a sorted list.
        on_bad_sample / on_bad_video: ``'error'`` (default) or ``'skip'`` (training only; see
            ``oars.data.dataset``): a sample that cannot be read is replaced by another one, with one
            ``BadSampleWarning`` per file naming it and the count so far; ``skipped`` maps file -> reason.
        data_root, data_prefix, pipeline, test_mode, serialize_data, lazy_init, indices, max_refetch: as
            mmengine's ``BaseDataset``.
    """

    transform_registry = TRANSFORMS
    classes_hint = "the class names: a list, or a text file with one name per line (classes: path/to/classes.txt)"
    path_key: str = 'filename'  # the data-info key naming the sample's file or folder

    def __init__(
        self,
        ann_file: str,
        data_root: str = '',
        data_prefix: dict | None = None,
        classes: str | Sequence[str] | None = None,
        multi_label: bool = False,
        on_bad_sample: str | None = None,
        on_bad_video: str | None = None,
        pipeline: Sequence[dict | Callable] = (),
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        owner = type(self).__name__
        if not ann_file:
            raise DataError(f"{owner}: 'ann_file' (the annotation list) is required")
        storage.register_options(data_root or '', storage_options, f'{owner}: storage_options')  # classes file
        self.multi_label = bool(multi_label)
        names = read_classes(classes, data_root, owner)
        policy, key = resolve_bad_sample(owner, on_bad_sample, on_bad_video)
        super().__init__(
            classes=names, pipeline=pipeline, on_bad_sample=policy, bad_sample_key=key, test_mode=test_mode,
            extra_metainfo=dict(multi_label=self.multi_label), ann_file=ann_file,
            data_root=data_root or '', data_prefix=dict(self.default_prefix(), **(data_prefix or {})),
            indices=indices, serialize_data=serialize_data, lazy_init=lazy_init, max_refetch=max_refetch,
            storage_options=storage_options)

    def default_prefix(self) -> dict:
        """``data_prefix`` defaults (relative paths in the list are under ``data_root`` joined with these)."""
        return {}

    @property
    def num_classes(self) -> int:
        # ``_metainfo``, not ``metainfo``: mmengine's property deep-copies the whole metainfo (classes and palette) on
        # every call, and the list loaders ask once per line (minutes for a 650k-line list)
        return len(self._metainfo['classes'])

    def _lines(self, min_fields: int) -> Iterator[tuple[str, list[str], int | list[int]]]:
        """(``'FILE line N'``, the fields before the labels, the label(s)) of every line."""
        classes = self.metainfo['classes']
        count = 0
        for lineno, fields in iter_annotation_lines(self.ann_file):
            where = f'{self.ann_file} line {lineno}'
            if len(fields) < min_fields + 1:
                raise DataError(f'{where}: expected {min_fields + 1} fields ({self.line_format}), got {fields}')
            yield where, fields[:min_fields], parse_labels(fields[min_fields:], classes, self.multi_label, where)
            count += 1
        if count == 0:
            raise DataError(f'{type(self).__name__}: {self.ann_file} lists no samples ({self.line_format})')

    line_format: str = 'path label'

    def _record_skip(self, idx: int, err: DataError) -> None:
        """As ``OarsDataset``'s, keyed by the video / frame folder / feature file of the sample."""
        key = str(self.get_data_info(idx).get(self.path_key) or f'sample {idx}')
        if key in self.skipped:
            return
        self.skipped[key] = str(err)
        warnings.warn(f'{type(self).__name__}: skipped {key}: {err} [{self.bad_sample_key}: skip; a random other '
                      f'sample is used in its place; {len(self.skipped)} sample(s) skipped so far in this process: '
                      f'{_listed(list(self.skipped))}; {VIDEO_CHECK_HINT}; {CHECK_HINT}]',
                      BadSampleWarning, stacklevel=2)
