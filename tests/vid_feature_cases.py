"""Shrunk frame-feature configs (AttentionLSTM / AttentionCluster / NeXtVLAD on rgb 12-d + audio 6-d features,
max_frames 8) with random-weight checkpoints, for tests/video/export/test_vid_feature_export.py and
tests/deploy/test_vid_feature_predictor.py."""

from __future__ import annotations

import copy
import os.path as osp

import torch
import yaml
from mmengine.config import Config
from mmengine.registry import DefaultScope

import video.models  # noqa: F401  (registers the video models)
from video.registry import MODELS

CLASSES = ["left", "right", "up", "down", "rotate_cw"]
DIMS = {"rgb": 12, "audio": 6}
MAX_FRAMES = 8

HEADS = {
    "attention_lstm": dict(type="AttentionLSTM", feature_dims=DIMS, embedding_size=8, lstm_size=6, drop_rate=0.5,
                           fc_sizes=[16, 12], fc_acts=["relu", "tanh"]),
    "attention_cluster": dict(type="AttentionCluster", feature_dims=DIMS, cluster_nums={"rgb": 4, "audio": 3},
                              drop_rate=0.5, fc_sizes=[16, 12]),
    "nextvlad": dict(type="NeXtVLAD", feature_dims=DIMS, cluster_size={"rgb": 4, "audio": 3},
                     groups={"rgb": 4, "audio": 2}, expansion=2, hidden_size=16, gating_reduction=4, drop_rate=0.5),
}


def feature_config(folder: str, name: str, multi_label: bool = False, **export: object) -> str:
    """Write the shrunk config of head ``name`` to ``folder/<name>_shrunk.yaml``; returns its path."""
    pipeline = [dict(type="LoadFeatures", modalities=["rgb", "audio"], max_frames=MAX_FRAMES, test_mode=True),
                dict(type="PackFeatureInputs")]
    cfg = dict(
        default_scope="video",
        model=dict(type="FeatureRecognizer", num_classes=len(CLASSES), multi_label=multi_label,
                   data_preprocessor=dict(type="ActionDataPreprocessor"), head=copy.deepcopy(HEADS[name])),
        test_dataloader=dict(batch_size=2, dataset=dict(type="FeatureDataset", ann_file="val_list.txt",
                                                        classes=list(CLASSES), multi_label=multi_label,
                                                        test_mode=True, pipeline=pipeline)),
        export=dict(export) or dict(batch=1),
    )
    path = osp.join(folder, f"{name}_shrunk.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    return path


def checkpoint(config: str, seed: int = 0) -> str:
    """A random-weight checkpoint of the config's model next to it (BatchNorm statistics randomised, linear
    weights scaled up so that the class scores differ)."""
    cfg = Config.fromfile(config)
    torch.manual_seed(seed)
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, 0.0, 0.5)
    path = osp.splitext(config)[0] + ".pth"
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": list(CLASSES)}}}, path)
    return path
