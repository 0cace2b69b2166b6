"""The box sizes a detector trains on, read from a config: its training dataset's annotations, rescaled as the
training pipeline's resize step rescales the images (anchors live in input pixels).

Only the resize is simulated: flips, 90-degree turns (which swap w and h), crops and mosaics change the sizes
the model sees too; fit on data augmented that way with care. Ignored boxes (crowd, difficult) are left out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
from mmengine.config import Config
from mmengine.registry import DefaultScope

from detection.registry import DATASETS
from oars.config.errors import ConfigError
from oars.data.check import leaf_dataset_configs
from oars.data.transforms.geometric import rescale_size, to_pair
from oars.errors import DataError

RESIZE_STEPS = ('Resize', 'RandomResize')


@dataclass(frozen=True)
class Scaling:
    """How image sizes become training-input sizes.

    Attributes:
        scale: (W, H) of the resize, or None to keep the images' own size.
        keep_ratio: fit inside ``scale`` keeping the aspect ratio (True) or stretch to it (False).
        source: where it came from, for the report (``train pipeline Resize``, ``--input-size``, ...).
    """

    scale: tuple[int, int] | None
    keep_ratio: bool
    source: str

    def factors(self, width: int, height: int) -> tuple[float, float]:
        """(x, y) factors from an image of ``width`` x ``height`` to the training input."""
        if self.scale is None:
            return 1.0, 1.0
        if self.keep_ratio:
            new_w, new_h = rescale_size(width, height, self.scale)
        else:
            new_w, new_h = self.scale
        return new_w / width, new_h / height

    def describe(self) -> str:
        if self.scale is None:
            return f'images at their own size ({self.source})'
        return f'resized to {self.scale[0]}x{self.scale[1]} (WxH), keep_ratio={self.keep_ratio} ({self.source})'


def _resize_step(pipelines: list[list]) -> dict | None:
    """The last resize step of the pipelines (the leaf dataset's, then a wrapper's, in the order they run)."""
    found = None
    for pipeline in pipelines:
        for step in pipeline or []:
            if isinstance(step, dict) and step.get('type') in RESIZE_STEPS:
                found = step
    return found


def _preprocessor_scaling(cfg: Config, where: str) -> Scaling | None:
    """The resize a data preprocessor does inside the model when the pipeline has none (the torchvision presets):
    ``fixed_size: [H, W]`` stretches to it (SSD); ``min_size`` / ``max_size`` fit the short side to ``min_size``
    (the largest of a list: training draws one) with the long side at most ``max_size``, which is the
    keep-ratio rule of ``Resize`` with scale ``(max_size, min_size)``. None: the preprocessor does not resize."""
    pre = (cfg.get('model') or {}).get('data_preprocessor') or {}
    try:
        if pre.get('fixed_size') is not None:
            h, w = to_pair(pre['fixed_size'], 'model.data_preprocessor.fixed_size', '(H, W)')
            return Scaling((w, h), False, 'model.data_preprocessor fixed_size')
        if pre.get('min_size') is not None and pre.get('max_size') is not None:
            sizes = pre['min_size'] if isinstance(pre['min_size'], (list, tuple)) else [pre['min_size']]
            return Scaling((int(pre['max_size']), int(max(sizes))), True,
                           'model.data_preprocessor min_size / max_size')
    except (DataError, TypeError, ValueError) as err:
        raise ConfigError(f'{where}: model.data_preprocessor {dict(pre)!r}: {err}; or pass --input-size') from None
    return None


def training_scaling(cfg: Config, input_size: int | None = None) -> Scaling:
    """The :class:`Scaling` of ``cfg``'s training pipeline; ``input_size`` S replaces its scale by (S, S).

    The resize step is the last ``Resize`` / ``RandomResize`` of ``train_dataloader.dataset``'s pipelines
    (``RandomResize`` with ``ratio_range``: its base ``scale``; with two scales: the larger). Without one, the data
    preprocessor's resize (``fixed_size``, or ``min_size`` / ``max_size``: torchvision's presets resize inside the
    model), else boxes keep the images' pixels; with ``input_size`` the long side becomes S (ultralytics' rule).

    Raises:
        ConfigError: a resize step whose scale cannot be read (naming the config and the step).
    """
    ds_cfg = cfg.get('train_dataloader', {}).get('dataset') or {}
    pipelines = [leaf.get('pipeline') for leaf in leaf_dataset_configs(copy.deepcopy(ds_cfg))] + [
        ds_cfg.get('pipeline')]
    step = _resize_step(pipelines)
    where = getattr(cfg, 'filename', None) or 'the config'
    if step is None:
        pre = _preprocessor_scaling(cfg, where)
        if input_size is None:
            return pre or Scaling(None, True, 'no Resize in the train pipeline')
        if pre is not None and not pre.keep_ratio:
            return Scaling((input_size, input_size), False, f'--input-size {input_size}, stretched as the data '
                           'preprocessor stretches')
        return Scaling((input_size, input_size), True, f'--input-size {input_size}, long side')
    keep_ratio = bool(step.get('keep_ratio', True))
    if input_size is not None:
        return Scaling((input_size, input_size), keep_ratio, f'--input-size {input_size}, keep_ratio of the '
                       f"train pipeline's {step['type']}")
    scale = step.get('scale')
    try:
        if step['type'] == 'RandomResize' and step.get('ratio_range', (0.5, 2.0)) is None:
            pairs = [to_pair(s, 'RandomResize.scale[i]', '(W, H)') for s in scale]
            pair = max(pairs, key=lambda p: p[0] * p[1])
        else:
            pair = to_pair(scale, f"{step['type']}.scale", '(W, H)')
    except (DataError, TypeError) as err:
        raise ConfigError(f'{where}: train pipeline {step["type"]} scale {scale!r}: {err}; or pass --input-size') \
            from None
    return Scaling(pair, keep_ratio, f"train pipeline {step['type']}")


@dataclass(frozen=True)
class TrainingBoxes:
    """Box sizes in training-input pixels.

    Attributes:
        wh: float64 [M, 2] widths and heights of the non-ignored boxes.
        num_images: images read.
        sources: the datasets read, for the report (``CocoDataset data/.../instances_train.json``).
        scaling: how they were rescaled.
    """

    wh: np.ndarray
    num_images: int
    sources: list[str]
    scaling: Scaling


def training_boxes(cfg: Config, input_size: int | None = None) -> TrainingBoxes:
    """Read ``cfg``'s ``train_dataloader.dataset`` (each leaf of a wrapper, built without a pipeline: only the
    annotations are read) and return its non-ignored boxes' sizes rescaled by :func:`training_scaling`.

    Raises:
        ConfigError: no ``train_dataloader.dataset``. DataError: the datasets hold no box.
    """
    where = getattr(cfg, 'filename', None) or 'the config'
    ds_cfg = cfg.get('train_dataloader', {}).get('dataset')
    if not isinstance(ds_cfg, dict):
        raise ConfigError(f'{where} has no train_dataloader.dataset; anchors are fitted to the training boxes')
    scaling = training_scaling(cfg, input_size)
    sizes, num_images, sources = [], 0, []
    for leaf in leaf_dataset_configs(copy.deepcopy(ds_cfg)):
        with DefaultScope.overwrite_default_scope(cfg.get('default_scope') or 'detection'):
            dataset = DATASETS.build(dict(leaf, pipeline=[]))
        dataset.full_init()
        sources.append(f"{leaf.get('type')} {dataset.metainfo.get('ann_file') or getattr(dataset, 'ann_file', '')}")
        for i in range(len(dataset)):
            info = dataset.get_data_info(i)
            fx, fy = scaling.factors(int(info['width']), int(info['height']))
            boxes = np.array([inst['bbox'] for inst in info['instances'] if not inst.get('ignore_flag')],
                             dtype=np.float64).reshape(-1, 4)
            sizes.append((boxes[:, 2:] - boxes[:, :2]) * (fx, fy))
            num_images += 1
    wh = np.concatenate(sizes) if sizes else np.zeros((0, 2))
    wh = wh[(wh > 0).all(1)]
    if not len(wh):
        raise DataError(f'{where}: the training dataset(s) {sources} hold no box; nothing to fit anchors to')
    return TrainingBoxes(wh, num_images, sources, scaling)
