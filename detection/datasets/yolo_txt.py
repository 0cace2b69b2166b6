"""YOLO txt detection data set (ultralytics layout and data YAML), read directly: no conversion to COCO needed.

Config::

    train_dataloader:
      dataset: {type: YOLOTxtDataset, data_yaml: data/shapes_yolo/data.yaml, split: train, pipeline: [...]}

Evaluation: ``CocoMetric`` needs no annotation file here; it takes the ground truth from the samples (keep
``LoadAnnotations`` in the test pipeline), class ``i`` is category ``i + 1``. ``tools/convert.py yolo2coco`` writes
the same data as a COCO json when a COCO file is wanted (its image ids are the dataset's ``img_id`` s).
"""

from __future__ import annotations

import os
from collections import Counter

from detection.datasets import annotation_checks as checks
from detection.datasets import yolo_files as yf
from detection.datasets.base import DetectionDataset
from detection.registry import DATASETS
from oars.data import storage
from oars.errors import DataError

SPLITS: tuple[str, ...] = ('train', 'val', 'test')


@DATASETS.register_module()
class YOLOTxtDataset(DetectionDataset):
    """Images and ``class cx cy w h`` label files of one split of an ultralytics data YAML.

    Args:
        data_yaml: the data YAML (``path``, ``train``, ``val``, ``test``, ``names``), relative to ``data_root``
            when that is given; see :func:`detection.datasets.yolo_files.read_data_yaml` for how paths resolve.
        split: ``train``, ``val`` or ``test`` (the YAML's key).
        classes: default the YAML's ``names``; when given, names matched to the YAML's names (objects of other
            classes are left out, the way to train on a subset), class indices follow ``classes``.
        data_root, palette, filter_empty_gt, on_bad_annotation, on_bad_sample, pipeline, test_mode, lazy_init,
            indices, serialize_data, max_refetch: as :class:`detection.datasets.coco.CocoDataset`.
        ann_file, data_prefix: not used (the YAML names the files); accepted so that a config can switch an
            inherited COCO dataset to this type with ``-o ...dataset.type=YOLOTxtDataset``.

    Data infos are those of ``CocoDataset``: ``img_path``, ``img_id`` (1..N in the sorted image order, as
    ``yolo2coco`` numbers them), ``height``/``width`` (from the image header, EXIF orientation applied) and
    ``instances`` of ``{'bbox': [x1, y1, x2, y2] pixels (float, clipped to the image), 'bbox_label': int,
    'ignore_flag': 0}``. An image without a label file has no objects (ultralytics' rule; ``filter_empty_gt``
    drops it from training). A bad line (a class id out of range, a value outside 0..1, a wrong number of fields
    or not a number, a zero-size box) and a label file without an image are errors naming the file and the line,
    or, under ``on_bad_annotation: skip``, left out and counted in one warning.
    """

    METAINFO: dict = {}
    ann_hint = 'the data YAML (data_yaml)'

    def __init__(self, data_yaml: str = '', split: str = 'train', data_root: str = '',
                 classes: list[str] | None = None, **kwargs) -> None:
        owner = type(self).__name__
        if not data_yaml:
            raise DataError(f'{owner}: data_yaml is required (an ultralytics data YAML with path, train, val, names)')
        if split not in SPLITS:
            raise DataError(f'{owner}: split {split!r}; expected one of {list(SPLITS)} (a key of the data YAML)')
        url_yaml = storage.is_url(data_yaml)
        under_root = data_root and not (os.path.isabs(data_yaml) or url_yaml)
        path = storage.join(data_root, data_yaml) if under_root else data_yaml
        # the YAML is read before OarsDataset registers storage_options: register them now, for data_root (or, for a
        # URL data_yaml without one, its folder) and for the dataset folder the YAML names
        data_root = data_root or (os.path.dirname(path) if url_yaml else '')
        options, where = kwargs.get('storage_options'), f'{owner}: storage_options'
        storage.register_options(data_root, options, where)
        self.data = yf.read_data_yaml(path)
        if storage.is_url(self.data.root):
            storage.register_options(self.data.root, options, where)
        self.split = split
        kwargs.pop('ann_file', None)
        kwargs.setdefault('data_prefix', {'img': ''})
        super().__init__(data_root=data_root, ann_file=self.data.yaml_path, classes=classes or list(self.data.names),
                         **kwargs)
        self._metainfo['data_yaml'] = self.data.yaml_path

    def load_data_list(self) -> list[dict]:
        """One data info per image of the split (see the class docstring).

        Raises:
            DataError: a bad line or a label file without an image under ``on_bad_annotation: fail``; for training,
                no usable object left (``annotation_checks.require_usable_instances``).
        """
        owner = type(self).__name__
        source = f'{self.data.yaml_path} ({self.split})'
        problems = checks.AnnotationProblems(self.on_bad_annotation, source, owner)
        label_of = self._label_of()
        images = yf.split_images(self.data, self.split)
        for orphan in yf.orphan_labels(self.data, self.split, images):
            problems.report(yf.ORPHAN_LABEL, f'{orphan}: no image of the {self.split} split has this label file '
                            '(expected an image of the same name under images/ where the label is under labels/, '
                            f'one of {list(yf.IMAGE_SUFFIXES)}); its objects would be lost')
        dropped: Counter = Counter()
        data_list, total = [], 0
        for img_id, img_path in enumerate(images, start=1):
            info, count = self._image_info(img_id, img_path, label_of, problems, dropped)
            total += count
            if info is not None:
                data_list.append(info)
        if not self.test_mode:
            checks.require_usable_instances(data_list, dropped, total, len(images), owner, source,
                                            ignored_as='ignored')
        problems.warn()
        return data_list

    def _label_of(self) -> dict[int, int]:
        """YAML class id -> class index of ``classes`` (ids of other names are left out)."""
        names = list(self.data.names)
        missing = [c for c in self._metainfo['classes'] if c not in names]
        if missing:
            raise DataError(f'{type(self).__name__}: classes {missing} are not names of {self.data.yaml_path}; its '
                            f'names are {names}; fix `classes` (names are matched exactly)')
        return {names.index(c): i for i, c in enumerate(self._metainfo['classes'])}

    def _image_info(self, img_id: int, img_path: str, label_of: dict[int, int], problems: checks.AnnotationProblems,
                    dropped: Counter) -> tuple[dict | None, int]:
        """(the data info or None when the image is left out, the number of objects in its label file)."""
        labels = yf.label_path(img_path)
        lines = yf.read_label_lines(labels) if storage.listed_isfile(labels) else []
        size = yf.image_size(img_path)
        if size is None:
            size = checks.image_size(img_path)
        if size is None:
            problems.report(checks.UNREADABLE_IMAGE, f'{img_path}: cannot read the image size (neither PIL nor '
                            'OpenCV opens it); expected a readable image')
            dropped[checks.UNREADABLE_IMAGE] += sum(1 for t in lines if t.strip())
            return None, len(lines)
        height, width = size
        instances, count = [], 0
        for number, text in enumerate(lines, start=1):
            obj, problem = yf.parse_line(text, len(self.data.names), number)
            count += obj is not None or problem is not None
            if problem is not None:
                problems.report(problem[0], f'{labels}:{number}: {problem[1]}')
                dropped[problem[0]] += 1
                continue
            if obj is None:
                continue
            if obj.w <= 0 or obj.h <= 0:
                problems.report(checks.EMPTY_BOX, f'{labels}:{number}: w {obj.w:g}, h {obj.h:g}; expected both > 0')
                dropped[checks.EMPTY_BOX] += 1
                continue
            if obj.cls not in label_of:
                dropped['class not in `classes`'] += 1
                continue
            box = [(obj.cx - obj.w / 2) * width, (obj.cy - obj.h / 2) * height, (obj.cx + obj.w / 2) * width,
                   (obj.cy + obj.h / 2) * height]
            instances.append({'bbox': checks.clip_box(box, width, height), 'bbox_label': label_of[obj.cls],
                              'ignore_flag': 0})
        return {'img_path': img_path, 'img_id': img_id, 'height': height, 'width': width,
                'instances': instances}, count

    def filter_data(self) -> list[dict]:
        """Drop images without a box (``filter_empty_gt``, training only); fail when none is left."""
        drop_empty = self.filter_empty_gt and not self.test_mode
        return checks.filter_images(self.data_list, drop_empty, type(self).__name__, self.data.yaml_path)
