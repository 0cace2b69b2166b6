"""Semantic segmentation dataset over an image folder and a parallel label-map folder."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from oars.data import storage
from oars.data.dataset import OarsDataset
from oars.errors import DataError, DataFileNotFoundError
from segmentation.registry import DATASETS, TRANSFORMS


def _scan(folder: str, suffix: str) -> list[str]:
    """Paths under ``folder`` (recursive, relative, sorted) whose name ends with ``suffix``, suffix removed; a URL
    folder is listed through ``oars.data.storage`` (one listing, ``/``-separated names)."""
    if storage.is_url(folder):
        return sorted(name[: -len(suffix)] for name in storage.list_dir(folder)
                      if name.endswith(suffix) and len(posixpath.basename(name)) > len(suffix))
    stems = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs.sort()
        rel = os.path.relpath(root, folder)
        for name in files:
            if name.endswith(suffix) and len(name) > len(suffix):
                stem = name[: -len(suffix)]
                stems.append(stem if rel == '.' else os.path.join(rel, stem))
    return sorted(stems)


def read_name_list(path: str) -> list[str]:
    """The non-empty, stripped lines of a split file (image names without suffix, e.g. VOC's
    ``ImageSets/Segmentation/train.txt``, a local path or a URL); errors name the file when it is missing or lists
    nothing."""
    if not storage.isfile(path):
        raise DataFileNotFoundError(f'split file not found: {path}')
    with storage.open_file(path, 'r', encoding='utf-8') as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise DataError(f'split file {path} lists no images')
    return names


@DATASETS.register_module()
class SegDataset(OarsDataset):
    """Images in ``data_root/img_dir`` and label maps in ``data_root/ann_dir`` with the same relative
    name (``<name><img_suffix>`` -> ``<name><seg_map_suffix>``), or the basenames listed in ``split``.

    ``classes`` (names) is required unless the subclass's ``METAINFO`` has them; ``palette`` (RGB
    per class) defaults to a fixed distinct one. Without ``ann_dir`` the dataset lists images only
    (inference). Every data info carries ``num_classes``, ``ignore_index`` and
    ``reduce_zero_label`` for the pipeline. ``on_bad_sample`` (``error`` | ``skip``): see ``oars.data.dataset``.
    Subclasses (a layout such as VOC or Cityscapes) change only the defaults of the folders and suffixes.
    """

    METAINFO: dict = {}
    transform_registry = TRANSFORMS
    classes_hint = 'the list of class names, background included'

    def __init__(
        self,
        data_root: str = '',
        img_dir: str = '',
        ann_dir: str | None = None,
        img_suffix: str = '.jpg',
        seg_map_suffix: str = '.png',
        classes: Sequence[str] | None = None,
        palette: Sequence[Sequence[int]] | None = None,
        ignore_index: int = 255,
        reduce_zero_label: bool = False,
        split: str | None = None,
        on_bad_sample: str = 'error',
        pipeline: Sequence[dict | Callable] = (),
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        self.img_suffix = img_suffix
        self.seg_map_suffix = seg_map_suffix
        self.ignore_index = int(ignore_index)
        self.reduce_zero_label = bool(reduce_zero_label)
        prefix = {'img_path': img_dir} if ann_dir is None else {'img_path': img_dir, 'seg_map_path': ann_dir}
        super().__init__(
            classes=classes, palette=palette, pipeline=pipeline, on_bad_sample=on_bad_sample, test_mode=test_mode,
            extra_metainfo=dict(ignore_index=self.ignore_index, reduce_zero_label=self.reduce_zero_label),
            ann_file=split or '', data_root=data_root or '', data_prefix=prefix, indices=indices,
            serialize_data=serialize_data, lazy_init=lazy_init, max_refetch=max_refetch,
            storage_options=storage_options)

    @property
    def num_classes(self) -> int:
        return len(self.metainfo['classes'])

    def _names(self, img_dir: str) -> list[str]:
        if self.ann_file:
            return read_name_list(self.ann_file)
        if not storage.isdir(img_dir):
            raise DataFileNotFoundError(f'image folder not found: {img_dir}')
        names = _scan(img_dir, self.img_suffix)
        if not names:
            raise DataFileNotFoundError(f"no images ending with '{self.img_suffix}' under {img_dir}")
        return names

    def data_info(self, img_path: str, seg_map_path: str | None) -> dict:
        """The data info of one sample: its files plus what the pipeline reads from the dataset
        (``num_classes``, ``ignore_index``, ``reduce_zero_label``)."""
        return dict(img_path=img_path, seg_map_path=seg_map_path, num_classes=self.num_classes,
                    ignore_index=self.ignore_index, reduce_zero_label=self.reduce_zero_label)

    def pair_infos(self, names: Sequence[str], img_dir: str, ann_dir: str | None,
                   listed_in: str | None = None) -> list[dict]:
        """Data infos of ``names`` (relative, without suffix): ``img_dir/<name><img_suffix>`` and, with
        ``ann_dir``, ``ann_dir/<name><seg_map_suffix>``. A missing label map is an error naming both files; a
        missing image too when the names come from a list file (``listed_in``, named in the message)."""
        infos = []
        for name in names:
            img_path = storage.join(img_dir, name + self.img_suffix)
            if listed_in and not storage.listed_isfile(img_path):
                raise DataFileNotFoundError(f'image {img_path} listed in {listed_in} not found')
            seg_map_path = None
            if ann_dir is not None:
                seg_map_path = storage.join(ann_dir, name + self.seg_map_suffix)
                if not storage.listed_isfile(seg_map_path):
                    raise DataFileNotFoundError(f'label map {seg_map_path} not found for image {img_path}')
            infos.append(self.data_info(img_path, seg_map_path))
        return infos

    def get_cat_ids(self, idx: int) -> list[int]:
        """The classes with at least one labelled pixel in image ``idx``'s label map (background included,
        ignored pixels not; ``reduce_zero_label`` applied), for ``ClassAwareSampler``: the map is read once
        (as ``tools/class_weights.py`` counts it) and the answer cached on the dataset. An image without a label
        map has none.

        Raises:
            DataError: the label map holds a value outside the classes, naming the file.
        """
        from segmentation.datasets.class_frequency import count_label_map

        cache = self.__dict__.setdefault('_cat_ids_cache', {})
        if idx not in cache:
            info = self.get_data_info(idx)
            path = info.get('seg_map_path')
            counts = [] if path is None else count_label_map(path, self.num_classes, self.ignore_index,
                                                             self.reduce_zero_label)
            cache[idx] = [int(c) for c in np.flatnonzero(counts)]
        return cache[idx]

    def load_data_list(self) -> list[dict]:
        """List every image (and its label map) once, in sorted order; fail on a missing label."""
        img_dir = self.data_prefix['img_path']
        return self.pair_infos(self._names(img_dir), img_dir, self.data_prefix.get('seg_map_path'),
                               self.ann_file or None)
