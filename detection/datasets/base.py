"""What the COCO and VOC datasets share: the bad-annotation policy, ``filter_empty_gt`` and the folders; class
metainfo, the pipeline and ``on_bad_sample`` come from ``oars.data.dataset.OarsDataset`` (shared with
segmentation)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from detection.datasets import annotation_checks as checks
from detection.registry import TRANSFORMS
from oars.data.dataset import OarsDataset
from oars.errors import DataError


def pipeline_loads_masks(pipeline: object) -> bool:
    """Whether a transform of ``pipeline`` loads instance masks (``with_mask=True``, as ``LoadAnnotations``).

    Why: a dataset checks that its instances have a usable mask only when masks are used; a box model must not
    fail on polygons it never reads. ``pipeline`` is mmengine's ``Compose`` or a list; transforms holding
    others (a ``transforms`` list, e.g. ``RandomChoice``) are searched too.
    """
    stack = list(getattr(pipeline, 'transforms', pipeline) or [])
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
            continue
        if getattr(item, 'with_mask', False) is True:
            return True
        inner = getattr(item, 'transforms', None)
        if isinstance(inner, list | tuple):
            stack.extend(inner)
    return False


class DetectionDataset(OarsDataset):
    """Base of the detection datasets: subclasses give ``METAINFO['classes']`` and implement ``load_data_list``.

    ``required_prefixes`` names the ``data_prefix`` folders the format needs, ``default_prefix`` the folders used
    when the config gives none; ``ann_hint`` says what ``ann_file`` is. ``on_bad_annotation`` (``fail`` | ``skip``)
    applies to the annotations read at construction, ``on_bad_sample`` (``error`` | ``skip``) to the files read
    per sample (``oars.data.dataset``).
    """

    METAINFO: dict = {}
    transform_registry = TRANSFORMS
    required_prefixes: tuple[str, ...] = ('img',)
    default_prefix: dict = {'img': 'images/train'}
    ann_hint: str = 'the annotation file, relative to data_root'

    def __init__(
        self,
        data_root: str = '',
        ann_file: str = '',
        data_prefix: dict | None = None,
        classes: Sequence[str] | None = None,
        palette: Sequence[Sequence[int]] | None = None,
        filter_empty_gt: bool = True,
        on_bad_annotation: str = 'fail',
        on_bad_sample: str = 'error',
        pipeline: Sequence[dict | Callable] = (),
        test_mode: bool = False,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        serialize_data: bool = True,
        max_refetch: int = 1000,
        storage_options: Mapping | None = None,
    ) -> None:
        owner = type(self).__name__
        self.on_bad_annotation = checks.check_policy(on_bad_annotation, owner)
        self.filter_empty_gt = bool(filter_empty_gt)
        if not ann_file:
            raise DataError(f'{owner}: ann_file is required ({self.ann_hint})')
        data_prefix = dict(self.default_prefix if data_prefix is None else data_prefix)
        if not all(isinstance(data_prefix.get(k), str) for k in self.required_prefixes):
            folders = ' and '.join(repr(k) for k in self.required_prefixes)
            raise DataError(f'{owner}: data_prefix must be a dict with {folders} folder(s), got {data_prefix!r}')
        super().__init__(
            classes=classes, palette=palette, pipeline=pipeline, on_bad_sample=on_bad_sample, test_mode=test_mode,
            ann_file=ann_file, data_root=data_root or '', data_prefix=data_prefix, indices=indices,
            serialize_data=serialize_data, lazy_init=lazy_init, max_refetch=max_refetch,
            storage_options=storage_options)

    def get_cat_ids(self, idx: int) -> list[int]:
        """Class indices of the image's instances, ignored ones included (what ``ClassAwareSampler`` reads)."""
        return [inst['bbox_label'] for inst in self.get_data_info(idx)['instances']]
