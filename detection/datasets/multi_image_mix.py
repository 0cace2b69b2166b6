"""A dataset wrapper that feeds mixing transforms (Mosaic, MixUp) with the extra samples they need."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from detection.registry import DATASETS, TRANSFORMS
from oars.errors import DataError


@DATASETS.register_module()
class MultiImageMixDataset:
    """Run ``pipeline`` on samples of ``dataset`` (a config dict or a built dataset whose own pipeline loads the
    image and annotations, e.g. ``[LoadImageFromFile, LoadAnnotations]``).

    Before each transform that has ``get_indexes(dataset)``, the samples it names are loaded from the inner
    dataset and handed over in ``results['mix_results']`` (removed again after that transform). A transform
    returning None is retried (on a fresh copy) up to ``max_refetch`` times. Transforms whose class name is in
    ``skip_type_keys`` are skipped (``update_skip_type_keys`` changes that during training, e.g. to stop
    Mosaic/MixUp for the last epochs as YOLOX does).

    ``metainfo`` is the inner dataset's. Building does not load annotations: a dataset built with ``lazy_init``
    loads them on ``full_init()`` or on first use, as mmengine's datasets do.
    """

    def __init__(
        self,
        dataset: dict | Sequence,
        pipeline: Sequence[dict | Callable],
        skip_type_keys: Sequence[str] | None = None,
        max_refetch: int = 15,
    ) -> None:
        if isinstance(dataset, dict):
            dataset = DATASETS.build(dataset)
        elif not (hasattr(dataset, '__getitem__') and hasattr(dataset, '__len__')):
            raise TypeError(f'MultiImageMixDataset.dataset must be a dataset config dict or a dataset, '
                            f'got {type(dataset).__name__}')
        self.dataset = dataset
        self.pipeline = [TRANSFORMS.build(t) if isinstance(t, dict) else t for t in pipeline]
        for i, t in enumerate(self.pipeline):
            if not callable(t):
                raise TypeError(f'MultiImageMixDataset.pipeline[{i}] must be a transform config or callable, '
                                f'got {type(t).__name__}')
        self.pipeline_types = [type(t).__name__ for t in self.pipeline]
        if not isinstance(max_refetch, int) or max_refetch < 1:
            raise DataError(f'MultiImageMixDataset.max_refetch must be a positive int, got {max_refetch!r}')
        self.max_refetch = max_refetch
        self._skip_type_keys: tuple[str, ...] = ()
        self.update_skip_type_keys(skip_type_keys)

    @property
    def metainfo(self) -> dict:
        """The inner dataset's metainfo (classes, palette, ...)."""
        return copy.deepcopy(getattr(self.dataset, 'metainfo', {}))

    def full_init(self) -> None:
        """Load the inner dataset's annotations now (no-op when already loaded or not lazy)."""
        if hasattr(self.dataset, 'full_init'):
            self.dataset.full_init()

    def __len__(self) -> int:
        return len(self.dataset)

    def get_data_info(self, idx: int) -> dict:
        return self.dataset.get_data_info(idx)

    def get_cat_ids(self, idx: int) -> list[int]:
        """The inner dataset's class indices of image ``idx`` (for ``ClassAwareSampler``)."""
        return self.dataset.get_cat_ids(idx)

    def update_skip_type_keys(self, skip_type_keys: Sequence[str] | None) -> None:
        """Skip the transforms of these class names from now on (None or empty: skip none)."""
        keys = tuple(skip_type_keys or ())
        if not all(isinstance(k, str) for k in keys):
            raise DataError(f'MultiImageMixDataset.skip_type_keys must be transform class names, got {keys!r}')
        unknown = sorted(set(keys) - set(self.pipeline_types))
        if unknown:
            raise DataError(f'MultiImageMixDataset.skip_type_keys {unknown} name no transform of the pipeline '
                            f'{self.pipeline_types}')
        self._skip_type_keys = keys

    def _load(self, idx: int) -> dict:
        results = self.dataset[idx]
        if results is None:
            raise DataError(f'MultiImageMixDataset: the inner dataset returned None for index {idx}')
        return results

    def __getitem__(self, idx: int) -> dict:
        results = self._load(idx)
        for transform, name in zip(self.pipeline, self.pipeline_types):
            if name in self._skip_type_keys:
                continue
            if hasattr(transform, 'get_indexes'):
                indexes = transform.get_indexes(self.dataset)
                indexes = [indexes] if isinstance(indexes, int) else list(indexes)
                results['mix_results'] = [self._load(int(i)) for i in indexes]
            for _ in range(self.max_refetch):
                updated = transform(copy.deepcopy(results))
                if updated is not None:
                    break
            else:
                raise DataError(f'MultiImageMixDataset: {name} returned None {self.max_refetch} times for sample '
                                f'{idx} ({results.get("img_path", "?")}); check its settings or raise max_refetch')
            results = updated
            results.pop('mix_results', None)
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(dataset={type(self.dataset).__name__}, pipeline={self.pipeline_types}, '
                f'skip_type_keys={list(self._skip_type_keys)}, max_refetch={self.max_refetch})')
