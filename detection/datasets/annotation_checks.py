"""Checks shared by the detection datasets and converters: bad boxes, unknown categories, missing files.

Why one module: COCO and VOC files go wrong in the same ways (zero-size boxes, boxes off the image, labels
that are not in the category list, images that were never copied). Each problem is either fatal
(``on_bad_annotation='fail'``, the default: a ``DataError`` that names the file, the annotation, the
value and what was expected) or dropped and counted (``'skip'``: one warning per loaded file with counts
per kind and a few examples), so a broken data set fails at load time rather than mid-training, and a
user who accepts some noise can still train. A training set left without a usable instance (every
annotation dropped, ignored or of another class) is an error whatever the policy
(``require_usable_instances``): trained on, it gives zero box and mask losses and a run that "succeeds".
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence

from oars.data import storage
from oars.data.dataset import naming_every_problem
from oars.data.transforms.loading import read_image
from oars.errors import DataError, DataFileNotFoundError

POLICIES: tuple[str, ...] = ('fail', 'skip')

# Problem kinds (the keys of the counts in the 'skip' warning).
MALFORMED_BOX = 'malformed box'
EMPTY_BOX = 'non-positive box size'
OUTSIDE_BOX = 'box outside image'
UNKNOWN_CATEGORY = 'unknown category id'
UNKNOWN_CLASS = 'unknown class name'
UNKNOWN_IMAGE = 'unknown image id'
MISSING_IMAGE = 'missing image'
UNREADABLE_IMAGE = 'unreadable image'
MISSING_XML = 'missing XML file'
MALFORMED_XML = 'malformed XML file'

SKIP_HINT = 'fix the annotation, or set `on_bad_annotation: skip` on the dataset to drop such annotations'


class BadAnnotationWarning(UserWarning):
    """Annotations dropped under ``on_bad_annotation='skip'`` (one warning per annotation file)."""


def check_policy(policy: str, owner: str) -> str:
    """``policy`` if it is one of ``POLICIES``, else a ``DataError`` saying what is allowed."""
    if policy not in POLICIES:
        raise DataError(f"{owner}: on_bad_annotation must be one of {list(POLICIES)} ('fail' raises on the first "
                        f"bad annotation, 'skip' drops bad annotations with one warning), got {policy!r}")
    return policy


class AnnotationProblems:
    """Collects bad annotations of one annotation source under one policy.

    ``report`` raises at once under ``'fail'``; under ``'skip'`` it counts the problem and keeps the first
    ``max_examples`` messages (every one under ``oars.data.dataset.every_problem_named``, as check_data asks), and
    ``warn`` emits them as one ``BadAnnotationWarning``.
    """

    def __init__(self, policy: str, source: str, owner: str, max_examples: int = 5) -> None:
        self.policy = check_policy(policy, owner)
        self.source = source
        self.owner = owner
        self.max_examples = max_examples
        self.counts: Counter[str] = Counter()
        self.examples: list[str] = []

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self, kind: str, message: str, error: type[Exception] = DataError, always_skip: bool = False) -> None:
        """Raise ``error`` (fail) or record the problem (skip); ``message`` names the file, item and value.

        ``always_skip``: record it under either policy (problems that real data sets hold by the hundred and that
        only cost the one instance, e.g. a degenerate polygon in COCO train); the warning still counts them."""
        if self.policy == 'fail' and not always_skip:
            raise error(f'{self.owner}: {message} [{kind}]; {SKIP_HINT}')
        self.counts[kind] += 1
        if len(self.examples) < self.max_examples or naming_every_problem():
            self.examples.append(f'{message} [{kind}]')

    def summary(self) -> str:
        counts = ', '.join(f'{kind}: {n}' for kind, n in sorted(self.counts.items()))
        why = ('on_bad_annotation: skip' if self.policy == 'skip' else
               'left out whatever on_bad_annotation says: no mask can be made of them')
        lines = [f'{self.owner}: skipped {self.total} bad annotation(s) in {self.source} ({why}) - {counts}; '
                 'first examples:']
        lines += [f'  - {e}' for e in self.examples]
        return '\n'.join(lines)

    def warn(self) -> None:
        """One warning with counts per kind and the first examples; nothing when no problem was seen."""
        if self.total:
            warnings.warn(self.summary(), BadAnnotationWarning, stacklevel=2)


def fmt_box(box: Sequence) -> str:
    try:
        return '[' + ', '.join(f'{float(v):g}' for v in box) + ']'
    except (TypeError, ValueError):
        return repr(box)


def as_box(values: object) -> list[float] | None:
    """Four finite floats from a bbox-like value, or None when it is not one."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) != 4:
        return None
    try:
        box = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    return box if all(math.isfinite(v) for v in box) else None


