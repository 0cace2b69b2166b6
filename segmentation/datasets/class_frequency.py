"""Per-class pixel counts of a dataset's label maps and median-frequency class weights (``tools/class_weights.py``).

Why: on imbalanced data (road vs. bicycle) plain cross-entropy under-trains the rare classes; median-frequency
balancing (Eigen & Fergus, ICCV 2015) weights class c by ``median(freq) / freq_c`` with ``freq_c`` the pixels of c
divided by the pixels of the images where c appears, and is what ``CrossEntropyLoss(class_weight=...)`` takes.
The label maps are read exactly as training reads them (``read_label_map``: palette PNGs as indices, EXIF
orientation; ``reduce_zero_label`` applied), but without the rest of the pipeline: counting needs no image.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mmengine.registry import DefaultScope
from torch.utils.data import DataLoader, Dataset

from oars.data.check import leaf_dataset_configs
from oars.data.transforms.loading import read_label_map
from oars.errors import DataError, OarsError
from segmentation.registry import DATASETS
from segmentation.transforms import check_label_values, reduce_zero


class UnseenClassWarning(UserWarning):
    """A class has no labelled pixel in the label maps counted, so its weight is 0."""


@dataclass
class LabelSource:
    """What counting one dataset needs: its label-map paths, how to read them, and its class names."""

    name: str
    seg_map_paths: list[str]
    classes: list[str]
    ignore_index: int
    reduce_zero_label: bool


@dataclass
class ClassFrequency:
    """Counts over ``num_images`` label maps: ``pixels[c]`` labelled c; ``image_pixels[c]`` labelled (not
    ignored) pixels of the images where c appears (both int64 [C]); ``weights`` float64 [C], 0 for an unseen class."""

    classes: list[str]
    pixels: np.ndarray
    image_pixels: np.ndarray
    num_images: int
    weights: np.ndarray

    @property
    def unseen(self) -> list[str]:
        return [name for name, n in zip(self.classes, self.pixels) if n == 0]


def count_label_map(path: str, num_classes: int, ignore_index: int, reduce_zero_label: bool) -> np.ndarray:
    """Pixels per class of one label map: int64 [C]. Ignored pixels do not count; any other value outside
    0..C-1 is a ``DataError`` naming the file (as ``LoadSegAnnotations`` raises in training)."""
    seg = read_label_map(path)
    values = np.flatnonzero(np.bincount(seg.ravel(), minlength=1)) if seg.dtype == np.uint8 else np.unique(seg)
    check_label_values(values, path, num_classes, ignore_index, reduce_zero_label)
    if reduce_zero_label:
        seg = reduce_zero(seg, ignore_index)
    labels = seg[seg != ignore_index].astype(np.int64, copy=False)
    return np.bincount(labels, minlength=num_classes)[:num_classes]


def median_frequency_weights(pixels: np.ndarray, image_pixels: np.ndarray) -> np.ndarray:
    """``median(freq) / freq_c`` with ``freq_c = pixels[c] / image_pixels[c]``; the median runs over the classes that
    appear, and a class that never appears gets 0 (no pixel to weight). float64 [C]."""
    pixels = np.asarray(pixels, dtype=np.float64)
    seen = pixels > 0
    weights = np.zeros_like(pixels)
    if not seen.any():
        return weights
    freq = pixels[seen] / np.asarray(image_pixels, dtype=np.float64)[seen]
    weights[seen] = np.median(freq) / freq
    return weights


class _Counter(Dataset):
    """One label map per item -> (counts [C], None) or (None, the error naming the file), so that a worker's
    failure reaches the main process as our message, not as a DataLoader traceback."""

    def __init__(self, source: LabelSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return len(self.source.seg_map_paths)

    def __getitem__(self, idx: int) -> tuple[np.ndarray | None, str | None]:
        path = self.source.seg_map_paths[idx]
        s = self.source
        try:
            return count_label_map(path, len(s.classes), s.ignore_index, s.reduce_zero_label), None
        except OarsError as err:
            return None, str(err)
        except Exception as err:  # noqa: BLE001 - anything else still names the file
            return None, f'could not count the labels of {path}: {type(err).__name__}: {err}'


def _first(batch: list):
    return batch[0]


def class_frequency(sources: Sequence[LabelSource], num_workers: int = 0, progress: bool = True) -> ClassFrequency:
    """Count every label map of ``sources`` (all with the same classes) in ``num_workers`` DataLoader workers
    (0: in this process) with a tqdm bar over images; warn (``UnseenClassWarning``) naming each class never seen."""
    from tqdm import tqdm

    classes = sources[0].classes
    for s in sources[1:]:
        if s.classes != classes:
            raise DataError(f'{s.name} has the classes {s.classes} but {sources[0].name} has {classes}; class '
                            'weights need one list of classes')
    pixels = np.zeros(len(classes), np.int64)
    image_pixels = np.zeros(len(classes), np.int64)
    num_images = 0
    for source in sources:
        counter = _Counter(source)
        loader = DataLoader(counter, batch_size=1, shuffle=False, num_workers=num_workers, collate_fn=_first)
        for counts, error in tqdm(loader, total=len(counter), desc=f'counting labels ({source.name})', unit='image',
                                  dynamic_ncols=True, disable=not progress):
            if error is not None:
                raise DataError(error)
            pixels += counts
            image_pixels[counts > 0] += counts.sum()
            num_images += 1
    result = ClassFrequency(classes, pixels, image_pixels, num_images, median_frequency_weights(pixels, image_pixels))
    for name in result.unseen:
        warnings.warn(f'class {name!r} has no labelled pixel in the {num_images} label maps counted; its weight is 0 '
                      '(it is never trained against). Check the class list and the label values.',
                      UnseenClassWarning, stacklevel=2)
    return result


def label_sources(cfg, split: str = 'train', ignore_index: int | None = None) -> list[LabelSource]:
    """The datasets of ``cfg``'s ``<split>_dataloader`` (the inner ones of a wrapper) built through the registry with
    no pipeline, as label sources. ``ignore_index`` overrides the datasets' own. ``DataError`` for a config without
    that dataset or a dataset without label maps."""
    where = getattr(cfg, 'filename', None) or 'the config'
    loader_cfg = cfg.get(f'{split}_dataloader')
    if not loader_cfg or not isinstance(loader_cfg.get('dataset'), dict):
        raise DataError(f'{where} has no {split}_dataloader.dataset; class weights are counted on the label maps of '
                        f'the {split} dataset (choose another with --split)')
    sources = []
    for leaf in leaf_dataset_configs(copy.deepcopy(loader_cfg['dataset'])):
        leaf = dict(leaf, pipeline=[])
        with DefaultScope.overwrite_default_scope(cfg.get('default_scope') or 'segmentation'):
            dataset = DATASETS.build(leaf)
        dataset.full_init()
        infos = [dataset.get_data_info(i) for i in range(len(dataset))]
        paths = [info.get('seg_map_path') for info in infos]
        name = f'{split} {leaf.get("type")}'
        if not paths or any(p is None for p in paths):
            raise DataError(f'{name} in {where} lists no label maps (no ann_dir?); class weights need labelled images')
        meta = dataset.metainfo
        sources.append(LabelSource(
            name=name, seg_map_paths=[os.fspath(p) for p in paths], classes=list(meta['classes']),
            ignore_index=int(ignore_index if ignore_index is not None else infos[0].get('ignore_index', 255)),
            reduce_zero_label=bool(infos[0].get('reduce_zero_label', False))))
    return sources


WEIGHTED_LOSSES = ('CrossEntropyLoss', 'OhemCrossEntropyLoss')


def weight_key(model_cfg) -> tuple[str, list | None]:
    """Where ``class_weight`` goes in ``model.decode_head.loss_decode``: (the dotted ``-o`` key; None for one loss
    dict, else the loss list with ``class_weight`` placeholders on the first CrossEntropyLoss / OhemCrossEntropyLoss,
    since a pasted list replaces the inherited one instead of merging into it)."""
    head = (model_cfg or {}).get('decode_head') or {}
    losses = head.get('loss_decode')
    if not isinstance(losses, list | tuple):
        return 'model.decode_head.loss_decode.class_weight', None
    losses = [dict(loss) for loss in losses]
    index = next((i for i, loss in enumerate(losses) if loss.get('type') in WEIGHTED_LOSSES), None)
    if index is None:
        return 'model.decode_head.loss_decode.class_weight', None
    return f'model.decode_head.loss_decode.{index}.class_weight', losses


def format_weights(result: ClassFrequency, split: str = 'train', model_cfg=None, digits: int = 4) -> str:
    """A table of the counts and weights, then the YAML to paste into the config and the ``-o`` form, shaped after
    ``model_cfg``'s ``decode_head.loss_decode`` (one loss or a list)."""
    width = max(len(c) for c in ['class', *result.classes])
    lines = [f'{"class":<{width}}  {"pixels":>12}  {"freq":>8}  weight']
    for name, n, total, w in zip(result.classes, result.pixels, result.image_pixels, result.weights):
        freq = f'{n / total:.4f}' if total else '-'
        lines.append(f'{name:<{width}}  {int(n):>12}  {freq:>8}  {w:.{digits}f}')
    weights = [round(float(w), digits) for w in result.weights]
    values = '[' + ', '.join(str(w) for w in weights) + ']'
    key, losses = weight_key(model_cfg)
    lines += ['', f'# median-frequency class weights from {result.num_images} {split} label maps; paste into the '
              'config:', 'model:', '  decode_head:']
    if losses is None:
        lines += ['    loss_decode:', f'      class_weight: {values}']
    else:
        index = int(key.split('.')[3])
        lines.append('    loss_decode:')
        for i, loss in enumerate(losses):
            entry = dict(loss, class_weight=weights) if i == index else loss
            lines.append('      - {' + ', '.join(f'{k}: {_flow(v)}' for k, v in entry.items()) + '}')
    lines.append(f'# or on the command line: -o {key}="{values}"')
    return '\n'.join(lines)


def _flow(value) -> str:
    """A YAML flow value of a plain config value (lists of numbers, names, numbers, booleans)."""
    if isinstance(value, list | tuple):
        return '[' + ', '.join(_flow(v) for v in value) + ']'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if value is None:
        return 'null'
    return str(value)
