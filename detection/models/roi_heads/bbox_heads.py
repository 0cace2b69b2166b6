"""Second-stage box heads: classify each RoI (``num_classes`` + background, background LAST) and regress
its box, as MMDetection's ``BBoxHead`` / ``ConvFCBBoxHead`` / ``Shared2FCBBoxHead``.

Parameter names are MMDetection's (``shared_convs.{i}``, ``shared_fcs.{i}``, ``fc_cls``, ``fc_reg``), so its
checkpoints load with ``prefix: roi_head.bbox_head``; torchvision's ``TwoMLPHead`` + ``FastRCNNPredictor``
weights load after :func:`detection.models.roi_heads.roi_head_from_torchvision` (it also moves the
background row from first to last).

Training works on all images' sampled RoIs at once: :meth:`BBoxHead.get_targets` concatenates the images'
targets (positives then negatives per image, the order :func:`sampled_rois` stacks the RoIs in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS
from oars.models.building import check_num_classes

from ..task_utils import SamplingResult


def sampled_priors(sampling_results: Sequence[SamplingResult]) -> list[Tensor]:
    """Per image the sampled priors, positives first: ``[P_i + Q_i, 4]`` (the order of the targets)."""
    return [torch.cat([r.pos_priors, r.neg_priors], dim=0) for r in sampling_results]


def accuracy(cls_score: Tensor, labels: Tensor) -> Tensor:
    """Top-1 accuracy as a fraction 0-1 (MMDetection's ``acc`` log entry, there in percent); 0 without samples.
    No gradient."""
    if labels.numel() == 0:
        return cls_score.new_zeros(()).float()
    with torch.no_grad():
        return (cls_score.argmax(dim=1) == labels).float().mean()


@MODELS.register_module()
class BBoxHead(nn.Module):
    """The simplest box head: (optional global average pool) -> flatten -> ``fc_cls`` and ``fc_reg``.

    With ``with_avg_pool`` it is the Faster R-CNN C4 box head (after the res5 shared head). Subclasses put
    layers between the RoI feature and the two predictors (:class:`ConvFCBBoxHead`).

    Args:
        num_classes: foreground classes (given by the RoI head); ``fc_cls`` has ``num_classes + 1`` outputs,
            background last.
        in_channels: channels of the RoI feature (given by the RoI head).
        roi_feat_size: spatial size of the RoI feature (given by the RoI head from its extractor).
        bbox_coder: TASK_UTILS config (Faster R-CNN: ``DeltaXYWHBBoxCoder``, stds 0.1, 0.1, 0.2, 0.2).
        loss_cls: MODELS config of the classification loss (a softmax loss: ``CrossEntropyLoss``).
        loss_bbox: MODELS config of the regression loss (Faster R-CNN: ``L1Loss``).
        with_avg_pool: average the RoI feature over space first.
        reg_class_agnostic: one box per RoI (``fc_reg`` 4 outputs) instead of one per class (``4 * num_classes``).
        reg_decoded_bbox: the box loss compares decoded boxes with the gt boxes (IoU-type losses) instead of
            deltas with encoded targets.

    The configs' values are in the base model YAML files (``configs/_base_/models/*rcnn*.yaml``), not here.
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        roi_feat_size: int | Sequence[int],
        bbox_coder: dict[str, Any],
        loss_cls: dict[str, Any],
        loss_bbox: dict[str, Any],
        with_avg_pool: bool = False,
        reg_class_agnostic: bool = False,
        reg_decoded_bbox: bool = False,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        check_num_classes(name, num_classes)
        if not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"{name}: in_channels must be a positive int, got {in_channels!r}")
        size = (roi_feat_size, roi_feat_size) if isinstance(roi_feat_size, int) else tuple(roi_feat_size)
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f"{name}: roi_feat_size must be a positive int or [h, w], got {roi_feat_size!r}")
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.roi_feat_size = size
        self.roi_feat_area = size[0] * size[1]
        self.with_avg_pool = bool(with_avg_pool)
        self.reg_class_agnostic = bool(reg_class_agnostic)
        self.reg_decoded_bbox = bool(reg_decoded_bbox)
        for key, cfg in (("bbox_coder", bbox_coder), ("loss_cls", loss_cls), ("loss_bbox", loss_bbox)):
            if not isinstance(cfg, dict) or "type" not in cfg:
                raise ValueError(f"{name}: {key} must be a config dict with a type (the base model YAML states "
                                 f"it), got {cfg!r}")
        self.bbox_coder = TASK_UTILS.build(dict(bbox_coder))
        self.loss_cls = MODELS.build(dict(loss_cls))
        self.loss_bbox = MODELS.build(dict(loss_bbox))
        if getattr(self.loss_cls, "use_sigmoid", False):
            raise ValueError(f"{name}: loss_cls must be a softmax loss (use_sigmoid: false): the classifier has "
                             "num_classes + 1 outputs with background last")
        self.reg_dim = 4 if self.reg_class_agnostic else 4 * num_classes
        if type(self) is BBoxHead:
            dim = in_channels if self.with_avg_pool else in_channels * self.roi_feat_area
            self._build_predictors(dim, dim)
            self.init_weights()

    def _build_predictors(self, cls_dim: int, reg_dim: int) -> None:
        self.fc_cls = nn.Linear(cls_dim, self.num_classes + 1)
        self.fc_reg = nn.Linear(reg_dim, self.reg_dim)

    def init_weights(self) -> None:
        """MMDetection's: ``fc_cls`` normal(std 0.01), ``fc_reg`` normal(std 0.001), zero biases."""
        nn.init.normal_(self.fc_cls.weight, std=0.01)
        nn.init.normal_(self.fc_reg.weight, std=0.001)
        nn.init.zeros_(self.fc_cls.bias)
        nn.init.zeros_(self.fc_reg.bias)

    def _check_input(self, x: Tensor) -> None:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expects RoI features [R, {self.in_channels}, h, w], got "
                             f"{tuple(x.shape)}")

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """RoI features ``[R, in_channels, h, w]`` -> ``(cls_score [R, num_classes + 1], bbox_pred [R, reg_dim])``."""
        self._check_input(x)
        x = x.mean(dim=(2, 3)) if self.with_avg_pool else x.flatten(1)
        return self.fc_cls(x), self.fc_reg(x)

    # ----------------------------------------------------------------- training
    def get_targets(
        self, sampling_results: Sequence[SamplingResult], pos_weight: float = -1.0
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Classification and regression targets of every sampled RoI of the batch.

        Per image, positives then negatives (the order of :func:`sampled_priors`); images concatenated.

        Args:
            sampling_results: one per image.
            pos_weight: classification weight of positives (<= 0: 1).

        Returns:
            ``labels`` int64 ``[N]`` (gt class of positives, ``num_classes`` = background for negatives),
            ``label_weights`` float32 ``[N]``, ``bbox_targets`` float32 ``[N, 4]`` (encoded deltas, or gt boxes
            with ``reg_decoded_bbox``; 0 for negatives), ``bbox_weights`` float32 ``[N, 4]`` (1 for positives).
        """
        pos_priors = torch.cat([r.pos_priors for r in sampling_results]).float()
        pos_gt = torch.cat([r.pos_gt_bboxes for r in sampling_results]).float()
        device = pos_priors.device
        labels, is_pos = [], []
        for r in sampling_results:
            num_pos, num_neg = r.pos_inds.numel(), r.neg_inds.numel()
            labels += [r.pos_gt_labels.long().to(device), torch.full((num_neg,), self.num_classes, device=device)]
            is_pos += [torch.ones(num_pos, dtype=torch.bool, device=device),
                       torch.zeros(num_neg, dtype=torch.bool, device=device)]
        label_t, pos_mask = torch.cat(labels).long(), torch.cat(is_pos)
        n = label_t.numel()
        label_weights = torch.ones(n, device=device)
        if pos_weight > 0:
            label_weights[pos_mask] = float(pos_weight)
        bbox_targets = torch.zeros((n, 4), device=device)
        bbox_weights = torch.zeros((n, 4), device=device)
        if pos_priors.numel():
            enc = pos_gt if self.reg_decoded_bbox else self.bbox_coder.encode(pos_priors, pos_gt)
            bbox_targets[pos_mask] = enc.float()
            bbox_weights[pos_mask] = 1.0
        return label_t, label_weights, bbox_targets, bbox_weights

    def loss(
        self,
        cls_score: Tensor,
        bbox_pred: Tensor,
        rois: Tensor,
        labels: Tensor,
        label_weights: Tensor,
        bbox_targets: Tensor,
        bbox_weights: Tensor,
    ) -> dict[str, Tensor]:
        """``loss_cls`` (averaged over the RoIs with a weight), ``acc`` (percent) and ``loss_bbox`` (summed over
        positives, divided by the number of RoIs, as MMDetection); float32, zero with a gradient when a batch
        has no positive.

        Args:
            cls_score: ``[N, num_classes + 1]``; bbox_pred: ``[N, reg_dim]``; rois: ``[N, 5]`` (the priors, used
                with ``reg_decoded_bbox``); the rest from :meth:`get_targets`.
        """
        avg = max(float((label_weights > 0).sum()), 1.0)
        losses = {
            "loss_cls": self.loss_cls(cls_score, labels, label_weights, avg_factor=avg),
            "acc": accuracy(cls_score.float(), labels),
        }
        pos = (labels >= 0) & (labels < self.num_classes)
        if pos.any():
            pred = bbox_pred.float()
            if self.reg_class_agnostic:
                pos_pred = pred.view(pred.shape[0], 4)[pos]
            else:
                pos_pred = pred.view(pred.shape[0], -1, 4)[pos, labels[pos]]
            if self.reg_decoded_bbox:
                pos_pred = self.bbox_coder.decode(rois[pos, 1:], pos_pred)
            losses["loss_bbox"] = self.loss_bbox(pos_pred, bbox_targets[pos], bbox_weights[pos],
                                                 avg_factor=bbox_targets.shape[0])
        else:
            losses["loss_bbox"] = bbox_pred.float().sum() * 0.0
        return losses

    # ----------------------------------------------------------------- refinement / inference
    def regress_by_class(self, priors: Tensor, labels: Tensor, bbox_pred: Tensor, img_shape: Sequence[int] | None
                         ) -> Tensor:
        """Decode each RoI's box of class ``labels`` (any box for class-agnostic regression).

        Args:
            priors: ``[R, 4]`` RoI boxes; labels: int64 ``[R]``; bbox_pred: ``[R, reg_dim]``;
            img_shape: ``(H, W)`` to clip to (None: no clipping).

        Returns:
            float32 ``[R, 4]`` boxes.
        """
        deltas = bbox_pred.float()
        if not self.reg_class_agnostic:
            deltas = deltas.view(deltas.shape[0], -1, 4).gather(
                1, labels.long().view(-1, 1, 1).expand(-1, 1, 4)).squeeze(1)
        return self.bbox_coder.decode(priors, deltas, max_shape=None if img_shape is None else img_shape[:2])

    def refine_bboxes(
        self,
        sampling_results: Sequence[SamplingResult],
        rois: Tensor,
        cls_score: Tensor,
        bbox_pred: Tensor,
        labels: Tensor,
        batch_img_metas: Sequence[dict[str, Any]],
    ) -> list[InstanceData]:
        """Cascade R-CNN's proposals for the next stage: every sampled RoI moved by this stage's regression
        (class: the target label, or the predicted foreground class for negatives), without the gt boxes the
        sampler added (MMDetection's ``refine_bboxes``). Call under ``no_grad``.

        Returns:
            per image an ``InstanceData(bboxes [n_i, 4])``.
        """
        labels = torch.where(labels == self.num_classes, cls_score[:, :-1].argmax(dim=1), labels)
        counts = [r.pos_inds.numel() + r.neg_inds.numel() for r in sampling_results]
        out = []
        for r, roi_i, lab_i, pred_i, meta in zip(
            sampling_results, rois.split(counts), labels.split(counts), bbox_pred.split(counts), batch_img_metas
        ):
            boxes = self.regress_by_class(roi_i[:, 1:], lab_i, pred_i, meta["img_shape"])
            keep = torch.ones(boxes.shape[0], dtype=torch.bool, device=boxes.device)
            keep[: r.pos_inds.numel()] = ~r.pos_is_gt
            out.append(InstanceData(bboxes=boxes[keep].detach()))
        return out
