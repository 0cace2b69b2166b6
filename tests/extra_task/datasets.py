"""The dominant-shape dataset over the demo shapes layout (``images/<split>/*.png`` + ``labels/<split>/*.png``) and
the step that packs a sample for the model."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from mmengine.structures import BaseDataElement
from PIL import Image

import oars.data  # noqa: F401  (registers the core transforms: LoadImageFromFile, Resize, ...)
from extra_task.registry import DATASETS, TRANSFORMS
from oars.data.dataset import OarsDataset
from oars.errors import DataFileNotFoundError

CLASSES = ("circle", "square", "triangle")  # label-map ids 1, 2, 3 of oars.data.demo_shapes (0 is background)


def dominant_shape(label_map: np.ndarray) -> int:
    """The class index (0..2) of the shape covering the most pixels of a demo label map (ids 1..3)."""
    counts = np.bincount(label_map.reshape(-1).astype(np.int64), minlength=len(CLASSES) + 1)[1:len(CLASSES) + 1]
    return int(counts.argmax())


@DATASETS.register_module()
class DominantShapeDataset(OarsDataset):
    """``data_root/img_dir/<name>.png`` with the label ``dominant_shape(data_root/ann_dir/<name>.png)``."""

    METAINFO: dict = {"classes": CLASSES}
    transform_registry = TRANSFORMS

    def __init__(self, data_root: str = "", img_dir: str = "images/train", ann_dir: str = "labels/train",
                 classes: Sequence[str] | None = None, palette: Sequence[Sequence[int]] | None = None,
                 pipeline: Sequence[dict | Callable] = (), test_mode: bool = False, lazy_init: bool = False,
                 serialize_data: bool = True, max_refetch: int = 1000) -> None:
        super().__init__(classes=classes, palette=palette, pipeline=pipeline, test_mode=test_mode,
                         data_root=data_root, data_prefix={"img_path": img_dir, "seg_map_path": ann_dir},
                         lazy_init=lazy_init, serialize_data=serialize_data, max_refetch=max_refetch)

    def load_data_list(self) -> list[dict]:
        img_dir, ann_dir = self.data_prefix["img_path"], self.data_prefix["seg_map_path"]
        if not os.path.isdir(img_dir):
            raise DataFileNotFoundError(f"image folder not found: {img_dir}")
        infos = []
        for name in sorted(n for n in os.listdir(img_dir) if n.endswith(".png")):
            ann = os.path.join(ann_dir, name)
            if not os.path.isfile(ann):
                raise DataFileNotFoundError(f"label map {ann} not found for image {os.path.join(img_dir, name)}")
            label = dominant_shape(np.array(Image.open(ann)))
            infos.append({"img_path": os.path.join(img_dir, name), "gt_label": label})
        return infos


@TRANSFORMS.register_module()
class PackShapeInputs:
    """``img`` (H x W x 3 uint8 BGR) -> ``inputs`` [3, H, W] uint8; a data sample with the image's metainfo and
    ``gt_label`` when the sample has one (inference has none)."""

    META_KEYS = ("img_path", "ori_shape", "img_shape")

    def __call__(self, results: dict) -> dict:
        inputs = torch.from_numpy(np.ascontiguousarray(results["img"].transpose(2, 0, 1)))
        sample = BaseDataElement(metainfo={k: results[k] for k in self.META_KEYS if k in results})
        if "gt_label" in results:
            sample.gt_label = torch.tensor(int(results["gt_label"]))
        return {"inputs": inputs, "data_samples": sample}
