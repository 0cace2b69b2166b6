"""What 2D and 3D recognizers share: building backbone and head (``num_classes`` once, ``in_channels`` inferred),
and the three modes (loss / predict / tensor) around one ``extract_feat``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models import building
from oars.models.building import ModuleCfg
from oars.models.task_model import TaskModel
from video.registry import MODELS
from video.structures import ActionDataSample

from ..data_preprocessor import ActionDataPreprocessor


def build_part(owner: str, cfg: ModuleCfg, what: str, default_args: dict[str, Any] | None = None) -> nn.Module:
    """:func:`oars.models.building.build_part` in the video registry."""
    return building.build_part(MODELS, owner, cfg, what, default_args)


class BaseRecognizer(TaskModel):
    """Backbone -> ``cls_head``; subclasses say how clips enter the backbone (:meth:`extract_feat`).

    Args:
        backbone: backbone config (or module) with an ``out_channels`` attribute (int or list: the last is used).
        cls_head: head config (or module); built with ``num_classes`` and ``in_channels`` = the backbone's; a
            ``num_classes`` of its own that differs from the recognizer's is refused.
        num_classes: number of classes, set only here.
        data_preprocessor: default ``ActionDataPreprocessor`` with this recognizer's ``format_shape``.
        train_cfg, test_cfg: kept for the config's sake (``test_cfg.max_testing_views``: views per backbone
            forward at test time, to bound memory; default all at once).

    Modes: ``loss`` -> ``{'loss_cls': ..., 'top1_acc': ...}``; ``predict`` -> data samples with ``pred_score`` [C]
    and ``pred_label`` [1]; ``tensor`` -> float [B, num_classes] view-averaged scores (``average_clips`` of the head;
    [B, V, C] when it is None), the exported graph.
    """

    FORMAT_SHAPE = "NCHW"

    def __init__(self, backbone: ModuleCfg, cls_head: ModuleCfg, num_classes: int,
                 data_preprocessor: dict[str, Any] | nn.Module | None = None, train_cfg: dict[str, Any] | None = None,
                 test_cfg: dict[str, Any] | None = None, init_cfg: dict[str, Any] | None = None) -> None:
        name = type(self).__name__
        if data_preprocessor is None:
            data_preprocessor = ActionDataPreprocessor(format_shape=self.FORMAT_SHAPE)
        elif isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        fmt = getattr(data_preprocessor, "format_shape", self.FORMAT_SHAPE)
        if fmt != self.FORMAT_SHAPE:
            raise ValueError(f"{name}: data_preprocessor.format_shape={fmt!r}, but {name} takes "
                             f"{self.FORMAT_SHAPE!r} clips")
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.num_classes = building.check_num_classes(name, num_classes)
        self.train_cfg = dict(train_cfg or {})
        self.test_cfg = dict(test_cfg or {})
        views = self.test_cfg.get("max_testing_views")
        if views is not None and (isinstance(views, bool) or not isinstance(views, int) or views < 1):
            raise ValueError(f"{name}: test_cfg.max_testing_views must be a positive int or null, got {views!r}")

        self.backbone = build_part(name, backbone, "backbone")
        self.feat_channels = building.out_shape(name, self.backbone, "backbone")[0][-1]
        building.check_part_num_classes(name, cls_head, num_classes, "cls_head")
        self.cls_head = build_part(name, cls_head, "cls_head",
                                   dict(num_classes=num_classes, in_channels=self.feat_channels))
        if getattr(self.cls_head, "num_classes", num_classes) != num_classes:
            raise ValueError(f"{name}: cls_head predicts {self.cls_head.num_classes} classes, model has {num_classes}")

    # ------------------------------------------------------------------ subclasses
    def split_views(self, inputs: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        """Batch -> (backbone input with the views folded into the batch, frames per view T, views V)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def backbone_features(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.backbone(x)
        return feats[-1] if isinstance(feats, (tuple, list)) else feats

    def view_scores(self, inputs: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Per-view logits float [B*V, C] (views of a video adjacent) and V.

        Outside training, views run through the backbone ``test_cfg.max_testing_views`` at a time when set.
        """
        x, num_segs, num_views = self.split_views(inputs)
        chunk = self.test_cfg.get("max_testing_views")
        if self.training or chunk is None or chunk >= x.shape[0] // num_segs:
            return self.cls_head(self.backbone_features(x), num_segs), num_views
        step = chunk * num_segs  # whole views per chunk (2D: T frames each)
        scores = [self.cls_head(self.backbone_features(x[i:i + step]), num_segs) for i in range(0, x.shape[0], step)]
        return torch.cat(scores), num_views

    def _forward(self, inputs: torch.Tensor) -> torch.Tensor:
        scores, num_views = self.view_scores(inputs)
        return self.cls_head.average_views(scores, num_views)

    def loss(self, inputs: torch.Tensor, data_samples: Sequence[ActionDataSample]) -> dict[str, torch.Tensor]:
        if not data_samples:
            raise ValueError(f"{type(self).__name__}: mode='loss' needs data_samples carrying gt_label")
        if len(data_samples) != inputs.shape[0]:
            raise ValueError(f"{type(self).__name__}: {inputs.shape[0]} clips but {len(data_samples)} data samples")
        scores, _ = self.view_scores(inputs)
        return self.cls_head.loss(scores, data_samples)

    def predict(self, inputs: torch.Tensor,
                data_samples: Sequence[ActionDataSample] | None = None) -> list[ActionDataSample]:
        if data_samples is None:
            data_samples = [ActionDataSample() for _ in range(inputs.shape[0])]
        scores, num_views = self.view_scores(inputs)
        return self.cls_head.predict(scores, num_views, data_samples)
