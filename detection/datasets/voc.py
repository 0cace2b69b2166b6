"""PASCAL VOC detection data set: an ImageSets list plus one Annotations/<id>.xml per image."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from detection.datasets import annotation_checks as checks
from detection.datasets.base import DetectionDataset
from detection.registry import DATASETS
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

VOC_CLASSES: tuple[str, ...] = (
    'aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair', 'cow', 'diningtable', 'dog',
    'horse', 'motorbike', 'person', 'pottedplant', 'sheep', 'sofa', 'train', 'tvmonitor',
)


def read_split(split_file: str, owner: str = 'VOCDataset') -> list[str]:
    """Image ids (first word of each non-empty line) of an ImageSets list (a local path or a URL)."""
    if not storage.isfile(split_file):
        raise DataFileNotFoundError(f'{owner}: image list {split_file} not found (ann_file, relative to data_root)')
    try:
        with storage.open_file(split_file, 'r', encoding='utf-8') as f:
            lines = [(number, line.split()[0]) for number, line in enumerate(f, 1) if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f'{owner}: cannot read image list {split_file}: {err}') from None
    if not lines:
        raise DataError(f'{owner}: image list {split_file} names no images; expected one image id per line')
    first: dict[str, int] = {}
    for number, img_id in lines:  # a repeated id would weight that image twice, without a word
        if img_id in first:
            raise DataError(f'{owner}: image list {split_file}: lines {first[img_id]} and {number} both name image '
                            f'{img_id!r}; expected each image once')
        first[img_id] = number
    return [img_id for _, img_id in lines]


def parse_xml(xml_path: str) -> ET.Element:
    """The root of a VOC annotation XML (a local path or a URL); ``DataError`` naming the file when it is not
    well-formed XML."""
    try:
        with storage.open_file(xml_path, 'rb') as f:
            return ET.parse(f).getroot()
    except ET.ParseError as err:
        raise DataError(f'VOC annotation {xml_path} is not well-formed XML: {err}') from None


def object_names(xml_paths: Iterable[str]) -> list[str]:
    """Sorted distinct object names over VOC XML files (missing files are left out)."""
    names = set()
    for path in xml_paths:
        if storage.isfile(path):
            names.update((obj.findtext('name') or '').strip() for obj in parse_xml(path).iter('object'))
    return sorted(names - {''})


def _int_text(node: ET.Element | None, tag: str) -> int | None:
    try:
        return int(float(node.findtext(tag)))  # type: ignore[union-attr,arg-type]
    except (AttributeError, TypeError, ValueError):
        return None


@DATASETS.register_module()
class VOCDataset(DetectionDataset):
    """PASCAL VOC layout under ``data_root`` (e.g. ``data/VOCdevkit/VOC2007``): ``ann_file`` lists image
    ids (``ImageSets/Main/trainval.txt``), images are ``data_prefix['img']/<id><img_suffix>`` and
    annotations ``data_prefix['ann']/<id>.xml``.

    Coordinates: VOC ``bndbox`` values are 1-based pixel indices with both ends inclusive, so a box is
    converted to 0-based corner coordinates as ``(xmin - 1, ymin - 1, xmax, ymax)`` (detectron2's rule;
    mmdetection subtracts 1 from all four values, which makes every box one pixel too small) and then
    clipped to the image. ``difficult=1`` objects become ignored instances. Object names not in
    ``classes`` (default: the 20 VOC classes) are bad annotations ("unknown class name"), handled by
    ``on_bad_annotation`` like the other problems (see ``detection.datasets.annotation_checks``); so is a
    missing or malformed XML file. The image size comes from ``<size>``, or from the image when absent.
    ``img_id`` is the id string from the list (hashable, used as the key by the metrics).
    """

    METAINFO: dict = {'classes': VOC_CLASSES}
    required_prefixes = ('img', 'ann')
    default_prefix = {'img': 'JPEGImages', 'ann': 'Annotations'}
    ann_hint = 'the image list, e.g. ImageSets/Main/trainval.txt'

    def __init__(self, img_suffix: str = '.jpg', **kwargs) -> None:
        self.img_suffix = img_suffix
        super().__init__(**kwargs)

    def load_data_list(self) -> list[dict]:
        """Read the list and every XML once; one data info per image."""
        owner = type(self).__name__
        split_file = storage.absolute(self.ann_file)
        problems = checks.AnnotationProblems(self.on_bad_annotation, split_file, owner)
        label_of = {name: i for i, name in enumerate(self._metainfo['classes'])}
        data_list = []
        for img_id in read_split(split_file, owner):
            info = self._image_info(img_id, label_of, problems)
            if info is not None:
                data_list.append(info)
        problems.warn()
        return data_list

    def _image_info(self, img_id: str, label_of: dict, problems: checks.AnnotationProblems) -> dict | None:
        xml_path = storage.join(self.data_prefix['ann'], img_id + '.xml')
        img_path = storage.join(self.data_prefix['img'], img_id + self.img_suffix)
        if not storage.listed_isfile(xml_path):  # on a bucket: one listing of the folder, not a request per file
            problems.report(checks.MISSING_XML, f'{self.ann_file}: image {img_id}: annotation {xml_path} not '
                            'found; expected an XML file per listed image', error=DataFileNotFoundError)
            return None
        try:
            root = parse_xml(xml_path)
        except DataError as err:
            problems.report(checks.MALFORMED_XML, str(err))
            return None
        if not checks.checked_image(img_path, problems, xml_path):
            return None
        size = root.find('size')
        width, height = _int_text(size, 'width'), _int_text(size, 'height')
        if not width or not height or width <= 0 or height <= 0:
            shape = checks.image_size(img_path)
            if shape is None:
                problems.report(checks.UNREADABLE_IMAGE, f'{xml_path}: no <size> and OpenCV cannot read {img_path}; '
                                'expected a readable image')
                return None
            height, width = shape
        instances = []
        for index, obj in enumerate(root.iter('object')):
            inst = self._instance(obj, index, label_of, width, height, xml_path, img_path, problems)
            if inst is not None:
                instances.append(inst)
        return {'img_path': img_path, 'img_id': img_id, 'height': height, 'width': width, 'instances': instances}

    @staticmethod
    def _instance(obj: ET.Element, index: int, label_of: dict, width: int, height: int, xml_path: str,
                  img_path: str, problems: checks.AnnotationProblems) -> dict | None:
        name = (obj.findtext('name') or '').strip()
        at = f'{xml_path}: object {index} ({name or "no name"}) of image {img_path}'
        if name not in label_of:
            problems.report(checks.UNKNOWN_CLASS, f'{at}: class name {name!r} is not in classes; expected one of '
                            f'{list(label_of)}')
            return None
        bnd = obj.find('bndbox')
        raw = None if bnd is None else [bnd.findtext(t) for t in ('xmin', 'ymin', 'xmax', 'ymax')]
        vals = checks.as_box(raw)
        if vals is None:
            problems.report(checks.MALFORMED_BOX, f'{at}: bndbox {raw!r}; expected numeric xmin, ymin, xmax, ymax')
            return None
        box = [vals[0] - 1.0, vals[1] - 1.0, vals[2], vals[3]]  # 1-based inclusive pixels -> 0-based corners
        bad = checks.box_problem(box, width, height)
        if bad is not None:
            problems.report(bad[0], f'{at}: bndbox (xmin, ymin, xmax, ymax) {checks.fmt_box(vals)}: {bad[1]}')
            return None
        difficult = _int_text(obj, 'difficult') or 0
        return {'bbox': checks.clip_box(box, width, height), 'bbox_label': label_of[name],
                'ignore_flag': int(difficult != 0)}

    def filter_data(self) -> list[dict]:
        """Drop images without a non-ignored box (``filter_empty_gt``, training only); fail when none is left."""
        drop_empty = self.filter_empty_gt and not self.test_mode
        return checks.filter_images(self.data_list, drop_empty, type(self).__name__, storage.absolute(self.ann_file))
