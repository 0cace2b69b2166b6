"""The base of every oars dataset (detection and segmentation): class metainfo, the pipeline built from the task's
registry, and what happens to a sample whose files cannot be used (``on_bad_sample``).

Why ``skip`` substitutes: a map-style dataset must return a sample for every index it was asked for, and knowing
the bad files in advance would mean reading every file at construction. So under ``skip`` (training only) a
sample whose pipeline raises ``DataError`` (an unreadable or corrupt image or label map, a label map of another
size than its image, an annotation size that disagrees with the image, ...) is replaced by a random other sample,
as mmengine replaces a sample whose pipeline returns None - but never silently: each skipped file is counted in
``skipped`` and announced by one ``BadSampleWarning`` naming it, the reason and the count so far.
``tools/check_data.py -c CONFIG`` reads every sample once and lists every bad file before a run. Under ``error``
(the default) the first bad sample stops the run with the loader's message, which names the file.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.registry import DefaultScope, Registry

from oars.data import storage
from oars.errors import DataError
from oars_deploy.draw import get_palette

BAD_SAMPLE_POLICIES: tuple[str, ...] = ('error', 'skip')
CHECK_HINT = 'tools/check_data.py -c CONFIG lists every bad file'


# set while tools/check_data.py builds a dataset: every bad annotation is named, not the first few of each file
_NAME_EVERY_PROBLEM: ContextVar[bool] = ContextVar('name_every_problem', default=False)


@contextmanager
def every_problem_named():
    """Within the block, a dataset's summary of what it skipped names every problem (``tools/check_data.py``
    lists them all), not the first few a training log keeps."""
    token = _NAME_EVERY_PROBLEM.set(True)
    try:
        yield
    finally:
        _NAME_EVERY_PROBLEM.reset(token)


def naming_every_problem() -> bool:
    """Whether :func:`every_problem_named` is active."""
    return _NAME_EVERY_PROBLEM.get()


class BadSampleWarning(UserWarning):
    """A training sample skipped under ``on_bad_sample: skip`` (one warning per file and process)."""


def check_bad_sample_policy(policy: str, owner: str, test_mode: bool, key: str = 'on_bad_sample') -> str:
    """``policy`` if it is allowed; ``skip`` is refused for a ``test_mode`` dataset, where a substitute would
    change the metrics.

    Args:
        policy: the value the config gives.
        owner: the dataset class name, for the message.
        test_mode: whether the dataset is an evaluation one.
        key: the config key the user wrote (``on_bad_sample``, or a task's alias such as ``on_bad_video``): the
            messages name it, so the user finds the line to fix.

    Returns:
        ``policy``.
    """
    if policy not in BAD_SAMPLE_POLICIES:
        raise DataError(f"{owner}: {key} must be one of {list(BAD_SAMPLE_POLICIES)} ('error' stops at the "
                        f"first unreadable sample, 'skip' trains on another sample with a warning), got {policy!r}")
    if policy == 'skip' and test_mode:
        raise DataError(f'{owner}: {key}: skip is for training datasets; an evaluation dataset '
                        f'(test_mode) must read every sample, since a substitute would change the metrics '
                        f'({CHECK_HINT})')
    return policy


def class_metainfo(owner: str, classes: Sequence[str] | None, palette: Sequence | None, defaults: dict,
                   classes_hint: str = 'the list of class names') -> dict:
    """``{'classes': tuple of names, 'palette': RGB rows}`` validated. ``classes`` defaults to
    ``defaults['classes']`` (a dataset's ``METAINFO``), ``palette`` to ``defaults['palette']`` when the
    classes are the default ones and it has one, else to ``oars_deploy.draw.get_palette``."""
    default_classes = defaults.get('classes')
    if classes is None:
        if default_classes is None:
            raise DataError(f"{owner}: 'classes' is required ({classes_hint})")
        classes = default_classes
    if palette is None and default_classes is not None and tuple(classes or ()) == tuple(default_classes):
        palette = defaults.get('palette')
    if isinstance(classes, str) or not isinstance(classes, Sequence) or not classes:
        raise DataError(f"{owner}: 'classes' must be a non-empty list of class names, got {classes!r}")
    classes = tuple(str(c) for c in classes)
    dupes = sorted({c for c in classes if classes.count(c) > 1})
    if dupes:
        raise DataError(f"{owner}: duplicate class names in 'classes': {dupes}")
    try:
        colours = get_palette(len(classes), palette).tolist()
    except ValueError as err:
        raise DataError(f'{owner}: {err}') from None
    return {'classes': classes, 'palette': colours}


def sample_files(data_info: dict) -> list[str]:
    """The files a data info points to (image, label map; paired images; video file or frame folder), for messages."""
    return [str(data_info[k]) for k in ('img_path', 'img_A_path', 'img_B_path', 'seg_map_path', 'filename', 'frame_dir')
            if data_info.get(k)]


def build_transform(transform: dict | Callable, registry: Registry | None) -> Callable:
    """A pipeline step built from ``registry`` in that registry's own scope, or ``transform`` itself if it is
    already built (or no registry is given).

    Why the scope: mmengine resolves a dict through the *current* default scope, which is whichever task's runner
    or predictor was created last in this process; a segmentation dataset made after a detection run would then
    look ``LoadSegAnnotations`` up among detection's transforms and fail.
    """
    if not isinstance(transform, dict) or registry is None:
        return transform
    with DefaultScope.overwrite_default_scope(registry.scope):
        return registry.build(transform)


class OarsDataset(BaseDataset):
    """mmengine's ``BaseDataset`` with the oars rules: ``classes``/``palette`` validated into ``metainfo`` before
    loading (so ``lazy_init`` datasets can be checked against the model), the pipeline built from
    ``transform_registry`` (the task's ``TRANSFORMS``), and ``on_bad_sample`` (see the module docstring).
    ``bad_sample_key`` is the name the config gave that setting (a task's alias such as ``on_bad_video``), so
    that every message about it names the key the user wrote.

    ``skipped`` maps the files of each sample skipped in this process (``'image + label map'``) to the reason
    (each DataLoader worker keeps its own).
    """

    METAINFO: dict = {}
    transform_registry: Registry | None = None
    classes_hint: str = 'the list of class names'

    def __init__(
        self,
        *,
        classes: Sequence[str] | None = None,
        palette: Sequence[Sequence[int]] | None = None,
        extra_metainfo: dict | None = None,
        pipeline: Sequence[dict | Callable] = (),
        on_bad_sample: str = 'error',
        test_mode: bool = False,
        bad_sample_key: str = 'on_bad_sample',
        storage_options: Mapping | None = None,
        **base_kwargs,
    ) -> None:
        owner = type(self).__name__
        # a URL data_root (s3://, gs://, https://, memory://) reads through fsspec with these options
        storage.register_options(base_kwargs.get('data_root') or '', storage_options, f'{owner}: storage_options')
        self.bad_sample_key = bad_sample_key  # the key the config wrote (a task's alias), named in the messages
        self.on_bad_sample = check_bad_sample_policy(on_bad_sample, owner, test_mode, bad_sample_key)
        self.skipped: dict[str, str] = {}
        metainfo = class_metainfo(owner, classes, palette, self.METAINFO, self.classes_hint)
        metainfo.update(extra_metainfo or {})
        built = [build_transform(t, self.transform_registry) for t in pipeline]
        super().__init__(metainfo=metainfo, pipeline=built, test_mode=test_mode, **base_kwargs)

    def _serialize_data(self) -> tuple[np.ndarray, np.ndarray]:
        """mmengine's layout (each data info pickled into one uint8 array shared by DataLoader workers, ``data_address``
        the ends) without the ``gc.collect()`` it ends with: a full collection walks every object of the process
        (over a second beside torch), to free data infos that reference counting frees anyway."""
        blobs = [np.frombuffer(pickle.dumps(info, protocol=4), dtype=np.uint8) for info in self.data_list]
        ends = np.cumsum([len(b) for b in blobs], dtype=np.int64)
        self.data_list.clear()
        return (np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)), ends

    def _join_prefix(self) -> None:
        """mmengine's join, or ``oars.data.storage.join_root`` for a URL ``data_root``."""
        if not storage.is_url(self.data_root):
            return super()._join_prefix()
        self.ann_file, self.data_prefix = storage.join_root(self.data_root, self.ann_file, self.data_prefix)

    def prepare_data(self, idx: int):
        """The sample through the pipeline; under ``skip`` None for a sample whose pipeline raised ``DataError``
        (recorded and warned about), so that ``__getitem__`` takes another one."""
        try:
            return super().prepare_data(idx)
        except DataError as err:
            if self.on_bad_sample == 'error':
                skip = '' if self.test_mode else f'; `{self.bad_sample_key}: skip` trains without such samples'
                err.args = (f'{err} [{type(self).__name__} sample {idx}; {CHECK_HINT}{skip}]', *err.args[1:])
                raise
            self._record_skip(idx, err)
            return None

    def _record_skip(self, idx: int, err: DataError) -> None:
        files = sample_files(self.get_data_info(idx)) or [f'sample {idx}']
        key = ' + '.join(files)
        if key in self.skipped:
            return
        self.skipped[key] = str(err)
        warnings.warn(f'{type(self).__name__}: skipped {key}: {err} [{self.bad_sample_key}: skip; a random other '
                      f'sample is used in its place; {len(self.skipped)} sample(s) skipped so far in this process; '
                      f'{CHECK_HINT}]', BadSampleWarning, stacklevel=2)

    def __getitem__(self, idx: int) -> dict:
        """mmengine's ``__getitem__`` (None from the pipeline: another random sample, up to ``max_refetch``
        times), with a message naming the skipped files when no usable sample is found."""
        if self.on_bad_sample == 'error':
            return super().__getitem__(idx)
        if not self._fully_initialized:
            self.full_init()
        for _ in range(self.max_refetch + 1):
            data = self.prepare_data(idx)
            if data is not None:
                return data
            idx = self._rand_another()
        shown = '; '.join(f'{f}: {why}' for f, why in list(self.skipped.items())[:5])
        raise DataError(f'{type(self).__name__}: no usable sample in {self.max_refetch + 1} tries '
                        f'({self.bad_sample_key}: skip); {len(self.skipped)} sample(s) skipped so far, e.g. '
                        f'{shown}; {CHECK_HINT}')
