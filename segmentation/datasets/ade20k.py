"""ADE20K scene parsing (SceneParsing / ADEChallengeData2016): 150 classes."""

from __future__ import annotations

from segmentation.datasets.seg_dataset import SegDataset
from segmentation.registry import DATASETS

# The 150 categories of the SceneParsing benchmark (objectInfo150), by their first name, in label order 1..150.
ADE20K_CLASSES: tuple[str, ...] = (
    'wall', 'building', 'sky', 'floor', 'tree', 'ceiling', 'road', 'bed', 'windowpane', 'grass', 'cabinet',
    'sidewalk', 'person', 'earth', 'door', 'table', 'mountain', 'plant', 'curtain', 'chair', 'car', 'water',
    'painting', 'sofa', 'shelf', 'house', 'sea', 'mirror', 'rug', 'field', 'armchair', 'seat', 'fence', 'desk',
    'rock', 'wardrobe', 'lamp', 'bathtub', 'railing', 'cushion', 'base', 'box', 'column', 'signboard',
    'chest of drawers', 'counter', 'sand', 'sink', 'skyscraper', 'fireplace', 'refrigerator', 'grandstand', 'path',
    'stairs', 'runway', 'case', 'pool table', 'pillow', 'screen door', 'stairway', 'river', 'bridge', 'bookcase',
    'blind', 'coffee table', 'toilet', 'flower', 'book', 'hill', 'bench', 'countertop', 'stove', 'palm',
    'kitchen island', 'computer', 'swivel chair', 'boat', 'bar', 'arcade machine', 'hovel', 'bus', 'towel',
    'light', 'truck', 'tower', 'chandelier', 'awning', 'streetlight', 'booth', 'television receiver', 'airplane',
    'dirt track', 'apparel', 'pole', 'land', 'bannister', 'escalator', 'ottoman', 'bottle', 'buffet', 'poster',
    'stage', 'van', 'ship', 'fountain', 'conveyer belt', 'canopy', 'washer', 'plaything', 'swimming pool', 'stool',
    'barrel', 'basket', 'waterfall', 'tent', 'bag', 'minibike', 'cradle', 'oven', 'ball', 'food', 'step', 'tank',
    'trade name', 'microwave', 'pot', 'animal', 'bicycle', 'lake', 'dishwasher', 'screen', 'blanket', 'sculpture',
    'hood', 'sconce', 'vase', 'traffic light', 'tray', 'ashcan', 'fan', 'pier', 'crt screen', 'plate', 'monitor',
    'bulletin board', 'shower', 'radiator', 'glass', 'clock', 'flag',
)


@DATASETS.register_module()
class ADE20KDataset(SegDataset):
    """ADEChallengeData2016 layout: ``images/{training,validation}/*.jpg`` and
    ``annotations/{training,validation}/*.png`` (greyscale, 0 = "other" / unlabelled, 1..150 the classes).

    ``reduce_zero_label`` is True by default, as the benchmark scores 150 classes: label 0 becomes
    ``ignore_index`` and k becomes class k - 1, so the model's class ids index ``ADE20K_CLASSES``. The
    palette is the generated default one (``oars_deploy.draw.get_palette``).
    """

    METAINFO = dict(classes=ADE20K_CLASSES)

    def __init__(self, img_dir: str = 'images/training', ann_dir: str | None = 'annotations/training',
                 img_suffix: str = '.jpg', seg_map_suffix: str = '.png', reduce_zero_label: bool = True,
                 **kwargs) -> None:
        super().__init__(img_dir=img_dir, ann_dir=ann_dir, img_suffix=img_suffix, seg_map_suffix=seg_map_suffix,
                         reduce_zero_label=reduce_zero_label, **kwargs)
