"""Single-stage detector: backbone -> neck -> dense head (YOLO, RetinaNet, FCOS style)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.models.task_model import TaskModel

ModuleCfg = dict[str, Any] | nn.Module


def _accepts(cfg: ModuleCfg, arg: str) -> bool:
    """Whether the class a config names (or a module's class) takes ``arg`` in its constructor."""
    cls = type(cfg) if isinstance(cfg, nn.Module) else MODELS.get(cfg["type"])
    if cls is None:
        return False
    params = inspect.signature(cls.__init__).parameters
    return arg in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


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
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
            raise ValueError(f"{name}: num_classes must be an int >= 1, got {num_classes!r}")
        self.num_classes = num_classes
        self.train_cfg = train_cfg
        self.test_cfg = test_cfg

        self.backbone = self._build(backbone, "backbone")
        channels, strides = self._out_shape(self.backbone, "backbone")
        self.neck = None
        if neck is not None:
            args: dict[str, Any] = dict(in_channels=channels)
            if strides is not None and _accepts(neck, "in_strides"):
                args["in_strides"] = strides
            self.neck = self._build(neck, "neck", args)
            channels, strides = self._out_shape(self.neck, "neck")
        self.bbox_head = self._build_head(bbox_head, channels, strides)

    # ----------------------------------------------------------------- construction helpers
    def _build(self, cfg: ModuleCfg, what: str, default_args: dict[str, Any] | None = None) -> nn.Module:
        if isinstance(cfg, nn.Module):
            return cfg
        if not isinstance(cfg, dict) or "type" not in cfg:
            raise ValueError(f"{type(self).__name__}: {what} must be a config dict with a 'type' key, got {cfg!r}")
        return MODELS.build(cfg, default_args=default_args)

    def _out_shape(self, module: nn.Module, what: str) -> tuple[list[int], list[int] | None]:
        channels = getattr(module, "out_channels", None)
        if channels is None:
            raise ValueError(
                f"{type(self).__name__}: the {what} {type(module).__name__} has no 'out_channels' attribute, "
                "needed to infer the next part's in_channels"
            )
        channels = [channels] if isinstance(channels, int) else list(channels)
        strides = getattr(module, "out_strides", None)
        return channels, None if strides is None else [int(s) for s in strides]

    def _build_head(self, cfg: ModuleCfg, channels: list[int], strides: list[int] | None) -> nn.Module:
        name = type(self).__name__
        if isinstance(cfg, dict):
            if "num_classes" in cfg and cfg["num_classes"] != self.num_classes:
                raise ValueError(
                    f"{name}: bbox_head.num_classes={cfg['num_classes']} differs from model.num_classes="
                    f"{self.num_classes}; set num_classes only on the model"
                )
            if strides is not None and "strides" in cfg and [int(s) for s in cfg["strides"]] != strides:
                raise ValueError(
                    f"{name}: bbox_head.strides={list(cfg['strides'])} but the feature maps it receives have "
                    f"strides {strides}; drop bbox_head.strides (it is inferred) or fix the backbone/neck"
                )
        args: dict[str, Any] = dict(
            in_channels=channels, num_classes=self.num_classes, train_cfg=self.train_cfg, test_cfg=self.test_cfg
        )
        if strides is not None and _accepts(cfg, "strides"):
            args["strides"] = strides
        head = self._build(cfg, "bbox_head", args)
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
        if not data_samples:
            raise ValueError(f"{type(self).__name__}: mode='loss' needs data_samples carrying gt_instances")
        if len(data_samples) != inputs.shape[0]:
            raise ValueError(f"{type(self).__name__}: {inputs.shape[0]} images but {len(data_samples)} data samples")
        return self.bbox_head.loss(self.extract_feat(inputs), data_samples)

    def predict(
        self, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None = None, rescale: bool = True
    ) -> list[DetDataSample]:
        """``pred_instances`` per sample, in original image pixels when ``rescale`` (the default)."""
        if data_samples is None:
            shape = tuple(inputs.shape[-2:])
            data_samples = [
                DetDataSample(
                    metainfo=dict(ori_shape=shape, img_shape=shape, batch_input_shape=shape, scale_factor=(1.0, 1.0))
                )
                for _ in range(inputs.shape[0])
            ]
        if len(data_samples) != inputs.shape[0]:
            raise ValueError(f"{type(self).__name__}: {inputs.shape[0]} images but {len(data_samples)} data samples")
        results = self.bbox_head.predict(self.extract_feat(inputs), data_samples, rescale=rescale)
        for sample, pred in zip(data_samples, results):
            sample.pred_instances = pred
        return list(data_samples)
