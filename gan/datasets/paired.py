"""Paired image-to-image data (Pix2Pix): side-by-side A|B files, or two aligned folders with the same names."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from gan.datasets.base import GANDataset, join_root, list_images
from gan.registry import DATASETS
from oars.errors import DataError

DIRECTIONS: tuple[str, ...] = ('AtoB', 'BtoA')


def check_direction(owner: str, direction: str) -> str:
    if direction not in DIRECTIONS:
        raise DataError(f'{owner}: direction must be one of {list(DIRECTIONS)}, got {direction!r}')
    return direction


@DATASETS.register_module()
class PairedImageDataset(GANDataset):
    """Pairs of aligned images, in one of two layouts.

    * ``img_dir``: each file holds A (left half) and B (right half) side by side, as the pix2pix datasets
      (facades, maps, edges2shoes) ship them. Data infos: ``img_path`` and ``pair_order`` (``AB`` or ``BA``);
      ``LoadPairedImageFromFile`` splits the file.
    * ``dir_A`` and ``dir_B``: two folders whose files have the same relative names (``labels/0001.png`` with
      ``images/0001.png``); a name in one folder but not the other is an error naming both. Data infos:
      ``img_A_path``, ``img_B_path``; ``LoadGANImageFromFile(keys=[img_A, img_B])`` reads them, and an A/B
      size mismatch is an error naming both files and sizes.

    ``direction``: ``AtoB`` (the generator maps A to B) or ``BtoA`` (the roles are swapped here, so models and
    pipelines always translate ``img_A`` -> ``img_B``). All folders are relative to ``data_root``, which may be a URL
    (``s3://``, ``memory://`` ...: read through ``oars.data.storage`` with ``storage_options``).
    """

    METAINFO = {'classes': ('A', 'B')}

    def __init__(
        self,
        data_root: str = '',
        img_dir: str | None = None,
        dir_A: str | None = None,
        dir_B: str | None = None,
        direction: str = 'AtoB',
        pipeline: Sequence[dict | Callable] = (),
        on_bad_sample: str = 'error',
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        owner = type(self).__name__
        self.direction = check_direction(owner, direction)
        two_folders = dir_A is not None or dir_B is not None
        if (img_dir is not None) == two_folders or (two_folders and None in (dir_A, dir_B)):
            raise DataError(f'{owner}: give either img_dir (side-by-side A|B files) or both dir_A and dir_B '
                            f'(two aligned folders), got img_dir={img_dir!r}, dir_A={dir_A!r}, dir_B={dir_B!r}')
        self.img_folder = None if img_dir is None else join_root(data_root, img_dir)
        self.folders = None if dir_A is None else (join_root(data_root, dir_A), join_root(data_root, dir_B))
        super().__init__(pipeline=pipeline, on_bad_sample=on_bad_sample, test_mode=test_mode, data_root=data_root,
                         serialize_data=serialize_data, lazy_init=lazy_init, indices=indices,
                         max_refetch=max_refetch, storage_options=storage_options)

    def load_data_list(self) -> list[dict]:
        """One dict per pair, sorted by name."""
        owner = type(self).__name__
        if self.img_folder is not None:
            order = 'AB' if self.direction == 'AtoB' else 'BA'
            return [{'img_path': join_root(self.img_folder, n), 'pair_order': order}
                    for n in list_images(self.img_folder, recursive=True, owner=owner)]
        dir_a, dir_b = self.folders
        names_a = list_images(dir_a, recursive=True, owner=f'{owner} dir_A')
        names_b = list_images(dir_b, recursive=True, owner=f'{owner} dir_B')
        stems_b = {os.path.splitext(n)[0]: n for n in names_b}
        stems_a = {os.path.splitext(n)[0] for n in names_a}
        only_a = [n for n in names_a if os.path.splitext(n)[0] not in stems_b]
        only_b = [n for n in names_b if os.path.splitext(n)[0] not in stems_a]
        if only_a or only_b:
            raise DataError(f'{owner}: dir_A {dir_a} and dir_B {dir_b} must hold the same file names; only in '
                            f'dir_A: {only_a[:5]}{" ..." if len(only_a) > 5 else ""} ({len(only_a)}), only in '
                            f'dir_B: {only_b[:5]}{" ..." if len(only_b) > 5 else ""} ({len(only_b)})')
        data_list = []
        for name in names_a:
            a, b = join_root(dir_a, name), join_root(dir_b, stems_b[os.path.splitext(name)[0]])
            if self.direction == 'BtoA':
                a, b = b, a
            data_list.append({'img_A_path': a, 'img_B_path': b})
        return data_list
