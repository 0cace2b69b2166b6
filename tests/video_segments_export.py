"""One export of a shrunk BMN with a tiny recognizer, shared by the localiser export test
(tests/video/export/test_loc_export.py) and the ``video_segments`` predictor test
(tests/deploy/test_vid_segments_predictor.py): exporting a recognizer graph is the slow part, so a session builds the
folder once (per pytest-xdist worker) under its base temporary folder and both reuse it.

The recognizer is the demo TSM (configs/video/tsm/tsm_r18_demo_videos.yaml) cut after its first stage
(``backbone.out_indices: [0]``: stem + 2 blocks, 16-channel features), with random weights; the BMN takes those 16
channels at tscale 16. Snippets of 8 frames every 4.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from demo_utils import ROOT, random_checkpoint

TSM = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
BMN_CFG = os.path.join(ROOT, "configs/video/bmn/bmn_400x100_9e_activitynet_feature.yaml")
FEAT_DIM, TSCALE, DSCALE = 16, 16, 12
SHRINK = [f"model.feat_dim={FEAT_DIM}", f"model.tscale={TSCALE}", f"model.dscale={DSCALE}", "model.num_sample=4",
          "model.num_sample_perbin=2", "model.hidden_dim_1d=16", "model.hidden_dim_2d=8", "model.hidden_dim_3d=16",
          "model.max_proposals=20"]
SNIPPET, STRIDE, TOP_K = 8, 4, 3


def tiny_recognizer_config(folder: Path) -> str:
    """The demo TSM cut after its first stage, written as a resolved YAML config; returns its path."""
    from oars.config import load_config

    path = folder / "tsm_tiny.yaml"
    if not path.exists():
        load_config(TSM, ["model.backbone.out_indices=[0]"]).dump(str(path))
    return str(path)


def bmn_checkpoint(folder: Path, overrides: list[str] = SHRINK) -> str:
    """Random weights of the shrunk BMN (it has no classes, so not demo_utils.random_checkpoint)."""
    import torch
    from mmengine.registry import MODELS

    from oars.config import load_config

    cfg = load_config(BMN_CFG, overrides)
    torch.manual_seed(0)
    model = MODELS.build(copy.deepcopy(cfg.model))
    path = os.path.join(str(folder), "bmn.pth")
    torch.save({"state_dict": model.state_dict()}, path)
    return path


def shared_localizer_export(tmp_path_factory, name: str, config: str, overrides: list[str], weights_key: str,
                            write_weights, task_options: dict) -> dict:
    """A localiser exported with the tiny recognizer once per session (per pytest-xdist worker) under
    ``<basetemp>/<name>``: ``{'dir', 'result' (export_model's, None when reused), 'recognizer_config',
    'recognizer_weights', weights_key: the localiser's checkpoint}``. ``write_weights(folder)`` writes the
    localiser's random checkpoint into ``folder`` and returns its path (its file name must not change)."""
    from oars.config import load_config
    from oars.pipelines.export import export_model

    base = tmp_path_factory.getbasetemp() / name
    out = base / "export"
    base.mkdir(exist_ok=True)
    rcfg = tiny_recognizer_config(base)
    info = {"dir": out, "result": None, "recognizer_config": rcfg, "recognizer_weights": str(base / "model.pth")}
    if (out / "deploy.yaml").exists():
        info[weights_key] = str(base / f"{weights_key.split('_')[0]}.pth")
        return info
    random_checkpoint(rcfg, [], base)
    info[weights_key] = write_weights(base)
    info["result"] = export_model(load_config(config, overrides), info[weights_key], str(out),
                                  task_options={"recognizer_config": rcfg,
                                                "recognizer_weights": info["recognizer_weights"], **task_options})
    return info


def segments_export(tmp_path_factory) -> dict:
    """The shared shrunk BMN export (see :func:`shared_localizer_export`; its weights: ``bmn_weights``, bmn.pth).
    Call it inside the video scope."""
    return shared_localizer_export(tmp_path_factory, "video_segments_export", BMN_CFG, SHRINK, "bmn_weights",
                                   bmn_checkpoint, {"snippet": SNIPPET, "stride": STRIDE, "top_k": TOP_K})
