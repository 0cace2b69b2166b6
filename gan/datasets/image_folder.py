"""Class-conditional (or unconditional) images in class folders: ``root/<class>/*.png``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from gan.datasets.base import GANDataset, join_root, list_images
from gan.registry import DATASETS
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError


@DATASETS.register_module()
class ImageFolderGANDataset(GANDataset):
    """Images in ``data_root/img_dir/<class>/`` (any depth below the class folder), one label per image.

    Classes are the sub-folder names, sorted (``classes`` in the config picks and orders a subset; a named class
    without a folder is an error). Data infos: ``img_path`` and ``label`` (int, index into ``classes``). With
    ``with_label=False`` every image below ``img_dir`` is listed without a label (unconditional GANs on a flat
    folder); ``classes`` then defaults to ``('image',)``. ``data_root`` may be a URL (``s3://``, ``memory://``
    ...), read through ``oars.data.storage`` with ``storage_options``.
    """

    def __init__(
        self,
        data_root: str = '',
        img_dir: str = '',
        classes: Sequence[str] | None = None,
        with_label: bool = True,
        pipeline: Sequence[dict | Callable] = (),
        on_bad_sample: str = 'error',
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        self.img_folder = join_root(data_root, img_dir)
        self.with_label = bool(with_label)
        # the folder is read before OarsDataset registers the options: a URL data_root needs them now
        storage.register_options(data_root or '', storage_options, 'ImageFolderGANDataset: storage_options')
        if not storage.isdir(self.img_folder):
            raise DataFileNotFoundError(f'ImageFolderGANDataset: image folder not found: {self.img_folder}')
        if self.with_label:
            found = _class_folders(self.img_folder)
            if not found:
                raise DataError(f'ImageFolderGANDataset: {self.img_folder} has no class sub-folders '
                                f'(expected {self.img_folder}/<class>/*.png; with_label: false lists a flat folder)')
            if classes is None:
                classes = found
            missing = [c for c in classes if c not in found]
            if missing:
                raise DataFileNotFoundError(f'ImageFolderGANDataset: no folder for class(es) {missing} in '
                                            f'{self.img_folder} (class folders there: {found})')
        elif classes is None:
            classes = ('image',)
        super().__init__(classes=classes, pipeline=pipeline, on_bad_sample=on_bad_sample, test_mode=test_mode,
                         data_root=data_root, serialize_data=serialize_data, lazy_init=lazy_init, indices=indices,
                         max_refetch=max_refetch, storage_options=storage_options)

    def load_data_list(self) -> list[dict]:
        """One dict per image: ``img_path`` (and ``label``), classes in ``metainfo['classes']`` order."""
        if not self.with_label:
            return [{'img_path': join_root(self.img_folder, n)}
                    for n in list_images(self.img_folder, recursive=True, owner=type(self).__name__)]
        data_list = []
        for label, name in enumerate(self.metainfo['classes']):
            folder = join_root(self.img_folder, name)
            for rel in list_images(folder, recursive=True, owner=f'{type(self).__name__} class {name!r}'):
                data_list.append({'img_path': join_root(folder, rel), 'label': label})
        return data_list


def _class_folders(folder: str) -> list[str]:
    """The sorted names of the sub-folders of ``folder`` (a local folder, or a URL: the first part of the path of
    each object under it, from one listing)."""
    if storage.is_url(folder):
        return sorted({rel.split('/', 1)[0] for rel in storage.list_dir(folder) if '/' in rel})
    return sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
