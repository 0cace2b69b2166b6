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
from oars.data.dataset import OarsDataset
from oars.errors import DataFileNotFoundError

IMG_EXTENSIONS: tuple[str, ...] = ('.png', '.jpg', '.jpeg', '.bmp', '.webp', '.tif', '.tiff', '.ppm')


def list_images(folder: str, recursive: bool = False,
                extensions: Sequence[str] = IMG_EXTENSIONS, owner: str = 'dataset') -> list[str]:
    """Image files under ``folder`` (case-insensitive ``extensions``), as paths relative to it, sorted.

    Raises ``DataFileNotFoundError`` naming the folder when it is missing or holds no image.
    """
    if not os.path.isdir(folder):
        raise DataFileNotFoundError(f'{owner}: image folder not found: {folder}')
    exts = tuple(e.lower() for e in extensions)
    names: list[str] = []
    if recursive:
        for root, dirs, files in os.walk(folder, followlinks=True):
            dirs.sort()
            rel = os.path.relpath(root, folder)
            names += [f if rel == '.' else os.path.join(rel, f) for f in files if f.lower().endswith(exts)]
    else:
        names = [f for f in os.listdir(folder) if f.lower().endswith(exts) and os.path.isfile(os.path.join(folder, f))]
    if not names:
        raise DataFileNotFoundError(f'{owner}: no images ({", ".join(exts)}) in folder {folder}')
    return sorted(names)


def join_root(data_root: str, path: str) -> str:
    """``path`` under ``data_root`` unless it is absolute or ``data_root`` is empty (mmengine's prefix rule)."""
    return path if not data_root or os.path.isabs(path) else os.path.join(data_root, path)


class GANDataset(OarsDataset):
    """``OarsDataset`` whose pipeline is built from the gan ``TRANSFORMS`` registry."""

    transform_registry = TRANSFORMS
