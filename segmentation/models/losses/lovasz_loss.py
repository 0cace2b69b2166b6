"""Lovász-softmax loss (Berman, Rannen Triki, Blaschko, CVPR 2018): a convex surrogate of 1 - IoU per class."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segmentation.registry import MODELS

from .utils import check_logits_target, check_loss_name, check_loss_weight, safe_target

CLASS_MODES = ("present", "all")


def lovasz_softmax_per_class(prob: torch.Tensor, fg: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The Lovász extension of the Jaccard loss of every (group, class): float [G, C].

    ``prob`` [G, C, N] softmax probabilities, ``fg`` [G, C, N] bool (pixel n of group g is of class c),
    ``valid`` [G, N] bool (not ignored). For each class the errors ``|fg - p|`` are sorted in decreasing order
    and dotted with the gradient of the Jaccard loss along that order (Berman et al., Alg. 1) -- one batched
    sort over all groups and classes, no loop. Ignored pixels get the error -1 so that they sort after every
    valid pixel (errors of valid pixels are in [0, 1]) and cannot change the cumulative counts before them;
    their terms are then zeroed.
    """
    fg = fg & valid.unsqueeze(1)
    errors = (fg.to(prob.dtype) - prob).abs().masked_fill(~valid.unsqueeze(1), -1.0)
    errors_sorted, order = errors.sort(dim=-1, descending=True)
    fg_sorted = fg.to(prob.dtype).gather(-1, order)
    gts = fg_sorted.sum(-1, keepdim=True)
    intersection = gts - fg_sorted.cumsum(-1)
    union = gts + (1.0 - fg_sorted).cumsum(-1)  # >= 1 from the first position on
    jaccard = 1.0 - intersection / union
    grad = torch.cat([jaccard[..., :1], jaccard[..., 1:] - jaccard[..., :-1]], dim=-1)
    return (errors_sorted.clamp(min=0.0) * grad).sum(-1)


@MODELS.register_module()
class LovaszLoss(nn.Module):
    """Lovász-softmax: directly optimises the mean IoU that segmentation is scored with.

    Why: cross-entropy rewards per-pixel accuracy, which on imbalanced data is not IoU; the Lovász hinge of the
    Jaccard loss is a tight convex surrogate of 1 - IoU of each class, so it is usually added to (or fine-tuned
    after) CE with a small ``loss_weight``.

    Args:
        per_image: compute the loss of each image and average them (an image with no class to count adds 0), or
            of the whole batch as one image (False, mmseg's default): batch IoU is what mIoU measures.
        classes: 'present' averages over the classes that have a labelled pixel (in the image or the batch);
            'all' over every class (an absent class still penalises the probability given to it); a list of class
            ids averages over those.
        loss_weight: factor on the loss; loss_name: its key in the log (must contain 'loss').
    """

    def __init__(
        self,
        per_image: bool = False,
        classes: str | Sequence[int] = "present",
        loss_weight: float = 1.0,
        loss_name: str = "loss_lovasz",
    ) -> None:
        super().__init__()
        self.loss_name = check_loss_name("LovaszLoss", loss_name)
        self.loss_weight = check_loss_weight("LovaszLoss", loss_weight)
        if isinstance(classes, str):
            if classes not in CLASS_MODES:
                raise ValueError(f"LovaszLoss classes must be one of {list(CLASS_MODES)} or a list of class ids, "
                                 f"got {classes!r}")
        else:
            classes = [int(c) for c in classes]
            if not classes or min(classes) < 0:
                raise ValueError(f"LovaszLoss classes must be a non-empty list of class ids >= 0, got {classes}")
        self.per_image = bool(per_image)
        self.classes = classes

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W] float, ``target`` [B, H, W] class ids -> weighted scalar loss."""
        check_logits_target("LovaszLoss", logits, target)
        num_classes = logits.shape[1]
        safe, valid = safe_target(target, ignore_index, num_classes)
        # at least float32: half-precision cumulative sums over millions of pixels lose the counts
        prob = logits.softmax(dim=1, dtype=torch.promote_types(logits.dtype, torch.float32)).flatten(2)  # [B, C, N]
        class_ids = torch.arange(num_classes, device=logits.device).view(1, -1, 1)
        fg = safe.flatten(1).unsqueeze(1) == class_ids  # [B, C, N] bool (one_hot would be int64)
        valid = valid.flatten(1)  # [B, N]
        if not self.per_image:
            prob = prob.permute(1, 0, 2).reshape(1, num_classes, -1)
            fg = fg.permute(1, 0, 2).reshape(1, num_classes, -1)
            valid = valid.reshape(1, -1)
        per_class = lovasz_softmax_per_class(prob, fg, valid)  # [G, C]
        if self.classes == "all":
            counted = torch.ones_like(per_class)
        elif self.classes == "present":
            counted = (fg & valid.unsqueeze(1)).any(-1).to(per_class.dtype)
        else:
            if max(self.classes) >= num_classes:
                raise ValueError(f"LovaszLoss classes {self.classes} name ids >= the logits' {num_classes} classes")
            counted = torch.zeros_like(per_class)
            counted[:, self.classes] = 1.0
        per_group = (per_class * counted).sum(-1) / counted.sum(-1).clamp(min=1.0)
        return self.loss_weight * per_group.mean()  # float32 for half logits, as the other losses

    def extra_repr(self) -> str:
        return (f"per_image={self.per_image}, classes={self.classes!r}, loss_weight={self.loss_weight}, "
                f"loss_name={self.loss_name!r}")
