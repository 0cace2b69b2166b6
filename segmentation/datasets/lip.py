"""Human parsing datasets: LIP (Look Into Person, 20 classes) and the generic list-file layout CIHP and ATR share.

Layout (LIP as distributed, and SCHP's CIHP / ATR folders)::

    <data_root>/train_images/<id>.jpg          val_images/<id>.jpg
    <data_root>/train_segmentations/<id>.png   val_segmentations/<id>.png   (class ids, 0 = background)
    <data_root>/train_id.txt                   val_id.txt                   (one <id> per line)

Labels are 8-bit grey PNGs holding class ids (no 255 in LIP's own files; 255 is the ignore index of the padding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oars.errors import DataError
from segmentation.datasets.seg_dataset import SegDataset
from segmentation.flip_pairs import LIP_FLIP_PAIRS, check_flip_pairs
from segmentation.registry import DATASETS

LIP_CLASSES: tuple[str, ...] = (
    "Background", "Hat", "Hair", "Glove", "Sunglasses", "Upper-clothes", "Dress", "Coat", "Socks", "Pants",
    "Jumpsuits", "Scarf", "Skirt", "Face", "Left-arm", "Right-arm", "Left-leg", "Right-leg", "Left-shoe",
    "Right-shoe",
)


def parsing_palette(num_classes: int) -> list[list[int]]:
    """The human-parsing palette (RGB per class id) of LIP's and SCHP's pictures (``get_palette``): the PASCAL VOC
    colour map, class id ``i``'s bits 0, 1, 2 spread over the high bits of red, green, blue in turn (0 black,
    1 (128, 0, 0), 2 (0, 128, 0), 3 (128, 128, 0), ..., 14 (64, 128, 128), 15 (192, 128, 128), ...)."""
    palette = []
    for i in range(num_classes):
        rgb, lab = [0, 0, 0], i
        for bit in range(7, -1, -1):
            for channel in range(3):
                rgb[channel] |= ((lab >> channel) & 1) << bit
            lab >>= 3
            if not lab:
                break
        palette.append(rgb)
    return palette


@DATASETS.register_module()
class HumanParsingDataset(SegDataset):
    """A parsing set in the list-file layout above: ``split`` (``train_id.txt``) lists the ids, ``img_dir`` /
    ``ann_dir`` hold ``<id>.jpg`` / ``<id>.png``. CIHP and ATR are this with their class names (configs).

    Args:
        flip_pairs: the [left, right] class-id pairs of the label set, kept in ``metainfo['flip_pairs']`` (the
            flip augmentation and the flip TTA take theirs from the config; a test checks they agree); checked
            against the classes.
        palette: default: :func:`parsing_palette` (the VOC colour map LIP's pictures use).
        Others: :class:`SegDataset`'s.
    """

    METAINFO: dict = {}

    def __init__(self, split: str | None = "train_id.txt", img_dir: str = "train_images",
                 ann_dir: str | None = "train_segmentations", img_suffix: str = ".jpg", seg_map_suffix: str = ".png",
                 classes: Sequence[str] | None = None, palette: Sequence[Sequence[int]] | None = None,
                 flip_pairs: Sequence[Sequence[int]] | None = None, **kwargs: Any) -> None:
        names = classes if classes is not None else self.METAINFO.get("classes")
        if not names:
            raise DataError(f"{type(self).__name__} needs classes (the list of class names, background first)")
        if palette is None and classes is not None:  # the class defaults bring their own palette
            palette = parsing_palette(len(names))
        pairs = flip_pairs if flip_pairs is not None else self.METAINFO.get("flip_pairs")
        try:
            self.flip_pairs = check_flip_pairs(pairs, f"{type(self).__name__}.flip_pairs", len(names))
        except ValueError as err:
            raise DataError(str(err)) from None
        super().__init__(split=split, img_dir=img_dir, ann_dir=ann_dir, img_suffix=img_suffix,
                         seg_map_suffix=seg_map_suffix, classes=classes, palette=palette, **kwargs)
        self._metainfo["flip_pairs"] = [list(p) for p in self.flip_pairs]


@DATASETS.register_module()
class LIPDataset(HumanParsingDataset):
    """LIP (Look Into Person; CVPR 2017 and the 2019 challenge): 20 classes incl. background, 30,462 train and
    10,000 val images, ignore 255; left/right pairs 14/15 (arms), 16/17 (legs), 18/19 (shoes). Defaults read the
    training split; the val split is ``split: val_id.txt, img_dir: val_images, ann_dir: val_segmentations``."""

    METAINFO = dict(classes=LIP_CLASSES, palette=parsing_palette(len(LIP_CLASSES)),
                    flip_pairs=[list(p) for p in LIP_FLIP_PAIRS])
