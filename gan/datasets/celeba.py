"""CelebA faces with binary attributes (StarGAN, AttGAN, STGAN)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gan.datasets.base import GANDataset, join_root
from gan.datasets.celeba_attrs import read_attr_file, select_attrs
from gan.registry import DATASETS
from oars.data import storage
from oars.errors import DataError

SPLITS: dict[str, int] = {'train': 0, 'val': 1, 'test': 2}
DEFAULT_ATTRS: tuple[str, ...] = ('Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Male', 'Young')


def read_partition(path: str) -> dict[str, int]:
    """``list_eval_partition.txt``: ``name split`` per line (0 train, 1 val, 2 test) -> {name: split} (a local path
    or a URL)."""
    out = {}
    with storage.open_file(path, 'r', encoding='utf-8') as f:
        for n, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or parts[1] not in ('0', '1', '2'):
                raise DataError(f'{path} line {n}: expected "<image name> 0|1|2", got {line.strip()!r}')
            out[parts[0]] = int(parts[1])
    return out


@DATASETS.register_module()
class CelebADataset(GANDataset):
    """CelebA as released: ``data_root/img_align_celeba/*.jpg``, ``list_attr_celeba.txt`` and (optional)
    ``list_eval_partition.txt``.

    ``selected_attrs``: the K attributes the model edits, in this order (they are the dataset's ``classes`` and
    ``attr_names`` in metainfo); an unknown name is an error naming it, the file and the closest valid names.
    Data infos: ``img_path`` and ``attrs`` (float32 [K], 1 where the file says 1, 0 for -1). ``data_root`` may be
    a URL (``s3://``, ``memory://`` ...), read with ``storage_options`` through ``oars.data.storage``: the two
    text files once, the image folder checked with one request, each image when its sample is read.
    ``split``: ``train`` | ``val`` | ``test``, from the partition file when it exists; without it the last
    ``num_test`` images (in the attribute file's order, StarGAN's rule) are ``test`` (``val`` is the same
    images) and the others ``train``.
    """

    def __init__(
        self,
        data_root: str = '',
        img_dir: str = 'img_align_celeba',
        attr_file: str = 'list_attr_celeba.txt',
        partition_file: str = 'list_eval_partition.txt',
        selected_attrs: Sequence[str] = DEFAULT_ATTRS,
        split: str = 'train',
        num_test: int = 2000,
        pipeline: Sequence[dict | Callable] = (),
        on_bad_sample: str = 'error',
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        if split not in SPLITS:
            raise DataError(f'CelebADataset: split must be one of {list(SPLITS)}, got {split!r}')
        if isinstance(selected_attrs, str) or not selected_attrs:
            raise DataError(f'CelebADataset: selected_attrs must be a non-empty list of attribute names, '
                            f'got {selected_attrs!r}')
        self.img_folder = join_root(data_root, img_dir)
        self.attr_path = join_root(data_root, attr_file)
        self.partition_path = join_root(data_root, partition_file)
        self.split = split
        self.num_test = int(num_test)
        attrs = tuple(str(a) for a in selected_attrs)
        super().__init__(classes=attrs, extra_metainfo={'attr_names': attrs}, pipeline=pipeline,
                         on_bad_sample=on_bad_sample, test_mode=test_mode, data_root=data_root,
                         serialize_data=serialize_data, lazy_init=lazy_init, indices=indices,
                         max_refetch=max_refetch, storage_options=storage_options)

    def _split_mask(self, names: list[str]) -> np.ndarray:
        """Boolean [M]: which of the attribute file's images belong to ``split``."""
        if storage.isfile(self.partition_path):
            part = read_partition(self.partition_path)
            missing = [n for n in names if n not in part]
            if missing:
                raise DataError(f'{self.partition_path} has no split for {len(missing)} image(s) of '
                                f'{self.attr_path}, e.g. {missing[:3]}')
            return np.array([part[n] for n in names]) == SPLITS[self.split]
        test = np.zeros(len(names), dtype=bool)
        test[max(len(names) - self.num_test, 0):] = True
        return ~test if self.split == 'train' else test

    def load_data_list(self) -> list[dict]:
        """Read the attribute (and partition) file once; one dict per image of ``split``."""
        names, all_attrs, values = read_attr_file(self.attr_path)
        cols = select_attrs(self.attr_path, all_attrs, self.metainfo['attr_names'])
        if not storage.isdir(self.img_folder):
            raise DataError(f'CelebADataset: image folder not found: {self.img_folder}')
        chosen = (values[:, cols] > 0).astype(np.float32)
        keep = np.flatnonzero(self._split_mask(names))
        if not len(keep):
            raise DataError(f'CelebADataset: split {self.split!r} of {self.attr_path} is empty')
        return [{'img_path': storage.join(self.img_folder, names[i]), 'attrs': chosen[i]} for i in keep]

    def get_data_info(self, idx: int) -> dict:
        """The stored info plus ``attr_names`` (for ``PackGANInputs``' metainfo)."""
        info = super().get_data_info(idx)
        info['attr_names'] = self.metainfo['attr_names']
        return info
