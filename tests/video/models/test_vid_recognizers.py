"""Recognizer2D (TSN on the oars ResNet, TSM, C2D non-local) and Recognizer3D (R(2+1)D), shrunk: loss (finite,
backpropagates), predict (probabilities summing to 1; views averaged as a manual per-view average), tensor mode;
multi-label; num_classes set once."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.registry import MODELS, DefaultScope

import video.models  # noqa: F401  (registers the video models)
from video.structures import ActionDataSample

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
NUM_CLASSES, T, SIZE = 5, 4, 32


def pre(fmt: str) -> dict:
    return dict(type="ActionDataPreprocessor", mean=MEAN, std=STD, bgr_to_rgb=True, format_shape=fmt)


CONFIGS = {
    "tsn": dict(type="Recognizer2D", num_classes=NUM_CLASSES, num_segments=T, data_preprocessor=pre("NCHW"),
                backbone=dict(type="ResNet", depth=18, base_channels=8, out_indices=[3]),
                cls_head=dict(type="TSNHead")),
    "tsm": dict(type="Recognizer2D", num_classes=NUM_CLASSES, data_preprocessor=pre("NCHW"),
                backbone=dict(type="ResNetTSM", depth=18, base_channels=8, num_segments=T),
                cls_head=dict(type="TSMHead")),
    "nl": dict(type="Recognizer2D", num_classes=NUM_CLASSES, data_preprocessor=pre("NCHW"),
               backbone=dict(type="ResNetNL", depth=18, base_channels=8, num_segments=T),
               cls_head=dict(type="TSNHead")),
    "r2plus1d": dict(type="Recognizer3D", num_classes=NUM_CLASSES, data_preprocessor=pre("NCTHW"),
                     backbone=dict(type="R2Plus1D", depth=18, base_channels=8), cls_head=dict(type="I3DHead")),
}


def build(name: str, **head: object) -> torch.nn.Module:
    cfg = copy.deepcopy(CONFIGS[name])
    cfg["cls_head"].update(head)
    with DefaultScope.overwrite_default_scope("video"):
        return MODELS.build(cfg)


def clips(name: str, batch: int, views: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (views * T, 3, SIZE, SIZE) if name != "r2plus1d" else (views, 3, T, SIZE, SIZE)
    return [torch.randint(0, 256, shape, dtype=torch.uint8, generator=g) for _ in range(batch)]


def batch(name: str, views: int = 1, multi_label: bool = False) -> dict:
    samples = [ActionDataSample().set_gt_label([1, 3] if multi_label else 1, NUM_CLASSES, multi_label),
               ActionDataSample().set_gt_label([0] if multi_label else 4, NUM_CLASSES, multi_label)]
    return dict(inputs=clips(name, 2, views), data_samples=samples)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_modes(name):
    model = build(name)
    model.train()
    data = model.data_preprocessor(batch(name), training=True)
    losses = model(**data, mode="loss")
    assert set(losses) == {"loss_cls", "top1_acc"} and torch.isfinite(losses["loss_cls"])
    losses["loss_cls"].backward()
    assert model.cls_head.fc_cls.weight.grad.abs().sum() > 0
    first = next(p for p in model.backbone.parameters() if p.requires_grad)
    assert first.grad is not None and torch.isfinite(first.grad).all()
    model.eval()
    with torch.no_grad():
        data = model.data_preprocessor(batch(name, views=2), training=False)
        preds = model(**data, mode="predict")
        scores = model(data["inputs"], mode="tensor")
    assert scores.shape == (2, NUM_CLASSES)
    for p, s in zip(preds, scores):
        assert p.pred_score.shape == (NUM_CLASSES,) and p.pred_label.shape == (1,)
        torch.testing.assert_close(p.pred_score.sum(), torch.tensor(1.0))
        torch.testing.assert_close(p.pred_score, s)  # average_clips 'prob': tensor mode gives the probabilities


@pytest.mark.parametrize(("name", "average_clips"), [("tsm", "prob"), ("tsm", "score"), ("r2plus1d", "prob")])
def test_view_averaging_matches_manual(name, average_clips):
    """2 clips x 2 crops = 4 views (views-major in the sample) -> one score = the manual average of per-view runs."""
    model = build(name, average_clips=average_clips).eval()
    views = 4
    data = model.data_preprocessor(dict(inputs=clips(name, 1, views, seed=1)), training=False)
    inputs = data["inputs"]  # [1, V*T, ...] or [1, V, ...]
    per_view = []
    single = build(name, average_clips="score").eval()
    single.load_state_dict(model.state_dict())
    with torch.no_grad():
        for v in range(views):
            one = inputs[:, v * T:(v + 1) * T] if name != "r2plus1d" else inputs[:, v:v + 1]
            per_view.append(single(one, mode="tensor")[0])  # logits of that view alone
        logits = torch.stack(per_view)
        expected = logits.softmax(-1).mean(0) if average_clips == "prob" else logits.mean(0).softmax(-1)
        pred = model(inputs, [ActionDataSample()], mode="predict")[0].pred_score
    torch.testing.assert_close(pred, expected, atol=1e-5, rtol=1e-5)


def test_average_clips_none_keeps_views():
    model = build("tsm", average_clips=None).eval()
    data = model.data_preprocessor(dict(inputs=clips("tsm", 2, 3)), training=False)
    with torch.no_grad():
        assert model(data["inputs"], mode="tensor").shape == (2, 3, NUM_CLASSES)
        with pytest.raises(ValueError, match="average_clips=None keeps the 3 views apart"):
            model(data["inputs"], mode="predict")


def test_multi_label():
    model = build("r2plus1d", multi_label=True)
    assert type(model.cls_head.loss_cls).__name__ == "BCELossWithLogits"
    model.train()
    data = model.data_preprocessor(batch("r2plus1d", multi_label=True), training=True)
    losses = model(**data, mode="loss")
    assert set(losses) == {"loss_cls"} and torch.isfinite(losses["loss_cls"])
    model.eval()
    with torch.no_grad():
        pred = model(**model.data_preprocessor(batch("r2plus1d", multi_label=True)), mode="predict")[0]
    assert ((pred.pred_score > 0) & (pred.pred_score < 1)).all()  # per-class sigmoid, not a softmax
    with pytest.raises(ValueError, match="multi_label needs gt_label as a multi-hot"):
        model.train()
        model(**model.data_preprocessor(batch("r2plus1d"), training=True), mode="loss")


def test_num_classes_set_once():
    cfg = copy.deepcopy(CONFIGS["tsm"])
    cfg["cls_head"]["num_classes"] = 7
    with DefaultScope.overwrite_default_scope("video"), pytest.raises(ValueError, match="cls_head.num_classes=7"):
        MODELS.build(cfg)
    cfg["cls_head"]["num_classes"] = NUM_CLASSES  # the same value is accepted
    with DefaultScope.overwrite_default_scope("video"):
        assert MODELS.build(cfg).cls_head.num_classes == NUM_CLASSES


def test_bad_inputs_are_named():
    model = build("tsm").eval()
    with pytest.raises(ValueError, match="not a multiple of num_segments=4"):
        model(torch.zeros(1, 6, 3, SIZE, SIZE), mode="tensor")
    cfg = copy.deepcopy(CONFIGS["tsm"])
    cfg["num_segments"] = 8
    with DefaultScope.overwrite_default_scope("video"), pytest.raises(ValueError, match="backbone's num_segments=4"):
        MODELS.build(cfg)
    cfg = copy.deepcopy(CONFIGS["r2plus1d"])
    cfg["data_preprocessor"]["format_shape"] = "NCHW"
    with DefaultScope.overwrite_default_scope("video"), pytest.raises(ValueError, match="takes 'NCTHW' clips"):
        MODELS.build(cfg)


def test_max_testing_views_gives_the_same_scores():
    model = build("tsm").eval()
    data = model.data_preprocessor(dict(inputs=clips("tsm", 2, 3)), training=False)
    with torch.no_grad():
        whole = model(data["inputs"], mode="tensor")
        model.test_cfg["max_testing_views"] = 2
        chunked = model(data["inputs"], mode="tensor")
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=1e-5)


def test_real_size_parameter_counts():
    """TSN R50 for 400 classes ~24.3M (ResNet-50 23.5M + fc 0.8M); TSM adds no parameters."""
    for backbone in (dict(type="ResNet", depth=50, out_indices=[3]), dict(type="ResNetTSM", depth=50)):
        with DefaultScope.overwrite_default_scope("video"):
            model = MODELS.build(dict(type="Recognizer2D", num_classes=400, backbone=backbone,
                                      cls_head=dict(type="TSNHead")))
        count = sum(p.numel() for p in model.parameters())
        assert count == 23_508_032 + 2048 * 400 + 400, count
