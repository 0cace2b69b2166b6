"""Config checks of video configs (used by tests/test_configs.py): shrink the model, run it in all modes on a
synthetic batch of clips (or frame features), run the pipelines on a synthetic video (or feature file).
The full-size parameter counts are pinned in tests/model_sizes.py."""

from __future__ import annotations

import copy

import numpy as np
import torch
from config_checks_ctcn import run_ctcn_modes, run_ctcn_pipelines, shrink_ctcn
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope
from model_modes import loss_then_predict

SIZE = 32  # frame side of the shrunk runs
FEATURE_FRAMES = 12


def shrink_model(model_cfg: dict) -> dict:
    """Depth 18 at 1/8 width (2D, 3D) or narrow feature models: the same architecture, test-sized."""
    cfg = copy.deepcopy(model_cfg)
    if cfg["type"] == "BMN":
        return shrink_bmn(cfg)
    if cfg["type"] == "CTCN":
        return shrink_ctcn(cfg)
    if cfg["type"] == "FeatureRecognizer":
        head = cfg["head"]
        if head["type"] == "AttentionLSTM":
            head.update(embedding_size=8, lstm_size=8, fc_sizes=[16, 16])
        elif head["type"] == "AttentionCluster":
            head.update(cluster_nums=2, fc_sizes=[16, 16])
        elif head["type"] == "NeXtVLAD":
            head.update(cluster_size=4, groups=2, hidden_size=16, gating_reduction=4)
        return cfg
    backbone = cfg["backbone"]
    if backbone["type"] in ("ResNet", "ResNetTSM", "ResNetNL", "StNet"):
        backbone.update(depth=18, base_channels=8)
        backbone.pop("non_local", None)  # the default mask follows the depth
    elif backbone["type"] == "R2Plus1D":
        backbone.update(depth=18, base_channels=8)
    head = cfg["cls_head"]
    if "mid_channels" in head:
        head["mid_channels"] = 16
    return cfg


def _frames_per_view(model: torch.nn.Module) -> int:
    segments = getattr(model, "num_segments", None)
    return int(segments) if segments else 8


def _clip_batch(model: torch.nn.Module, num_classes: int, views: int, n: int = 2) -> dict:
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    t = _frames_per_view(model)
    fmt = model.data_preprocessor.format_shape
    shape = (views * t, 3, SIZE, SIZE) if fmt == "NCHW" else (views, 3, t, SIZE, SIZE)
    inputs = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=g) for _ in range(n)]
    samples = []
    for i in range(n):
        sample = ActionDataSample(metainfo={"img_shape": (SIZE, SIZE), "num_clips": views, "num_crops": 1})
        sample.set_gt_label(i % num_classes)
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


def _feature_batch(model: torch.nn.Module, num_classes: int, n: int = 2) -> dict:
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    dims = model.head.feature_dims
    lengths = [FEATURE_FRAMES, FEATURE_FRAMES - 4][:n]
    inputs = {m: [torch.randn(length, d, generator=g) for length in lengths] for m, d in dims.items()}
    samples = []
    for i, length in enumerate(lengths):
        sample = ActionDataSample(metainfo={"num_frames": length})
        if model.multi_label:
            sample.set_gt_label([i % num_classes, (i + 3) % num_classes], num_classes, multi_label=True)
        else:
            sample.set_gt_label(i % num_classes)
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


def run_all_modes(model: torch.nn.Module, num_classes: int) -> None:
    """loss (finite, backpropagates), predict (scores over the classes) and tensor ([B, C]) on a synthetic batch;
    recognizers are tested with 2 test views (what ThreeCrop / multi-clip testing gives) averaged in the head."""
    if type(model).__name__ == "BMN":
        run_bmn_modes(model)
        return
    if type(model).__name__ == "CTCN":
        run_ctcn_modes(model)
        return
    if type(model).__name__ == "FeatureRecognizer":
        preds, scores = loss_then_predict(model, lambda: _feature_batch(model, num_classes))
    else:
        calls = iter((1, 2, 2))  # one view to train, two to test (predict, then the tensor batch)
        preds, scores = loss_then_predict(model, lambda: _clip_batch(model, num_classes, next(calls)))
    assert scores.shape == (2, num_classes) and torch.isfinite(scores).all()
    for pred in preds:
        assert pred.pred_score.shape == (num_classes,) and 0 <= int(pred.pred_label) < num_classes


def _synthetic_video(path, num_frames: int = 24, size=(48, 64)) -> str:
    from video.demo_data import write_video

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (num_frames, *size, 3), dtype=np.uint8)
    write_video(path, frames)
    return str(path)


def _synthetic_features(path, multi_label: bool) -> str:
    rng = np.random.default_rng(0)
    np.savez(path, rgb=rng.integers(0, 256, (20, 1024), dtype=np.uint8),
             audio=rng.integers(0, 256, (20, 128), dtype=np.uint8))
    return str(path)


