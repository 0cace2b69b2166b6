"""Shrunk video configs (depth 18, base width 16 or 8, 32-pixel crops, T = 4) with random-weight checkpoints, for
the export and deployment tests (tests/video/export, tests/deploy/test_vid_*)."""

from __future__ import annotations

import copy
import os.path as osp

import torch
import yaml
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope

import video  # noqa: F401  (registers the video modules)

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
CLASSES = ["left", "right", "up", "down", "rotate_cw"]
T, CROP, SHORT = 4, 32, 40


def _pre(fmt: str) -> dict:
    return dict(type="ActionDataPreprocessor", mean=MEAN, std=STD, bgr_to_rgb=True, format_shape=fmt)


MODELS_CFG = {
    "tsm": dict(type="Recognizer2D", num_classes=len(CLASSES), data_preprocessor=_pre("NCHW"),
                backbone=dict(type="ResNetTSM", depth=18, base_channels=16, num_segments=T),
                cls_head=dict(type="TSMHead", average_clips="prob")),
    "tsn": dict(type="Recognizer2D", num_classes=len(CLASSES), num_segments=T, data_preprocessor=_pre("NCHW"),
                backbone=dict(type="ResNet", depth=18, base_channels=16, out_indices=[3]),
                cls_head=dict(type="TSNHead", average_clips="score")),
    "r2plus1d": dict(type="Recognizer3D", num_classes=len(CLASSES), data_preprocessor=_pre("NCTHW"),
                     backbone=dict(type="R2Plus1D", depth=18, base_channels=8),
                     cls_head=dict(type="I3DHead", average_clips="prob")),
    # StNet: super-images of STNET_CLIP_LEN frames x STNET_SEGMENTS segments (the Kinetics config's 5 x 7)
    "stnet": dict(type="Recognizer2D", num_classes=len(CLASSES), data_preprocessor=_pre("NCHW"),
                  backbone=dict(type="StNet", depth=18, base_channels=16, num_clips=7, clip_len=5),
                  cls_head=dict(type="StNetHead", mid_channels=32, average_clips="prob")),
}
STNET_CLIP_LEN, STNET_SEGMENTS = 5, 7


def test_pipeline(name: str, crop: str = "CenterCrop", num_clips: int | None = None) -> list[dict]:
    """VideoInit -> SampleFrames (test) -> VideoDecode -> Resize (short side) -> crop -> FormatShape -> Pack."""
    if name == "stnet":
        sample = dict(type="SampleFrames", clip_len=STNET_CLIP_LEN, frame_interval=1,
                      num_clips=num_clips or STNET_SEGMENTS, test_mode=True)
        fmt = "NCHW"
    elif name == "r2plus1d":
        sample = dict(type="SampleFrames", clip_len=T, frame_interval=2, num_clips=num_clips or 1, test_mode=True)
        fmt = "NCTHW"
    else:
        sample = dict(type="SampleFrames", clip_len=1, frame_interval=1, num_clips=num_clips or T, test_mode=True)
        fmt = "NCHW"
    return [dict(type="VideoInit", backend="pyav"), sample, dict(type="VideoDecode"),
            dict(type="Resize", scale=[-1, SHORT]), dict(type=crop, crop_size=CROP),
            dict(type="FormatShape", input_format=fmt), dict(type="PackActionInputs")]


def video_config(folder: str, name: str, crop: str = "CenterCrop", num_clips: int | None = None,
                 **export: object) -> str:
    """Write the shrunk config of ``name`` to ``folder/<name>_shrunk.yaml``; returns its path."""
    cfg = dict(
        default_scope="video",
        model=copy.deepcopy(MODELS_CFG[name]),
        test_dataloader=dict(batch_size=1, dataset=dict(type="VideoDataset", ann_file="val_list.txt",
                                                        classes=list(CLASSES),
                                                        pipeline=test_pipeline(name, crop, num_clips))),
        export=dict(export) or dict(batch=1),
    )
    path = osp.join(folder, f"{name}_shrunk.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    return path


def checkpoint(config: str, seed: int = 0) -> str:
    """A random-weight checkpoint of the config's model next to it (BN statistics randomised too, so they
    matter; the linear layers scaled up so that the classes' probabilities differ)."""
    cfg = Config.fromfile(config)
    torch.manual_seed(seed)
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, 0.0, 0.05)
    path = osp.splitext(config)[0] + ".pth"
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": list(CLASSES)}}}, path)
    return path
