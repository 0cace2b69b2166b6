"""Video file lists and raw-frame folder lists (MMAction2's formats)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from oars.data import storage
from oars.errors import DataError
from video.datasets.base import VideoBaseDataset
from video.registry import DATASETS


@DATASETS.register_module()
class VideoDataset(VideoBaseDataset):
    """Videos listed as ``relative/path.mp4 label`` lines (``relative/path.mp4 l1 l2 ...`` with ``multi_label``).

    Paths are relative to ``data_root`` joined with ``data_prefix['video']`` (default: ``data_root`` itself).
    Labels are class ids (or class names) checked against ``classes`` at construction; the files are opened
    only by the pipeline (``VideoInit``), in ``__getitem__``. Each sample: ``filename`` (absolute), ``label``,
    ``multi_label``, ``num_classes``, ``start_index`` (0), ``modality`` ('RGB').
    """

    line_format = 'relative/path.mp4 label (or several labels with multi_label: true)'

    def default_prefix(self) -> dict:
        return {'video': ''}

    def load_data_list(self) -> list[dict]:
        num_classes, multi_label = self.num_classes, self.multi_label  # once, not per line (650k lines)
        join = _path_joiner(self.data_prefix['video'])
        return [dict(filename=join(fields[0]), label=label, multi_label=multi_label, num_classes=num_classes,
                     start_index=0, modality='RGB')
                for _, fields, label in self._lines(1)]


def _path_joiner(prefix: str) -> Callable[[str], str]:
    """``storage.absolute(storage.join(prefix, path))`` for the paths of a list: for a local prefix made absolute
    once (``os.path.abspath`` asks the working directory on every call), then ``normpath(join(...))`` per line."""
    if storage.is_url(prefix):
        return lambda path: storage.absolute(storage.join(prefix, path))
    base = os.path.abspath(prefix)
    return lambda path: (storage.join(prefix, path) if storage.is_url(path)
                         else os.path.normpath(os.path.join(base, path)))


@DATASETS.register_module()
class RawframeDataset(VideoBaseDataset):
    """Frame folders listed as ``frame_dir total_frames label`` lines (more labels with ``multi_label``).

    Frame ``i`` (0-based, what ``SampleFrames`` writes) of a folder is the file
    ``filename_tmpl.format(i + start_index)``: with MMAction2's defaults (``img_{:05d}.jpg``, ``start_index`` 1)
    index 0 reads ``img_00001.jpg``. Set ``start_index: 0`` for folders numbered from 0 (the off-by-one that
    reads past the last file otherwise). Folders are relative to ``data_root`` joined with
    ``data_prefix['img']``. Each sample: ``frame_dir`` (absolute), ``total_frames``, ``filename_tmpl``,
    ``start_index``, ``label``, ``multi_label``, ``num_classes``, ``modality`` ('RGB').

    Args:
        filename_tmpl: the frame files' name template (``str.format`` with the file number).
        start_index: the number of the first frame file.
        storage_options: for a URL ``data_root`` (``s3://``, ``memory://`` ...): see ``oars.data.storage``.
        other arguments: as ``VideoBaseDataset``.
    """

    path_key = 'frame_dir'
    line_format = 'frame_dir total_frames label (or several labels with multi_label: true)'

    def __init__(self, ann_file: str, filename_tmpl: str = 'img_{:05d}.jpg', start_index: int = 1,
                 data_root: str = '', data_prefix: dict | None = None, classes: str | Sequence[str] | None = None,
                 multi_label: bool = False, on_bad_sample: str | None = None, on_bad_video: str | None = None,
                 pipeline: Sequence[dict | Callable] = (), test_mode: bool = False, serialize_data: bool = True,
                 lazy_init: bool = False, indices: int | Sequence[int] | None = None, max_refetch: int = 1000,
                 storage_options: Mapping | None = None) -> None:
        try:
            filename_tmpl.format(1)
        except (AttributeError, IndexError, KeyError, ValueError) as err:
            raise DataError(f"RawframeDataset: filename_tmpl must be a str.format template taking the frame number, "
                            f"e.g. 'img_{{:05d}}.jpg', got {filename_tmpl!r} ({err})") from None
        if isinstance(start_index, bool) or not isinstance(start_index, int) or start_index < 0:
            raise DataError(f'RawframeDataset: start_index (number of the first frame file) must be an integer '
                            f'>= 0, got {start_index!r}')
        self.filename_tmpl = filename_tmpl
        self.start_index = start_index
        super().__init__(ann_file, data_root, data_prefix, classes, multi_label, on_bad_sample, on_bad_video,
                         pipeline, test_mode, serialize_data, lazy_init, indices, max_refetch, storage_options)

    def default_prefix(self) -> dict:
        return {'img': ''}

    def load_data_list(self) -> list[dict]:
        prefix = self.data_prefix['img']
        data_list = []
        for where, (frame_dir, total), label in self._lines(2):
            try:
                total_frames = int(total)
            except ValueError:
                total_frames = -1
            if total_frames <= 0:
                raise DataError(f'{where}: total_frames must be a positive integer, got {total!r} '
                                f'({self.line_format})')
            data_list.append(dict(frame_dir=storage.absolute(storage.join(prefix, frame_dir)),
                                  total_frames=total_frames, filename_tmpl=self.filename_tmpl,
                                  start_index=self.start_index, label=label, multi_label=self.multi_label,
                                  num_classes=self.num_classes, modality='RGB'))
        return data_list
