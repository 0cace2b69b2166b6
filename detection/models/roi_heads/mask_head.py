"""Mask R-CNN's mask head: a small FCN on 14x14 RoI features predicting a 28x28 mask logit per class.

Targets are the gt masks cropped to each positive RoI and resampled to 28x28 with ``torchvision.ops.roi_align``
on the gt bitmaps (MMDetection's ``BitmapMasks.crop_and_resize``): only ``[P, 28, 28]`` is ever built, never a
full-image mask per RoI. Parameter names: ``convs.{i}.0`` (conv), ``upsample``, ``conv_logits``; torchvision's
``MaskRCNNHeads`` + ``MaskRCNNPredictor`` load after
:func:`detection.models.roi_heads.roi_head_from_torchvision`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData
from torch import Tensor, nn
from torchvision.ops import roi_align

from detection.registry import MODELS
from oars.models.building import check_num_classes
from oars.models.layers import ConvNormAct

from ..task_utils import SamplingResult
from .mask_paste import PASTE_MODES, paste_masks
from .utils import scale_factor_of


def mask_targets(
    pos_priors: Tensor, pos_assigned_gt_inds: Tensor, gt_masks: Tensor, mask_size: int | Sequence[int]
) -> Tensor:
    """Binary mask targets of one image's positive RoIs.

    Args:
        pos_priors: float ``[P, 4]`` xyxy RoIs (pipeline pixels).
        pos_assigned_gt_inds: int64 ``[P]`` 0-based index of each RoI's gt.
        gt_masks: ``[N, H, W]`` 0/1 bitmaps (uint8, bool or float) of the image's gt instances.
        mask_size: output size (28) or ``(h, w)``.

    Returns:
        float32 ``[P, h, w]`` of 0/1: the RoI's window of its gt mask, averaged by ``roi_align`` (aligned,
        adaptive sampling) then ``>= 0.5``.
    """
    size = (mask_size, mask_size) if isinstance(mask_size, int) else tuple(mask_size)
    if pos_priors.shape[0] == 0:
        return pos_priors.new_zeros((0, *size), dtype=torch.float32)
    if gt_masks.dim() != 3:
        raise ValueError(f"mask_targets: gt masks must be [N, H, W] bitmaps, got {tuple(gt_masks.shape)}")
    inds = pos_assigned_gt_inds.long()
    # Only the gt masks the positives use, once each: roi_align reads each through its index.
    used, remap = torch.unique(inds, return_inverse=True)
    masks = gt_masks[used.to(gt_masks.device)].to(device=pos_priors.device, dtype=torch.float32)[:, None]
    rois = torch.cat([remap[:, None].float(), pos_priors[:, :4].float()], dim=1)
    crops = roi_align(masks, rois, size, spatial_scale=1.0, sampling_ratio=0, aligned=True)[:, 0]
    return (crops >= 0.5).float()


@MODELS.register_module()
class FCNMaskHead(nn.Module):
    """``num_convs`` 3x3 convs (``conv_out_channels``) + ReLU -> 2x ``ConvTranspose2d`` -> ReLU -> 1x1 conv to
    ``num_classes`` mask logits (class-specific: the RoI's class picks its channel).

    Args:
        num_classes: foreground classes (given by the RoI head).
        in_channels: channels of the RoI features (given by the RoI head).
        roi_feat_size: spatial size of the RoI features (14; the output is twice this).
        num_convs, conv_out_channels: the FCN's depth and width (Mask R-CNN: 4, 256).
        loss_mask: MODELS config (Mask R-CNN: binary ``CrossEntropyLoss`` on the logits, averaged over all
            positive RoIs' pixels: MMDetection's ``mask_cross_entropy``).
        norm: norm spec of the convs (None: conv bias, no norm).
        class_agnostic: one mask per RoI instead of one per class.
        paste_mode: how predicted masks are pasted into the image (:func:`paste_masks`): ``'mmdet'`` or
            ``'torchvision'`` (torchvision's ``paste_masks_in_image``, for converted torchvision weights).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        roi_feat_size: int,
        num_convs: int,
        conv_out_channels: int,
        loss_mask: dict[str, Any],
        norm: Any = None,
        class_agnostic: bool = False,
        paste_mode: str = "mmdet",
    ) -> None:
        super().__init__()
        if paste_mode not in PASTE_MODES:
            raise ValueError(f"FCNMaskHead: paste_mode={paste_mode!r} is invalid; accepted: {list(PASTE_MODES)}")
        self.paste_mode = paste_mode
        check_num_classes("FCNMaskHead", num_classes)
        if not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"FCNMaskHead: in_channels must be a positive int, got {in_channels!r}")
        if not isinstance(roi_feat_size, int) or roi_feat_size < 1:
            raise ValueError(f"FCNMaskHead: roi_feat_size must be a positive int, got {roi_feat_size!r}")
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.roi_feat_size = roi_feat_size
        self.mask_size = 2 * roi_feat_size
        self.class_agnostic = bool(class_agnostic)
        self.convs = nn.ModuleList(
            ConvNormAct(in_channels if i == 0 else conv_out_channels, conv_out_channels, 3, norm=norm, act="ReLU")
            for i in range(num_convs)
        )
        last = conv_out_channels if num_convs else in_channels
        self.upsample = nn.ConvTranspose2d(last, conv_out_channels, kernel_size=2, stride=2)
        self.conv_logits = nn.Conv2d(conv_out_channels, 1 if self.class_agnostic else num_classes, 1)
        if not isinstance(loss_mask, dict) or "type" not in loss_mask:
            raise ValueError(f"FCNMaskHead: loss_mask must be a config dict with a type (the base model YAML states "
                             f"it), got {loss_mask!r}")
        self.loss_mask = MODELS.build(dict(loss_mask))
        self.init_weights()

    def init_weights(self) -> None:
        """Kaiming-normal (fan_out, ReLU) weights and zero biases everywhere (MMDetection's)."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        """RoI features ``[R, in_channels, s, s]`` -> mask logits ``[R, num_classes (or 1), 2s, 2s]``."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"FCNMaskHead: expects RoI features [R, {self.in_channels}, s, s], got {tuple(x.shape)}")
        for conv in self.convs:
            x = conv(x)
        return self.conv_logits(F.relu(self.upsample(x), inplace=True))

    def _select(self, mask_logits: Tensor, labels: Tensor) -> Tensor:
        """Each RoI's logits of its class: ``[R, C, h, w]`` -> ``[R, h, w]``."""
        if self.class_agnostic:
            return mask_logits[:, 0]
        return mask_logits[torch.arange(mask_logits.shape[0], device=mask_logits.device), labels.long()]

    def get_targets(self, sampling_results: Sequence[SamplingResult], gt_instances: Sequence[InstanceData]) -> Tensor:
        """float32 ``[P, 2s, 2s]`` targets of all images' positives (image order, as the mask RoIs)."""
        size = (self.mask_size, self.mask_size)
        out = []
        for res, gt in zip(sampling_results, gt_instances):
            if res.pos_inds.numel() == 0:
                out.append(res.pos_priors.new_zeros((0, *size), dtype=torch.float32))
                continue
            if "masks" not in gt:
                raise ValueError("FCNMaskHead: gt_instances has no 'masks'; load them with "
                                 "LoadAnnotations(with_mask=True)")
            out.append(mask_targets(res.pos_priors, res.pos_assigned_gt_inds, gt.masks, size))
        return torch.cat(out, dim=0)

    def loss(self, mask_logits: Tensor, targets: Tensor, pos_labels: Tensor) -> dict[str, Tensor]:
        """``loss_mask``: float32 BCE of each positive's class logits against its target; a zero with a
        gradient when there is no positive.

        Args:
            mask_logits: ``[P, C, h, w]``; targets: ``[P, h, w]`` 0/1; pos_labels: int64 ``[P]``.
        """
        if mask_logits.shape[0] == 0:
            return {"loss_mask": mask_logits.float().sum() * 0.0}
        return {"loss_mask": self.loss_mask(self._select(mask_logits.float(), pos_labels), targets)}

    def predict_by_feat(
        self,
        mask_probs: Sequence[Tensor],
        results_list: Sequence[InstanceData],
        batch_img_metas: Sequence[dict[str, Any]],
        threshold: float = 0.5,
        rescale: bool = True,
        probs_are_selected: bool = False,
    ) -> list[InstanceData]:
        """Paste each detection's mask into its image (original pixels when ``rescale``).

        Args:
            mask_probs: per image the masks' probabilities ``[K_i, C, h, w]`` (sigmoid applied), or ``[K_i, h, w]``
                already of the detection's class with ``probs_are_selected``.
            results_list: per image the detections, ``bboxes`` in pipeline pixels and ``labels``.
            batch_img_metas: per image ``img_shape`` and, for ``rescale``, ``ori_shape`` and ``scale_factor``.
            threshold: ``mask_thr_binary``.

        Returns:
            the detections with ``masks`` bool ``[K_i, H, W]`` and, with ``rescale``, ``bboxes`` divided by
            ``scale_factor``.
        """
        out = []
        for probs, res, meta in zip(mask_probs, results_list, batch_img_metas):
            boxes = res.bboxes.float()
            if rescale:
                sw, sh = scale_factor_of(meta)
                boxes = boxes / boxes.new_tensor([sw, sh, sw, sh])
                shape = meta.get("ori_shape", meta["img_shape"])[:2]
            else:
                shape = meta["img_shape"][:2]
            if not probs_are_selected:
                probs = self._select(probs, res.labels)
            res = res.clone()
            res.bboxes = boxes
            res.masks = paste_masks(probs, boxes, shape, threshold, mode=self.paste_mode)
            out.append(res)
        return out
