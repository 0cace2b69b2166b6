"""Two-stage detectors: backbone -> (FPN) neck -> RPN proposals -> RoI head (Faster / Mask / Cascade R-CNN)."""

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
from detection.models.roi_heads.two_stage_infer import image_hw, results_from_padded
from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.models.task_model import TaskModel


def _section(cfg: dict[str, Any] | None, key: str) -> Any:
    return None if cfg is None else cfg.get(key)


def _head_num_classes(cfg: ModuleCfg, owner: str, num_classes: int) -> None:
    """No head inside ``roi_head`` may state a class count of its own that differs from the model's."""
    if not isinstance(cfg, dict):
        return
    check_num_classes(owner, cfg, num_classes, "roi_head")
    for key in ("bbox_head", "mask_head"):
        heads = cfg.get(key)
        for i, head in enumerate(heads if isinstance(heads, list) else [heads]):
            if isinstance(head, dict):
                where = f"roi_head.{key}" + (f"[{i}]" if isinstance(heads, list) else "")
                check_num_classes(owner, head, num_classes, where)


@MODELS.register_module()
class TwoStageDetector(TaskModel):
    """Backbone, optional neck, ``rpn_head`` and ``roi_head``.

    ``train_cfg`` / ``test_cfg`` follow MMDetection's layout: ``train_cfg.rpn`` (the RPN's assigner and
    sampler), ``train_cfg.rpn_proposal`` (the proposals the RoI head trains on: nms_pre, max_per_img, nms),
    ``train_cfg.rcnn`` (the RoI head's assigner/sampler; a list of stages for Cascade R-CNN), and
    ``test_cfg.rpn`` / ``test_cfg.rcnn``. Channels and strides are inferred from the backbone / neck and
    passed down; ``num_classes`` (background excluded) is set once, here, and passed to the RoI head.

    Modes: ``loss`` -> RPN and RoI losses; ``predict`` -> data samples with ``pred_instances`` (original image
    pixels; ``masks`` bool [K, H, W] for mask heads); ``tensor`` -> the RPN outputs and the RoI head's raw
    outputs on the test-time proposals.
    """

    def __init__(
        self,
        backbone: ModuleCfg,
        rpn_head: ModuleCfg,
        roi_head: ModuleCfg,
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

        rpn_args: dict[str, Any] = dict(in_channels=channels, train_cfg=_section(train_cfg, "rpn"),
                                        test_cfg=_section(test_cfg, "rpn"))
        if strides is not None and accepts(rpn_head, "strides"):
            rpn_args["strides"] = strides
        self.rpn_head = build_part(name, rpn_head, "rpn_head", rpn_args)

        _head_num_classes(roi_head, name, num_classes)
        roi_args: dict[str, Any] = dict(num_classes=num_classes, in_channels=channels,
                                        train_cfg=_section(train_cfg, "rcnn"), test_cfg=_section(test_cfg, "rcnn"))
        if strides is not None and accepts(roi_head, "strides"):
            roi_args["strides"] = strides
        self.roi_head = build_part(name, roi_head, "roi_head", roi_args)
        if getattr(self.roi_head, "num_classes", num_classes) != num_classes:
            raise ValueError(f"{name}: roi_head predicts {self.roi_head.num_classes} classes, model has {num_classes}")

    @property
    def with_neck(self) -> bool:
        return self.neck is not None

    @property
    def with_mask(self) -> bool:
        return bool(getattr(self.roi_head, "with_mask", False))

    def extract_feat(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Feature maps ``[B, C_l, H_l, W_l]`` the heads read (the neck's outputs when there is a neck)."""
        feats = self.backbone(inputs)
        if self.neck is not None:
            feats = self.neck(feats)
        return (feats,) if isinstance(feats, torch.Tensor) else tuple(feats)

    def _proposal_cfg(self) -> dict[str, Any] | None:
        cfg = _section(self.train_cfg, "rpn_proposal")
        return cfg if cfg is not None else _section(self.test_cfg, "rpn")

    def loss(self, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None) -> dict[str, torch.Tensor]:
        samples = samples_for(type(self).__name__, inputs, data_samples, for_loss=True)
        feats = self.extract_feat(inputs)
        rpn_losses, proposals = self.rpn_head.loss_and_predict(feats, samples, self._proposal_cfg())
        roi_losses = self.roi_head.loss(feats, proposals, samples)
        clash = set(rpn_losses) & set(roi_losses)
        if clash:
            raise ValueError(f"{type(self).__name__}: the RPN and RoI heads both return losses named {sorted(clash)}")
        return {**rpn_losses, **roi_losses}

    def predict(
        self, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None = None, rescale: bool = True
    ) -> list[DetDataSample]:
        """``pred_instances`` per sample (bboxes, scores, labels[, masks]), in original pixels when ``rescale``.

        The RPN's :meth:`~RPNHead.proposals_padded` and the RoI head's ``predict_padded``
        (:mod:`detection.models.roi_heads.two_stage_infer`) are the exported graph's own blocks: eager
        inference and export are one implementation.
        """
        samples = samples_for(type(self).__name__, inputs, data_samples)
        metas = [s.metainfo for s in samples]
        feats = self.extract_feat(inputs)
        img_hw = image_hw(metas, inputs.device)
        cls_scores, bbox_preds = self.rpn_head(feats)
        proposals, _, valid = self.rpn_head.proposals_padded(cls_scores, bbox_preds, img_hw,
                                                             metas[0].get("batch_input_shape"))
        outs = self.roi_head.predict_padded(feats, proposals, valid, img_hw)
        for sample, pred in zip(samples, results_from_padded(self.roi_head, outs, metas, rescale)):
            sample.pred_instances = pred
        return samples

    def _forward(self, inputs: torch.Tensor) -> tuple[Any, ...]:
        """RPN ``(cls_scores, bbox_preds)`` and the RoI head's raw outputs on the proposals (tensor mode)."""
        feats = self.extract_feat(inputs)
        rpn_outs = self.rpn_head(feats)
        samples = samples_for(type(self).__name__, inputs, None)
        proposals = self.rpn_head.predict(feats, samples)
        rois = torch.cat([torch.cat([p.bboxes.new_full((len(p), 1), float(i)), p.bboxes], dim=1)
                          for i, p in enumerate(proposals)])
        return (*rpn_outs, *self.roi_head.forward(feats, rois))


@MODELS.register_module()
class FasterRCNN(TwoStageDetector):
    """Faster R-CNN (Ren et al. 2015): FPN or C4 (a shared res5 RoI head, no neck), set by the config."""


@MODELS.register_module()
class MaskRCNN(TwoStageDetector):
    """Mask R-CNN (He et al. 2017): Faster R-CNN plus an FCN mask head on the RoI features."""


@MODELS.register_module()
class CascadeRCNN(TwoStageDetector):
    """Cascade R-CNN (Cai & Vasconcelos 2018): RoI head stages trained at rising IoU thresholds; with mask heads
    in ``roi_head`` it is Cascade Mask R-CNN."""
