"""Segmentation losses against torch's cross-entropy and hand-computed Dice values; loss combination in heads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from segmentation.models import CrossEntropyLoss, DiceLoss, FCNHead
from segmentation.registry import MODELS


def logits_and_target(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 3, 5, 6, generator=gen)
    target = torch.randint(0, 3, (2, 5, 6), generator=gen)
    target[0, :2] = 255
    return logits, target


def test_cross_entropy_matches_torch():
    logits, target = logits_and_target()
    ref = F.cross_entropy(logits, target, ignore_index=255)
    torch.testing.assert_close(CrossEntropyLoss()(logits, target, ignore_index=255), ref)
    weight = [0.2, 1.0, 3.0]
    ref_w = F.cross_entropy(logits, target, weight=torch.tensor(weight), ignore_index=255)
    torch.testing.assert_close(CrossEntropyLoss(class_weight=weight)(logits, target, ignore_index=255), ref_w)
    torch.testing.assert_close(CrossEntropyLoss(loss_weight=0.4)(logits, target, 255), 0.4 * ref)


def test_cross_entropy_average_over_all_pixels_and_all_ignored():
    logits, target = logits_and_target()
    per_pixel = F.cross_entropy(logits, target, ignore_index=255, reduction="none")
    loss = CrossEntropyLoss(avg_non_ignore=False)(logits, target, ignore_index=255)
    torch.testing.assert_close(loss, per_pixel.sum() / target.numel())
    logits.requires_grad_(True)
    zero = CrossEntropyLoss()(logits, torch.full_like(target, 255), ignore_index=255)
    assert zero.item() == 0.0
    zero.backward()  # still part of the graph
    with pytest.raises(ValueError, match="class_weight has 2 values but the logits have 3 classes"):
        CrossEntropyLoss(class_weight=[1.0, 2.0])(logits, target)


def test_dice_hand_computed():
    # equal logits -> p = 0.5 everywhere; pixels labelled 0, 1 and one ignored.
    logits = torch.zeros(1, 2, 1, 3)
    target = torch.tensor([[[0, 1, 255]]])
    # class 0: inter 0.5, sum p^2 = 0.5, sum t^2 = 1 -> dice (1 + 1) / (1.5 + 1) = 0.8; class 1 the same
    torch.testing.assert_close(DiceLoss()(logits, target, ignore_index=255), torch.tensor(0.2))
    # exponent 1: (1 + 1) / (1 + 1 + 1) = 2/3 -> loss 1/3; smooth 0: 1 / 2 -> 0.5
    torch.testing.assert_close(DiceLoss(exponent=1)(logits, target, 255), torch.tensor(1 / 3))
    torch.testing.assert_close(DiceLoss(exponent=1, smooth=0.0)(logits, target, 255), torch.tensor(0.5))
    # a perfect, confident prediction has (almost) zero loss
    confident = torch.tensor([[[[20.0, -20.0]], [[-20.0, 20.0]]]])
    assert DiceLoss(smooth=0.0)(confident, torch.tensor([[[0, 1]]]), 255) < 1e-6


def test_head_combines_listed_losses():
    head = FCNHead(
        in_channels=8,
        channels=4,
        num_classes=3,
        dropout_ratio=0.0,
        loss_decode=[dict(type="CrossEntropyLoss", loss_weight=1.0), dict(type="DiceLoss", loss_weight=3.0)],
    )
    logits, target = logits_and_target()
    out = head.loss(logits, target)
    assert set(out) == {"loss_ce", "loss_dice", "acc_seg"}
    torch.testing.assert_close(out["loss_ce"], F.cross_entropy(logits, target, ignore_index=255))
    torch.testing.assert_close(out["loss_dice"], 3.0 * DiceLoss()(logits, target, 255))
    valid = target != 255
    acc = (logits.argmax(1)[valid] == target[valid]).float().mean() * 100
    torch.testing.assert_close(out["acc_seg"], acc)
    # logits at a lower resolution are upsampled to the label size before the loss
    small = head.loss(logits[..., :3, :3], target)
    assert torch.isfinite(small["loss_ce"])


def test_loss_config_errors():
    with pytest.raises(ValueError, match="distinct loss_name"):
        FCNHead(in_channels=8, num_classes=3, loss_decode=[dict(type="CrossEntropyLoss")] * 2)
    with pytest.raises(ValueError, match="must contain 'loss'"):
        MODELS.build(dict(type="DiceLoss", loss_name="dice"))
