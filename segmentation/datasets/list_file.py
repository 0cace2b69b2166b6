"""Segmentation samples listed in a text file, one ``image_path label_path`` pair per line (PaddleSeg's format)."""

from __future__ import annotations

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError
from segmentation.datasets.seg_dataset import SegDataset
from segmentation.registry import DATASETS

# SegDataset arguments that a list file replaces (paths come from its lines).
_FOLDER_ARGS = ('img_dir', 'ann_dir', 'img_suffix', 'seg_map_suffix', 'split')


@DATASETS.register_module()
class ListFileSegDataset(SegDataset):
    """Pairs read from ``list_file`` (relative to ``data_root``, like the paths on its lines), as PaddleSeg's
    ``Dataset(dataset_root, train_path)`` reads them::

        images/a.jpg labels/a.png
        images/b.jpg labels/b.png

    ``separator`` splits a line (default: any whitespace; give e.g. ``'\\t'`` or ``','`` when paths hold
    spaces). A list of images alone (one path a line) is a test list: samples without label maps, for
    inference. Every line must have the same number of fields; a malformed line, a line of another kind
    than the first, or a missing file is an error naming the list file and the line number.
    Other arguments: see ``SegDataset`` (``classes`` required).
    """

    def __init__(self, list_file: str = '', separator: str | None = None, **kwargs) -> None:
        given = [k for k in _FOLDER_ARGS if k in kwargs]
        if given:
            raise DataError(f'ListFileSegDataset: {given} do not apply; the image and label paths come from the '
                            'lines of list_file (relative to data_root)')
        if not list_file or not isinstance(list_file, str):
            raise DataError(f"ListFileSegDataset: 'list_file' must be the path of the list (relative to "
                            f'data_root), got {list_file!r}')
        if separator == '':
            raise DataError("ListFileSegDataset: separator must be None (any whitespace) or a non-empty string")
        self.separator = separator
        super().__init__(split=list_file, img_dir='', ann_dir=None, img_suffix='', seg_map_suffix='', **kwargs)

    def _fields(self, line: str, where: str) -> list[str]:
        parts = line.split(self.separator) if self.separator is not None else line.split()
        parts = [p.strip() for p in parts]
        if not 1 <= len(parts) <= 2 or not all(parts):
            sep = 'whitespace' if self.separator is None else repr(self.separator)
            hint = '; paths with spaces need a separator such as "\\t"' if self.separator is None else ''
            raise DataError(f'{where}: expected "image_path label_path" (or an image path alone in a test list) '
                            f'separated by {sep}, got {len(parts)} field(s) in {line!r}{hint}')
        return parts

    def load_data_list(self) -> list[dict]:
        """One data info per non-empty line, in file order; every listed file must exist."""
        list_file = self.ann_file
        if not storage.isfile(list_file):
            raise DataFileNotFoundError(f'ListFileSegDataset: list file not found: {list_file}')
        root = self.data_root or ''
        infos: list[dict] = []
        width = None
        with storage.open_file(list_file, 'r', encoding='utf-8') as f:
            for number, raw in enumerate(f, start=1):
                line = raw.rstrip('\r\n')
                if not line.strip():
                    continue
                where = f'{list_file} line {number}'
                parts = self._fields(line, where)
                if width is None:
                    width = len(parts)
                elif len(parts) != width:
                    kind = {1: 'an image alone', 2: 'an image and a label map'}
                    raise DataError(f'{where}: {kind[len(parts)]}, but the first line lists {kind[width]}; '
                                    'expected every line alike (a test list has images alone)')
                paths = [storage.join(root, p) for p in parts]
                for what, path in zip(('image', 'label map'), paths):
                    if not storage.listed_isfile(path):  # a bucket folder: listed once, not one request per file
                        raise DataFileNotFoundError(f'{where}: {what} {path} not found')
                infos.append(self.data_info(paths[0], paths[1] if width == 2 else None))
        if not infos:
            raise DataError(f'ListFileSegDataset: list file {list_file} lists no samples')
        return infos
