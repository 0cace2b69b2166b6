"""The official Cityscapes label table (cityscapesScripts' ``helpers/labels.py``): name -> id, trainId.

Why a copy here: ``tools/convert.py cityscapes2seg`` must paint exactly the train ids the benchmark's own
``createTrainIdLabelImgs`` paints (19 classes 0..18, 255 for every void or ignored label), without installing
cityscapesScripts. The table is the dataset's definition, like ``COCO_CLASSES``, not a setting: the train ids of
the 19 classes are the order of ``CityscapesDataset``'s ``classes`` (checked in the tests).
"""

from __future__ import annotations

from typing import NamedTuple


class CityscapesLabel(NamedTuple):
    """One row of the table.

    Attributes:
        name: the label as written in the ``*_polygons.json`` files.
        id: the evaluation id (``*_labelIds.png``); -1 means "never drawn" (license plates).
        train_id: the training id (``*_labelTrainIds.png``): 0..18 for the 19 classes, 255 to ignore.
    """

    name: str
    id: int
    train_id: int


IGNORE_TRAIN_ID = 255
GROUP_SUFFIX = 'group'  # 'cargroup', 'persongroup': a crowd of the base label, drawn with its ids

LABELS: tuple[CityscapesLabel, ...] = (
    CityscapesLabel('unlabeled', 0, 255),
    CityscapesLabel('ego vehicle', 1, 255),
    CityscapesLabel('rectification border', 2, 255),
    CityscapesLabel('out of roi', 3, 255),
    CityscapesLabel('static', 4, 255),
    CityscapesLabel('dynamic', 5, 255),
    CityscapesLabel('ground', 6, 255),
    CityscapesLabel('road', 7, 0),
    CityscapesLabel('sidewalk', 8, 1),
    CityscapesLabel('parking', 9, 255),
    CityscapesLabel('rail track', 10, 255),
    CityscapesLabel('building', 11, 2),
    CityscapesLabel('wall', 12, 3),
    CityscapesLabel('fence', 13, 4),
    CityscapesLabel('guard rail', 14, 255),
    CityscapesLabel('bridge', 15, 255),
    CityscapesLabel('tunnel', 16, 255),
    CityscapesLabel('pole', 17, 5),
    CityscapesLabel('polegroup', 18, 255),
    CityscapesLabel('traffic light', 19, 6),
    CityscapesLabel('traffic sign', 20, 7),
    CityscapesLabel('vegetation', 21, 8),
    CityscapesLabel('terrain', 22, 9),
    CityscapesLabel('sky', 23, 10),
    CityscapesLabel('person', 24, 11),
    CityscapesLabel('rider', 25, 12),
    CityscapesLabel('car', 26, 13),
    CityscapesLabel('truck', 27, 14),
    CityscapesLabel('bus', 28, 15),
    CityscapesLabel('caravan', 29, 255),
    CityscapesLabel('trailer', 30, 255),
    CityscapesLabel('train', 31, 16),
    CityscapesLabel('motorcycle', 32, 17),
    CityscapesLabel('bicycle', 33, 18),
    CityscapesLabel('license plate', -1, -1),
)

NAME_TO_LABEL: dict[str, CityscapesLabel] = {label.name: label for label in LABELS}


def lookup_label(name: str) -> CityscapesLabel | None:
    """The table row of a polygon's label, as ``json2labelImg.createLabelImage`` finds it.

    Args:
        name: the ``label`` of a polygon object.

    Returns:
        The row of ``name``; for an unknown name ending in ``group`` (``cargroup``) the row of the name without
        the suffix (``car``); ``None`` when neither is in the table.
    """
    label = NAME_TO_LABEL.get(name)
    if label is None and name.endswith(GROUP_SUFFIX):
        label = NAME_TO_LABEL.get(name[: -len(GROUP_SUFFIX)])
    return label


def train_class_names() -> list[str]:
    """The names of train ids 0..18, in id order (the first row of each train id, as cityscapesScripts'
    ``trainId2label`` resolves them)."""
    names: dict[int, str] = {}
    for label in LABELS:
        if 0 <= label.train_id < IGNORE_TRAIN_ID:
            names.setdefault(label.train_id, label.name)
    return [names[i] for i in range(len(names))]


__all__ = ['IGNORE_TRAIN_ID', 'LABELS', 'NAME_TO_LABEL', 'CityscapesLabel', 'lookup_label', 'train_class_names']