def box_problem(box: Sequence[float], width: float, height: float) -> tuple[str, str] | None:
    """``(kind, expectation)`` for an xyxy box that cannot be used on a ``width`` x ``height`` image, or None.

    A box with x2 <= x1 or y2 <= y1 has no area; a box with no overlap with ``[0, width] x [0, height]`` is
    outside the image. A box only partly outside is fine (``clip_box`` cuts it to the image).
    """
    x1, y1, x2, y2 = box
    if x2 <= x1 or y2 <= y1:
        return EMPTY_BOX, f'width {x2 - x1:g} and height {y2 - y1:g}; expected both > 0'
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        return OUTSIDE_BOX, f'no overlap with the {width:g}x{height:g} (WxH) image; expected a box inside it'
    return None


def clip_box(box: Sequence[float], width: float, height: float) -> list[float]:
    """The xyxy box cut to ``[0, width] x [0, height]``."""
    x1, y1, x2, y2 = box
    return [min(max(x1, 0.0), width), min(max(y1, 0.0), height), min(max(x2, 0.0), width), min(max(y2, 0.0), height)]


def image_size(img_path: str) -> tuple[int, int] | None:
    """``(height, width)`` of an image file as the pipeline reads it (``read_image``: EXIF orientation applied),
    or None if unreadable."""
    try:
        img = read_image(img_path)
    except DataError:
        return None
    return int(img.shape[0]), int(img.shape[1])


def checked_image(img_path: str, problems: AnnotationProblems, where: str) -> bool:
    """True when the image file (a local path or a URL) exists; otherwise reports ``MISSING_IMAGE`` (the image is
    then dropped)."""
    if storage.listed_isfile(img_path):
        return True
    problems.report(MISSING_IMAGE, f'{where}: image file {img_path} not found; expected an existing file',
                    error=DataFileNotFoundError)
    return False


def has_usable_box(data_info: dict) -> bool:
    """True when the image holds at least one non-ignored instance (what ``filter_empty_gt`` keeps)."""
    return any(not inst['ignore_flag'] for inst in data_info['instances'])


def require_usable_instances(data_list: list[dict], dropped: Counter, total: int, num_images: int, owner: str,
                             source: str, ignored_as: str) -> None:
    """Raise ``DataError`` when a training set holds no usable instance (kept and not ignored).

    Why: a detector trained on such a set sees only background: its box (and mask) losses are 0 and the run
    ends with exit status 0, having learnt nothing. The message counts what became of the ``total``
    annotations, so the user sees at once whether the classes, the boxes or the polygons are wrong.

    Args:
        data_list: the data infos loaded.
        dropped: annotations left out, per reason (problem kinds; an image left out counts all its annotations).
        total: annotations in ``source``; ``num_images``: images listed in it.
        owner, source: the dataset class and the annotation file, named in the message.
        ignored_as: the reason an ignored instance is not usable (``crowd (iscrowd: 1)``, ``difficult``).
    """
    ignored = sum(1 for info in data_list for inst in info['instances'] if inst['ignore_flag'])
    kept = sum(len(info['instances']) for info in data_list)
    if kept > ignored:
        return
    reasons = dropped + Counter({ignored_as: ignored})
    counts = ', '.join(f'{n} {kind}' for kind, n in reasons.most_common())
    raise DataError(f'{owner}: no images to use from {source} for training: 0 usable instances of {total} '
                    f"annotation(s) in {num_images} image(s){': ' + counts if counts else ''}; a training set needs "
                    'at least one instance of the configured classes that is neither ignored nor left out; fix the '
                    'annotation file, `classes` or `data_prefix` (an evaluation set: test_mode: true)')


def filter_images(data_list: list[dict], drop_empty: bool, owner: str, source: str) -> list[dict]:
    """The images to keep (without a non-ignored box dropped when ``drop_empty``); ``DataError`` when none
    is left, since an empty data set only fails later with an obscure message."""
    kept = [info for info in data_list if has_usable_box(info)] if drop_empty else data_list
    if not kept:
        why = (f'{len(data_list)} image(s) loaded, none with a non-ignored box of the configured classes '
               '(filter_empty_gt drops those)') if data_list else 'no image was loaded'
        raise DataError(f'{owner}: no images to use from {source}: {why}; check the annotation file, '
                        '`classes` and `data_prefix`')
    return kept
