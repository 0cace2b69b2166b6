"""Fixtures shared by the segmentation model tests: base configs shrunk to test size, and a padded batch."""

from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
import yaml
from mmengine.structures import PixelData

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# `.venv/bin/pytest` (prepend import mode) puts tests/ on sys.path but not the repo root, so `segmentation`
# would resolve to the namespace package tests/segmentation and the registry would import nothing.
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from segmentation.structures import SegDataSample  # noqa: E402

MODEL_CFG_DIR = os.path.join(ROOT, "configs", "_base_", "models")
NUM_CLASSES = 4


def load_model_cfg(name: str) -> dict:
    """``model`` of configs/_base_/models/<name>.yaml."""
    with open(os.path.join(MODEL_CFG_DIR, f"{name}.yaml")) as f:
        return yaml.safe_load(f)["model"]


def small_model_cfg(name: str) -> dict:
    """The real base config, narrowed: UNet base 8; DeepLab with a ResNet-18 of width 16 (output stride 8)."""
    cfg = copy.deepcopy(load_model_cfg(name))
    cfg["num_classes"] = NUM_CLASSES
    if name == "unet":
        cfg["backbone"]["base_channels"] = 8
        cfg["decode_head"]["channels"] = 8
        cfg["auxiliary_head"]["channels"] = 8
    else:
        cfg["backbone"].update(depth=18, base_channels=16)
        cfg["decode_head"]["channels"] = 16
        cfg["auxiliary_head"]["channels"] = 8
        if name == "deeplabv3plus_r50":
            cfg["decode_head"]["c1_channels"] = 8
    return cfg


def make_batch(seed: int = 0, with_gt: bool = True) -> dict:
    """Two BGR uint8 images (64x64 and 56x48, so the second is padded) with label maps containing a few
    ignored pixels; the second one pretends to come from a 112x96 original (``ori_shape``)."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(64, 64), (56, 48)]
    ori_shapes = [(64, 64), (112, 96)]
    inputs, samples = [], []
    for (h, w), ori in zip(shapes, ori_shapes):
        inputs.append(torch.randint(0, 256, (3, h, w), generator=gen, dtype=torch.uint8))
        sample = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=ori, img_path=f"img_{h}x{w}.png"))
        if with_gt:
            # blocky labels (8x8 cells) so a tiny model can fit them in a few steps
            cells = torch.randint(0, NUM_CLASSES, (1, h // 8, w // 8), generator=gen)
            gt = cells.repeat_interleave(8, 1).repeat_interleave(8, 2)
            gt[:, :2, :2] = 255
            sample.gt_sem_seg = PixelData(data=gt.to(torch.uint8))  # uint8, as PackSegInputs packs it
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """These models are tiny: one intra-op thread is far faster than two on a loaded shared CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def batch_factory():
    return make_batch


@pytest.fixture(scope="session")
def cfg_factory():
    return small_model_cfg


@pytest.fixture(scope="session")
def base_cfg_loader():
    return load_model_cfg
