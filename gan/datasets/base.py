"""What every GAN dataset shares: the gan transform registry, image listing, and folder checks.

GAN datasets list image files once (sorted, so an index always names the same file) and return plain dicts with
``img_path`` / ``img_A_path`` / ``img_B_path`` (and ``label`` / ``attrs``); the pipeline reads the files (see
``gan.transforms``). They derive from ``oars.data.dataset.OarsDataset`` for ``on_bad_sample`` and metainfo.
``classes`` is what the model conditions on where there is a condition (class folders, digits, attributes) and
the domain names (``A``, ``B``) for image-to-image datasets.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from gan.registry import TRANSFORMS
from oars.data import storage
from oars.data.dataset import OarsDataset
from oars.errors import DataFileNotFoundError

IMG_EXTENSIONS: tuple[str, ...] = ('.png', '.jpg', '.jpeg', '.bmp', '.webp', '.tif', '.tiff', '.ppm')


def list_images(folder: str, recursive: bool = False,
                extensions: Sequence[str] = IMG_EXTENSIONS, owner: str = 'dataset') -> list[str]:
    """Image files under ``folder`` (a local folder or a URL; case-insensitive ``extensions``), as paths relative
    to it, sorted. A URL folder is listed in one request (``oars.data.storage.list_dir``).

    Raises ``DataFileNotFoundError`` naming the folder when it is missing or holds no image.
    """
    if not storage.isdir(folder):
        raise DataFileNotFoundError(f'{owner}: image folder not found: {folder}')
    exts = tuple(e.lower() for e in extensions)
    names: list[str] = []
    if recursive or storage.is_url(folder):
        names = [rel for rel in storage.list_dir(folder)
                 if rel.lower().endswith(exts) and (recursive or '/' not in rel.replace(os.sep, '/'))]
    else:
        names = [f for f in os.listdir(folder) if f.lower().endswith(exts) and os.path.isfile(os.path.join(folder, f))]
    if not names:
        raise DataFileNotFoundError(f'{owner}: no images ({", ".join(exts)}) in folder {folder}')
    return sorted(names)


def join_root(data_root: str, path: str) -> str:
    """``path`` under ``data_root`` unless it is absolute (or a URL) or ``data_root`` is empty (mmengine's prefix
    rule); a URL ``data_root`` is joined with ``/``."""
    return path if not data_root or os.path.isabs(path) or storage.is_url(path) else storage.join(data_root, path)


class GANDataset(OarsDataset):
    """``OarsDataset`` whose pipeline is built from the gan ``TRANSFORMS`` registry."""

    transform_registry = TRANSFORMS
