"""One export of a shrunk, RGB-only C-TCN with the tiny recognizer of tests/video_segments_export.py, shared by the
C-TCN export test (tests/video/export/test_ctcn_export.py) and the ``video_segments`` predictor's C-TCN test
(tests/deploy/test_vid_ctcn_segments.py): exporting the recognizer graph is the slow part, so a session builds the
folder once (per pytest-xdist worker) under its base temporary folder and both reuse it.

The C-TCN (configs/video/ctcn/ctcn_activitynet_feature.yaml shrunk as tests/video/localization/test_ctcn.py does)
reads one ``rgb`` stream of the recognizer's 16-channel features at temporal_dim 32: 4 pyramid levels, 3 anchors
per position, 45 anchors, 3 classes; random weights, saved with class names of its own (not the recognizer's).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from demo_utils import ROOT
from video_segments_export import FEAT_DIM, SNIPPET, STRIDE, shared_localizer_export

CTCN_CFG = os.path.join(ROOT, "configs/video/ctcn/ctcn_activitynet_feature.yaml")
TEMPORAL_DIM, NUM_ANCHORS = 32, 45
CTCN_CLASSES = ["jump", "run", "wave"]
STREAM = f"{{_delete_: true, rgb: {FEAT_DIM}}}"
CTCN_SHRINK = [
    f"model.num_classes={len(CTCN_CLASSES)}", f"model.streams={STREAM}", f"model.temporal_dim={TEMPORAL_DIM}",
    "model.loc_channels=8", "model.cls_channels=8", "model.backbone.stem_channels=[4, 8]",
    "model.backbone.stage_blocks=[1, 1, 1, 1]", "model.backbone.stage_planes=[4, 4, 8, 8]",
    "model.backbone.fpn_channels=8", "model.backbone.num_extra_levels=0",
    "model.anchor_generator.strides=[4, 8, 16, 32]",
    "model.anchor_generator.widths=[[1.0, 0.8, 1.2], [1.0, 0.8, 1.2], [1.0, 0.8, 1.2], [1.0, 0.8, 1.2]]",
    f"test_dataloader.dataset.pipeline.0.streams={STREAM}",
    f"test_dataloader.dataset.pipeline.1.temporal_dim={TEMPORAL_DIM}",
]


def ctcn_checkpoint(folder: Path, overrides: list[str] = CTCN_SHRINK) -> str:
    """Random weights of the shrunk C-TCN with :data:`CTCN_CLASSES` as the checkpoint's class names."""
    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(CTCN_CFG, overrides)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    path = os.path.join(str(folder), "ctcn.pth")
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": CTCN_CLASSES}}}, path)
    return path


def ctcn_export(tmp_path_factory) -> dict:
    """The shared shrunk C-TCN export (``video_segments_export.shared_localizer_export``; its weights:
    ``ctcn_weights``, ctcn.pth). Call it inside the video scope."""
    return shared_localizer_export(tmp_path_factory, "video_ctcn_export", CTCN_CFG, CTCN_SHRINK, "ctcn_weights",
                                   ctcn_checkpoint, {"snippet": SNIPPET, "stride": STRIDE})
