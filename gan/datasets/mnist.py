"""MNIST (and Fashion-MNIST, KMNIST: the same IDX files) read with numpy, once; from a local folder (memory-mapped
when uncompressed) or a URL ``data_root`` (``s3://``, ``memory://`` ...: each file read whole through
``oars.data.storage`` and held in memory)."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gan.datasets.base import GANDataset
from gan.registry import DATASETS
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError, OarsError

IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
SPLIT_PREFIX = {'train': 'train', 'test': 't10k'}


def find_idx_file(folder: str, stem: str) -> str:
    """``folder/stem`` or ``folder/stem.gz``, whichever exists (a local folder or a URL); ``DataFileNotFoundError``
    naming both otherwise."""
    for name in (stem, stem + '.gz'):
        path = storage.join(folder, name)
        if storage.isfile(path):
            return path
    raise DataFileNotFoundError(f'MNISTDataset: neither {storage.join(folder, stem)} nor its .gz found')


def _open_idx(path: str):
    """The IDX file ``path`` opened for reading, decompressed when its name ends with ``.gz``: a local file, or a
    URL's bytes read whole (a missing object is ``DataFileNotFoundError`` naming the URL)."""
    gz = path.endswith('.gz')
    if not storage.is_url(path):
        return gzip.open(path, 'rb') if gz else open(path, 'rb')
    try:
        raw = io.BytesIO(storage.read_bytes(path))
    except FileNotFoundError:
        raise DataFileNotFoundError(f'MNISTDataset: {path} not found') from None
    return gzip.GzipFile(fileobj=raw, mode='rb') if gz else raw


def read_idx(path: str, magic: int) -> np.ndarray:
    """The uint8 array of an IDX file (gzip-compressed when its name ends with ``.gz``).

    Args:
        path: the file (a local path or a URL); magic: the expected magic number (2051 images [N, H, W], 2049
            labels [N]).

    Returns:
        uint8 [N, H, W] for images, [N] for labels (a read-only memory map for uncompressed local files).

    Raises ``DataError`` naming the file for a wrong magic number or a size that disagrees with the header.
    """
    ndim = magic & 0xFF
    in_memory = path.endswith('.gz') or storage.is_url(path)
    try:
        with _open_idx(path) as f:
            head = f.read(4)
            found = int.from_bytes(head, 'big') if len(head) == 4 else None
            dims = f.read(4 * ndim) if found == magic else b''
            body = f.read() if found == magic and in_memory else None
    except OarsError:
        raise
    except (OSError, EOFError) as err:
        raise DataError(f'MNISTDataset: could not read {path}: {err}') from None
    if found != magic:
        kind = 'images' if magic == IMAGES_MAGIC else 'labels'
        raise DataError(f'MNISTDataset: {path} has magic number {found}, expected {magic} (an IDX {kind} file); '
                        f'is it the right file, and decompressed if it does not end with .gz?')
    if len(dims) < 4 * ndim:
        raise DataError(f'MNISTDataset: {path} is too short for an IDX header ({4 + len(dims)} bytes)')
    header = head + dims
    shape = tuple(int.from_bytes(dims[4 * i: 4 + 4 * i], 'big') for i in range(ndim))
    count = int(np.prod(shape))
    if body is None:
        size = os.path.getsize(path) - len(header)
        if size != count:
            raise DataError(f'MNISTDataset: {path} holds {size} data bytes, its header says {shape} = {count}')
        return np.memmap(path, dtype=np.uint8, mode='r', offset=len(header), shape=shape)
    if len(body) != count:
        raise DataError(f'MNISTDataset: {path} holds {len(body)} data bytes, its header says {shape} = {count}')
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


@DATASETS.register_module()
class MNISTDataset(GANDataset):
    """The IDX files of MNIST in ``data_root``: ``{train,t10k}-images-idx3-ubyte[.gz]`` and ``-labels-idx1-ubyte``.

    ``split``: ``train`` | ``test``. The images are read once into memory (or memory-mapped when uncompressed and
    local); ``data_root`` may be a URL, read with ``storage_options`` (docs/data.md);
    each data info carries ``img`` (uint8 [28, 28], or [28, 28, 3] with ``color_type: rgb``: the grey value in
    every channel), ``label``, ``img_shape``/``ori_shape`` and ``img_path`` = ``<images file>[<index>]`` (for
    messages), so a pipeline starts at the geometric transforms, with no loading step.
    """

    METAINFO = {'classes': tuple(str(d) for d in range(10))}

    def __init__(
        self,
        data_root: str = '',
        split: str = 'train',
        color_type: str = 'grayscale',
        classes: Sequence[str] | None = None,
        pipeline: Sequence[dict | Callable] = (),
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        if split not in SPLIT_PREFIX:
            raise DataError(f'MNISTDataset: split must be one of {list(SPLIT_PREFIX)}, got {split!r}')
        if color_type not in ('grayscale', 'rgb'):
            raise DataError(f"MNISTDataset: color_type must be 'grayscale' or 'rgb', got {color_type!r}")
        self.split = split
        self.color_type = color_type
        self.images: np.ndarray | None = None
        super().__init__(classes=classes, pipeline=pipeline, test_mode=test_mode, data_root=data_root,
                         serialize_data=serialize_data, lazy_init=lazy_init, indices=indices,
                         max_refetch=max_refetch, storage_options=storage_options)

    def load_data_list(self) -> list[dict]:
        """Read both IDX files; one dict per image (index and label; the pixels stay in ``self.images``)."""
        prefix = SPLIT_PREFIX[self.split]
        img_file = find_idx_file(self.data_root, f'{prefix}-images-idx3-ubyte')
        lbl_file = find_idx_file(self.data_root, f'{prefix}-labels-idx1-ubyte')
        self.images = read_idx(img_file, IMAGES_MAGIC)
        labels = np.asarray(read_idx(lbl_file, LABELS_MAGIC))
        if len(labels) != len(self.images):
            raise DataError(f'MNISTDataset: {img_file} holds {len(self.images)} images but {lbl_file} holds '
                            f'{len(labels)} labels')
        num_classes = len(self.metainfo['classes'])
        if labels.size and int(labels.max()) >= num_classes:
            raise DataError(f'MNISTDataset: {lbl_file} has label {int(labels.max())}, but there are only '
                            f'{num_classes} classes {list(self.metainfo["classes"])}')
        return [{'img_path': f'{img_file}[{i}]', 'mnist_index': i, 'label': int(lab)}
                for i, lab in enumerate(labels.tolist())]

    def get_data_info(self, idx: int) -> dict:
        """The stored info plus the image itself (a copy) and its shape."""
        info = super().get_data_info(idx)
        img = np.array(self.images[info['mnist_index']])
        if self.color_type == 'rgb':
            img = np.repeat(img[..., None], 3, axis=2)
        info.update(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])
        return info
