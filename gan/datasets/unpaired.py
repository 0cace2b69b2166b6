"""Unpaired two-domain data (CycleGAN): ``trainA``/``trainB`` (``testA``/``testB``), sampled independently."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gan.datasets.base import GANDataset, join_root, list_images
from gan.datasets.paired import check_direction
from gan.registry import DATASETS
from oars.errors import DataError


@DATASETS.register_module()
class UnpairedImageDataset(GANDataset):
    """Images of two domains with no correspondence between them.

    Folders: ``dir_A`` / ``dir_B`` when given, else ``data_root/<split>A`` and ``data_root/<split>B``
    (``split``: ``train`` | ``test``, the CycleGAN layout). The length is ``max(len A, len B)``: index ``i``
    takes A image ``i mod len A`` and a B image drawn independently of it, so every image of the larger domain
    is seen once per epoch. The B draw (``get_data_info``): in training, numpy's global RNG, which
    ``oars.data.worker_seed`` seeds per worker from the saved torch generator, so the pairing changes every
    epoch and a run is reproducible and resumable; in ``test_mode``, ``default_rng([seed, i])``, so evaluation
    always sees the same pairs. ``direction: BtoA`` swaps the domains. Data infos: ``img_A_path``, ``img_B_path``.
    ``data_root`` may be a URL (``s3://``, ``memory://`` ...), read through ``oars.data.storage`` with
    ``storage_options``.
    """

    METAINFO = {'classes': ('A', 'B')}

    def __init__(
        self,
        data_root: str = '',
        split: str = 'train',
        dir_A: str | None = None,
        dir_B: str | None = None,
        direction: str = 'AtoB',
        seed: int = 0,
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
        if split not in ('train', 'test'):
            raise DataError(f"{owner}: split must be 'train' or 'test', got {split!r}")
        self.folder_A = join_root(data_root, dir_A if dir_A is not None else f'{split}A')
        self.folder_B = join_root(data_root, dir_B if dir_B is not None else f'{split}B')
        if self.direction == 'BtoA':
            self.folder_A, self.folder_B = self.folder_B, self.folder_A
        self.seed = int(seed)
        self.paths_B = np.array([], dtype=str)
        super().__init__(pipeline=pipeline, on_bad_sample=on_bad_sample, test_mode=test_mode, data_root=data_root,
                         serialize_data=serialize_data, lazy_init=lazy_init, indices=indices,
                         max_refetch=max_refetch, storage_options=storage_options)

    def load_data_list(self) -> list[dict]:
        """``max(len A, len B)`` dicts holding the A path; the B paths are kept apart (``paths_B``, a numpy
        string array: no per-item Python objects for workers to copy)."""
        owner = type(self).__name__
        names_a = list_images(self.folder_A, recursive=True, owner=f'{owner} domain A')
        names_b = list_images(self.folder_B, recursive=True, owner=f'{owner} domain B')
        self.paths_B = np.array([join_root(self.folder_B, n) for n in names_b])
        length = max(len(names_a), len(names_b))
        return [{'img_A_path': join_root(self.folder_A, names_a[i % len(names_a)]), 'pair_index': i}
                for i in range(length)]

    def b_index(self, idx: int) -> int:
        """The B image paired with sample ``idx`` in this draw (see the class docstring)."""
        if self.test_mode:
            return int(np.random.default_rng([self.seed, idx]).integers(len(self.paths_B)))
        return int(np.random.randint(len(self.paths_B)))

    def get_data_info(self, idx: int) -> dict:
        info = super().get_data_info(idx)
        info['img_B_path'] = str(self.paths_B[self.b_index(info['pair_index'])])
        return info