def run_pipelines(cfg, tmp_path) -> None:
    """Each train/test pipeline runs on a synthetic 24-frame 64x48 video (or a 20-frame feature file) and packs
    what the model's data preprocessor takes: uint8 [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW) clips whose
    frames per view match the backbone, or float [T, D] features per modality."""
    if cfg.model.type == "BMN":
        run_bmn_pipelines(cfg, tmp_path)
        return
    if cfg.model.type == "CTCN":
        run_ctcn_pipelines(cfg, tmp_path)
        return
    num_classes = cfg.model.num_classes
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        ds = cfg[split]["dataset"]
        multi_label = bool(ds.get("multi_label", False))
        label = [0, num_classes - 1] if multi_label else num_classes - 1
        results = {"label": label, "multi_label": multi_label, "num_classes": num_classes}
        if ds["type"] == "FeatureDataset":
            results["filename"] = _synthetic_features(tmp_path / "feat.npz", multi_label)
        else:
            results.update(filename=_synthetic_video(tmp_path / "clip.mp4"), start_index=0, modality="RGB")
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(copy.deepcopy(ds["pipeline"]))
        np.random.seed(0)
        packed = pseudo_collate([pipeline(results)])
        sample = packed["data_samples"][0]
        if multi_label:
            assert sample.gt_label.shape == (num_classes,) and sample.gt_label.sum() == 2
        else:
            assert int(sample.gt_label) == num_classes - 1
        inputs = packed["inputs"]
        if ds["type"] == "FeatureDataset":
            feats = inputs[0] if isinstance(inputs, list) else inputs
            for modality, dim in cfg.model.head.feature_dims.items():
                tensor = feats[modality][0] if isinstance(feats[modality], list) else feats[modality]
                assert tensor.dtype == torch.float32 and tensor.shape[-1] == dim
            continue
        clip = inputs[0]
        assert clip.dtype == torch.uint8
        fmt = cfg.model.data_preprocessor.format_shape
        backbone = cfg.model.backbone
        frames = backbone.get("num_segments") or (backbone["num_clips"] * backbone["clip_len"]
                                                   if backbone["type"] == "StNet" else None)
        if fmt == "NCHW":
            assert clip.dim() == 4 and clip.shape[1] == 3
            if frames:
                assert clip.shape[0] % frames == 0, (split, clip.shape, frames)
        else:
            assert clip.dim() == 5 and clip.shape[1] == 3


# ---- BMN (temporal localization on feature sequences [C, T])

def shrink_bmn(cfg: dict) -> dict:
    """BMN at 16 channels over 16 positions (longest proposal 12), 4 samples of 2 points per proposal."""
    cfg.update(feat_dim=16, tscale=16, dscale=12, num_sample=4, num_sample_perbin=2, hidden_dim_1d=16,
               hidden_dim_2d=8, hidden_dim_3d=16)
    return cfg


def _bmn_batch(model: torch.nn.Module, n: int = 2) -> dict:
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(model.feat_dim, model.tscale, generator=g) for _ in range(n)]
    boxes = [torch.tensor([[0.1, 0.45], [0.6, 0.9]]), torch.zeros(0, 2)]  # the second video has no segment
    samples = []
    for i in range(n):
        sample = ActionDataSample(metainfo={"video_name": f"v{i}", "duration_second": 40.0, "feature_second": 38.4})
        sample.gt_bbox = boxes[i % len(boxes)]
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


def run_bmn_modes(model: torch.nn.Module) -> None:
    """loss (three finite losses that backpropagate), predict (proposals [K, 3] in seconds within the span the
    features cover, by decreasing score) and tensor (confidence [B, 2, D, T], start and end [B, T])."""
    preds, outs = loss_then_predict(model, lambda: _bmn_batch(model))
    confidence, start, end = outs
    assert confidence.shape == (2, 2, model.dscale, model.tscale)
    assert start.shape == end.shape == (2, model.tscale)
    for pred in preds:
        props = pred.proposals
        assert props.dtype == torch.float32 and props.dim() == 2 and props.shape[1] == 3
        assert 0 < props.shape[0] <= model.max_proposals
        assert (props[:, 0] >= 0).all() and (props[:, 1] <= 38.4 + 1e-4).all() and (props[:, 0] < props[:, 1]).all()
        assert (props[1:, 2] <= props[:-1, 2]).all()


def run_bmn_pipelines(cfg, tmp_path) -> None:
    """Each pipeline runs on a synthetic 37-snippet feature file (in the dataset's format) and packs float32
    [C, 100] features; the labelled ones carry ``gt_bbox`` [N, 2] in [0, 1]."""
    rng = np.random.default_rng(0)
    feat_dim = cfg.model.feat_dim
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        ds = cfg[split]["dataset"]
        suffix = ds.get("feature_suffix", ".npy")
        path = tmp_path / f"video{suffix}"
        feats = rng.standard_normal((37, feat_dim)).astype(np.float32)
        if suffix == ".csv":
            header = ",".join(f"f{i}" for i in range(feat_dim))
            np.savetxt(path, feats, delimiter=",", header=header, comments="")
        else:
            np.save(path, feats)
        results = {"video_name": "video", "feature_path": str(path), "duration_second": 40.0,
                   "duration_frame": 1200, "feature_frame": 1152, "feature_second": 38.4,
                   "gt_segments": np.array([[3.0, 12.5], [20.0, 38.4]]), "gt_labels": np.zeros(2, dtype=np.int64)}
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(copy.deepcopy(ds["pipeline"]))
        packed = pseudo_collate([pipeline(results)])
        inputs = packed["inputs"][0]
        assert inputs.dtype == torch.float32 and inputs.shape == (feat_dim, cfg.model.tscale), (split, inputs.shape)
        sample = packed["data_samples"][0]
        assert sample.metainfo["feature_second"] == 38.4
        if "gt_bbox" in sample:
            assert sample.gt_bbox.shape == (2, 2) and 0 <= sample.gt_bbox.min() and sample.gt_bbox.max() <= 1
