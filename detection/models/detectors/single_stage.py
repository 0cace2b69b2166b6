"""Single-stage detector: backbone -> neck -> dense head (YOLO, RetinaNet, FCOS style)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from detection.models.detectors.building import (
    ModuleCfg,
    accepts,
    build_backbone_and_neck,
    build_part,
    check_model_num_classes,
    check_num_classes,
    samples_for,
)
from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.models.task_model import TaskModel


@MODELS.register_module()
class SingleStageDetector(TaskModel):
    """Backbone, optional neck and one dense ``bbox_head``.

    Channels are inferred: the neck gets ``in_channels`` (and ``in_strides`` when it takes them) from the
    backbone's ``out_channels``/``out_strides``; the head gets ``in_channels`` (and ``strides``) from the
    neck, plus ``num_classes``, ``train_cfg`` and ``test_cfg`` from here. A value in the config still wins.

    Modes: ``loss`` -> dict of losses; ``predict`` -> the data samples with ``pred_instances`` in original
    image pixels; ``tensor`` -> the head's raw outputs (a tuple, one per level).
    """

    def __init__(
        self,
        backbone: ModuleCfg,
        bbox_head: ModuleCfg,
        num_classes: int,
        neck: ModuleCfg | None = None,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
        data_preprocessor: dict[str, Any] | nn.Module | None = None,
        init_cfg: dict[str, Any] | None = None,
    ) -> None:
        name = type(self).__name__
        if isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.num_classes = check_model_num_classes(name, num_classes)
        self.train_cfg = train_cfg
        self.test_cfg = test_cfg
        self.backbone, self.neck, channels, strides = build_backbone_and_neck(name, backbone, neck)
        self.bbox_head = self._build_head(bbox_head, channels, strides)

    # ----------------------------------------------------------------- construction helpers
    def _build_head(self, cfg: ModuleCfg, channels: list[int], strides: list[int] | None) -> nn.Module:
        name = type(self).__name__
        if isinstance(cfg, dict):
            check_num_classes(name, cfg, self.num_classes, "bbox_head")
            if strides is not None and "strides" in cfg and [int(s) for s in cfg["strides"]] != strides:
                raise ValueError(
                    f"{name}: bbox_head.strides={list(cfg['strides'])} but the feature maps it receives have "
                    f"strides {strides}; drop bbox_head.strides (it is inferred) or fix the backbone/neck"
                )
        args: dict[str, Any] = dict(
            in_channels=channels, num_classes=self.num_classes, train_cfg=self.train_cfg, test_cfg=self.test_cfg
        )
        if strides is not None and accepts(cfg, "strides"):
            args["strides"] = strides
        head = build_part(name, cfg, "bbox_head", args)
        if getattr(head, "num_classes", self.num_classes) != self.num_classes:
            raise ValueError(f"{name}: bbox_head predicts {head.num_classes} classes, model has {self.num_classes}")
        return head

    @property
    def with_neck(self) -> bool:
        return self.neck is not None

    # ----------------------------------------------------------------- forward paths
    def extract_feat(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        feats = self.backbone(inputs)
        if self.neck is not None:
            feats = self.neck(feats)
        return (feats,) if isinstance(feats, torch.Tensor) else tuple(feats)

    def _forward(self, inputs: torch.Tensor) -> Any:
        return self.bbox_head(self.extract_feat(inputs))

    def loss(self, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None) -> dict[str, torch.Tensor]:
        data_samples = samples_for(type(self).__name__, inputs, data_samples, for_loss=True)
        return self.bbox_head.loss(self.extract_feat(inputs), data_samples)

    def predict(
        self, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None = None, rescale: bool = True
    ) -> list[DetDataSample]:
        """``pred_instances`` per sample, in original image pixels when ``rescale`` (the default)."""
        data_samples = samples_for(type(self).__name__, inputs, data_samples)
        results = self.bbox_head.predict(self.extract_feat(inputs), data_samples, rescale=rescale)
        for sample, pred in zip(data_samples, results):
            sample.pred_instances = pred
        return list(data_samples)
