"""Config checks of C-TCN configs (used by tests/config_checks_video.py): shrink, run in all modes on a
synthetic batch of feature sequences, run the pipelines on a synthetic feature file."""

from __future__ import annotations

import copy

import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope
from model_modes import loss_then_predict


def shrink_ctcn(cfg: dict) -> dict:
    """One bottleneck per stage at 4-8 channels, 5 pyramid levels over 64 steps, 3 anchors per position, the
    same streams at 3 concepts each and 3 classes."""
    cfg.update(num_classes=3, temporal_dim=64, loc_channels=8, cls_channels=8,
               streams={name: 3 for name in cfg.get("streams", {"rgb": 201})})
    cfg["backbone"].update(stem_channels=[4, 8], stage_blocks=[1, 1, 1, 1], stage_planes=[4, 4, 8, 8],
                           fpn_channels=8, num_extra_levels=1)
    cfg["anchor_generator"].update(strides=[4, 8, 16, 32, 64], widths=[[1.0, 0.8, 1.2]] * 4 + [[1.0, 0.9, 0.8]])
    return cfg


def _batch(model: torch.nn.Module, n: int = 2) -> dict:
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(model.concepts, model.temporal_dim, generator=g) for _ in range(n)]
    boxes = [torch.tensor([[0.1, 0.45], [0.6, 0.9]]), torch.zeros(0, 2)]  # the second video has no segment
    samples = []
    for i in range(n):
        sample = ActionDataSample(metainfo={"video_name": f"v{i}", "duration_second": 40.0, "feature_second": 38.4})
        sample.gt_bbox = boxes[i % 2]
        sample.gt_labels = torch.arange(len(boxes[i % 2])) % model.num_classes
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


def run_ctcn_modes(model: torch.nn.Module) -> None:
    """loss (two finite losses that backpropagate), predict (detections [K, 4] in seconds within the features'
    span, by decreasing score, class ids in range) and tensor (offsets [B, A, 2], probabilities [B, A, K + 1])."""
    preds, (loc, probs) = loss_then_predict(model, lambda: _batch(model))
    anchors = model.anchors.shape[0]
    assert loc.shape == (2, anchors, 2) and probs.shape == (2, anchors, model.num_classes + 1)
    assert torch.allclose(probs.sum(-1), torch.ones(2, anchors), atol=1e-5)
    for pred in preds:
        dets = pred.segments
        assert dets.dtype == torch.float32 and dets.dim() == 2 and dets.shape[1] == 4 and dets.shape[0] > 0
        assert (dets[:, 0] >= 0).all() and (dets[:, 1] <= 38.4 + 1e-4).all() and (dets[:, 0] < dets[:, 1]).all()
        assert (dets[1:, 2] <= dets[:-1, 2]).all()
        assert ((dets[:, 3] >= 0) & (dets[:, 3] < model.num_classes)).all()
        assert pred.proposals.shape[1] == 3


def _write(path, feats) -> None:
    if str(path).endswith(".csv"):
        header = ",".join(f"f{i}" for i in range(feats.shape[1]))
        np.savetxt(path, feats, delimiter=",", header=header, comments="")
    else:
        np.save(path, feats)


def run_ctcn_pipelines(cfg, tmp_path) -> None:
    """Each pipeline runs on synthetic feature files (one per stream, 37 and 36 snippets, for
    ``LoadLocalizationStreams``; else one of the streams' total width) and packs float32 [C, temporal_dim]; the
    labelled ones carry ``gt_bbox`` [N, 2] in [0, 1] and ``gt_labels``."""
    rng = np.random.default_rng(0)
    width = sum(cfg.model.streams.values())
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        ds = cfg[split]["dataset"]
        suffix = ds.get("feature_suffix", ".npy")
        path = tmp_path / f"video{suffix}"
        loader = ds["pipeline"][0]
        if loader["type"] == "LoadLocalizationStreams":
            assert dict(loader["streams"]) == dict(cfg.model.streams), (split, "pipeline and model streams differ")
            for k, (stream, w) in enumerate(loader["streams"].items()):
                (tmp_path / stream).mkdir(exist_ok=True)
                _write(tmp_path / stream / path.name, rng.standard_normal((37 - k, w)).astype(np.float32))
        else:
            _write(path, rng.standard_normal((37, width)).astype(np.float32))
        results = {"video_name": "video", "feature_path": str(path), "duration_second": 40.0,
                   "feature_second": 40.0, "gt_segments": np.array([[3.0, 12.5], [20.0, 38.4]]),
                   "gt_labels": np.array([0, cfg.model.num_classes - 1], dtype=np.int64)}
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(copy.deepcopy(ds["pipeline"]))
        packed = pseudo_collate([pipeline(results)])
        inputs = packed["inputs"][0]
        assert inputs.dtype == torch.float32 and inputs.shape == (width, cfg.model.temporal_dim), (split, inputs.shape)
        sample = packed["data_samples"][0]
        assert sample.gt_bbox.shape == (2, 2) and 0 <= sample.gt_bbox.min() and sample.gt_bbox.max() <= 1
        assert sample.gt_labels.tolist() == [0, cfg.model.num_classes - 1]
