"""Segmentation losses against torch / torchvision, hand-computed small cases and a brute-force Lovász extension;
loss combination in heads."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torchvision.ops import sigmoid_focal_loss

from segmentation.models import (
    BinaryCrossEntropyLoss,
    CrossEntropyLoss,
    DiceLoss,
    FCNHead,
    FocalLoss,
    LovaszLoss,
    OhemCrossEntropyLoss,
)
from segmentation.models.losses.ohem_cross_entropy_loss import ohem_keep_mask
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
    acc = (logits.argmax(1)[valid] == target[valid]).float().mean()
    torch.testing.assert_close(out["acc_seg"], acc)
    # logits at a lower resolution are upsampled to the label size before the loss
    small = head.loss(logits[..., :3, :3], target)
    assert torch.isfinite(small["loss_ce"])


def test_loss_config_errors():
    with pytest.raises(ValueError, match="distinct loss_name"):
        FCNHead(in_channels=8, num_classes=3, loss_decode=[dict(type="CrossEntropyLoss")] * 2)
    with pytest.raises(ValueError, match="must contain 'loss'"):
        MODELS.build(dict(type="DiceLoss", loss_name="dice"))


# ---- the loss menu: OHEM, Lovász, focal, binary cross-entropy --------------------------------------------------

def logits_from_probs(probs) -> torch.Tensor:
    """[H, W, C] probabilities -> [1, C, H, W] logits whose softmax gives them back."""
    return torch.tensor(probs, dtype=torch.float64).log().permute(2, 0, 1).unsqueeze(0)


# 1x3x2x2: true-class probabilities 0.9 / 0.6 / 0.8 and one ignored pixel
OHEM_PROBS = [[[0.9, 0.05, 0.05], [0.2, 0.6, 0.2]], [[0.1, 0.1, 0.8], [0.5, 0.25, 0.25]]]
OHEM_TARGET = torch.tensor([[[0, 1], [2, 255]]])


def test_ohem_hand_computed():
    logits, target = logits_from_probs(OHEM_PROBS), OHEM_TARGET
    log = torch.log
    p = torch.tensor([0.9, 0.6, 0.8], dtype=torch.float64)

    def ohem(**kw):
        return MODELS.build(dict(type="OhemCrossEntropyLoss", **kw))(logits, target, ignore_index=255)

    # min_kept 0: only the pixel below thresh 0.7 (p=0.6)
    torch.testing.assert_close(ohem(thresh=0.7, min_kept=0), -log(p[1]))
    # min_kept 2: threshold = max(0.7, 3rd smallest p = 0.9) -> keeps 0.6 and 0.8
    torch.testing.assert_close(ohem(thresh=0.7, min_kept=2), -(log(p[1]) + log(p[2])) / 2)
    # class weights weight the mean as F.cross_entropy's: (2 * -log 0.6 + 3 * -log 0.8) / (2 + 3)
    torch.testing.assert_close(ohem(thresh=0.7, min_kept=2, class_weight=[1.0, 2.0, 3.0], loss_weight=0.5),
                               0.5 * -(2 * log(p[1]) + 3 * log(p[2])) / 5)
    # min_kept >= valid pixels, or thresh 1: every valid pixel (the ignored one never)
    every = -log(p).mean()
    torch.testing.assert_close(ohem(thresh=0.7, min_kept=3), every)
    torch.testing.assert_close(ohem(thresh=1.0, min_kept=0), every)
    # min_kept counts per image: a batch of two copies with min_kept=1 keeps the 2 hardest (both p=0.6 pixels)
    pair = OhemCrossEntropyLoss(thresh=0.5, min_kept=1)(logits.repeat(2, 1, 1, 1), target.repeat(2, 1, 1), 255)
    torch.testing.assert_close(pair, -log(p[1]))
    # all ignored: zero, still in the graph
    logits.requires_grad_(True)
    zero = OhemCrossEntropyLoss()(logits, torch.full_like(target, 255), 255)
    zero.backward()
    assert zero.item() == 0.0


def test_ohem_keeps_hard_pixels_and_at_least_min_kept():
    gen = torch.Generator().manual_seed(3)
    logits = (3 * torch.randn(2, 4, 16, 16, generator=gen)).requires_grad_(True)
    target = torch.randint(0, 4, (2, 16, 16), generator=gen)
    target[1, :4] = 255
    valid = target != 255
    prob = logits.detach().softmax(1).gather(1, target.clamp(max=3).unsqueeze(1)).squeeze(1)
    for min_kept, thresh in [(0, 0.7), (50, 0.7), (120, 0.05)]:
        keep = ohem_keep_mask(logits, target, thresh, min_kept, 255)
        assert not keep[~valid].any()
        assert keep[valid & (prob < thresh)].all()  # every pixel below thresh
        assert int(keep.sum()) >= min(2 * min_kept, int(valid.sum()))  # at least min_kept per image
        assert (prob[keep].max() if keep.any() else 0) <= prob[valid & ~keep].min()  # the hardest ones
    loss = OhemCrossEntropyLoss(thresh=0.05, min_kept=120)(logits, target)
    loss.backward()
    # the mean CE of exactly the kept pixels, and no gradient into the others
    ce = F.cross_entropy(logits.detach(), target, ignore_index=255, reduction="none")
    torch.testing.assert_close(loss.detach(), ce[keep].mean())
    assert logits.grad.abs().sum(1)[~keep].max() == 0
    with pytest.raises(ValueError, match="thresh must be in"):
        OhemCrossEntropyLoss(thresh=0.0)
    with pytest.raises(ValueError, match="min_kept must be an int >= 0"):
        OhemCrossEntropyLoss(min_kept=-1)


def jaccard_loss_of_set(mispredicted: set, fg: set) -> float:
    union = fg | mispredicted
    return len(mispredicted) / len(union) if union else 0.0


def lovasz_brute_force(prob, target, ignore_index=255, classes="present"):
    """Lovász extension of the Jaccard loss as the maximum of sum_i m_pi(i) (D(S_i) - D(S_i-1)) over *every*
    order of the pixels (the extension of a submodular set function; no sorting), averaged over classes.
    prob: [C, N] list of lists, target: [N] list."""
    num_classes = len(prob)
    pixels = [i for i, t in enumerate(target) if t != ignore_index]
    losses = []
    for c in range(num_classes):
        fg = {i for i in pixels if target[i] == c}
        if classes == "present" and not fg:
            continue
        errors = {i: abs((1.0 if i in fg else 0.0) - prob[c][i]) for i in pixels}
        best = 0.0
        for order in itertools.permutations(pixels):
            value, prefix, previous = 0.0, set(), 0.0
            for i in order:
                prefix.add(i)
                current = jaccard_loss_of_set(prefix, fg)
                value += errors[i] * (current - previous)
                previous = current
            best = max(best, value)
        losses.append(best)
    return sum(losses) / len(losses) if losses else 0.0


def test_lovasz_hand_computed():
    # 1x2x1x3, p(class 1) = 0.2, 0.7, 0.4, labels 0, 1, 1 (and an ignored 4th pixel that changes nothing).
    # class 1: errors 0.2, 0.3, 0.6 sorted 0.6 (fg), 0.3 (fg), 0.2 (bg) -> Jaccard 1/2, 1, 1 -> grad 1/2, 1/2, 0
    #          -> 0.6/2 + 0.3/2 = 0.45
    # class 0: errors 0.2, 0.3, 0.6 sorted 0.6 (bg), 0.3 (bg), 0.2 (fg) -> Jaccard 1/2, 2/3, 1 -> grad 1/2, 1/6, 1/3
    #          -> 0.3 + 0.05 + 0.2/3
    p1 = torch.tensor([0.2, 0.7, 0.4, 0.9], dtype=torch.float64)
    logits = torch.stack([(1 - p1).log(), p1.log()]).view(1, 2, 1, 4)
    target = torch.tensor([[[0, 1, 1, 255]]])
    expected = (0.45 + (0.3 + 0.05 + 0.2 / 3)) / 2
    loss = LovaszLoss()(logits, target, ignore_index=255)
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=torch.float64))
    assert abs(lovasz_brute_force([(1 - p1).tolist(), p1.tolist()], [0, 1, 1, 255]) - expected) < 1e-12
    torch.testing.assert_close(LovaszLoss(classes=[1], loss_weight=2.0)(logits, target, 255),
                               torch.tensor(0.9, dtype=torch.float64))


def test_lovasz_matches_brute_force_per_image_and_batch():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 3, 1, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[[0, 2, 2]], [[1, 255, 1]]])  # class 1 absent from image 0, class 0 from image 1
    prob = logits.detach().softmax(1).flatten(2)  # [B, C, N]
    for classes in ("present", "all"):
        per_image = [lovasz_brute_force(prob[b].tolist(), target[b].flatten().tolist(), classes=classes)
                     for b in range(2)]
        loss = LovaszLoss(per_image=True, classes=classes)(logits, target, 255)
        torch.testing.assert_close(loss.item(), sum(per_image) / 2, rtol=0, atol=1e-10)
        batch_prob = prob.permute(1, 0, 2).reshape(3, -1).tolist()
        batch = lovasz_brute_force(batch_prob, target.flatten().tolist(), classes=classes)
        torch.testing.assert_close(LovaszLoss(classes=classes)(logits, target, 255).item(), batch, rtol=0, atol=1e-10)
    loss.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[1, :, 0, 1].abs().max() == 0  # ignored: no gradient
    with pytest.raises(ValueError, match="classes must be one of"):
        LovaszLoss(classes="some")
    with pytest.raises(ValueError, match=r"classes \[5\] name ids >= the logits' 3 classes"):
        LovaszLoss(classes=[5])(logits, target)


def test_focal_hand_computed_and_torchvision_binary():
    logits, target = logits_from_probs(OHEM_PROBS), OHEM_TARGET
    pt = [0.9, 0.6, 0.8]  # true-class probabilities of the valid pixels, classes 0, 1, 2
    alpha = [0.25, 0.5, 1.0]
    hand = sum(-a * (1 - p) ** 2 * math.log(p) for p, a in zip(pt, alpha)) / 3
    loss = MODELS.build(dict(type="FocalLoss", gamma=2.0, alpha=alpha))(logits, target, ignore_index=255)
    torch.testing.assert_close(loss.item(), hand, rtol=1e-12, atol=0)
    scalar = FocalLoss(gamma=1.0, alpha=0.5, loss_weight=2.0)(logits, target, 255)
    torch.testing.assert_close(scalar.item(), 2 * sum(-0.5 * (1 - p) * math.log(p) for p in pt) / 3)
    # gamma 0, no alpha: cross-entropy
    logits2, target2 = logits_and_target()
    torch.testing.assert_close(FocalLoss(gamma=0.0)(logits2, target2, 255),
                               F.cross_entropy(logits2, target2, ignore_index=255))
    # two classes (logits 0 and z) with alpha [1 - a, a] is torchvision's sigmoid focal loss of z
    z = torch.randn(2, 1, 5, 6, generator=torch.Generator().manual_seed(2))
    t = torch.randint(0, 2, (2, 5, 6), generator=torch.Generator().manual_seed(4))
    t[0, 0] = 255
    valid = t != 255
    ref = sigmoid_focal_loss(z[:, 0][valid], t[valid].float(), alpha=0.25, gamma=2.0, reduction="mean")
    two = torch.cat([torch.zeros_like(z), z], dim=1)
    torch.testing.assert_close(FocalLoss(gamma=2.0, alpha=[0.75, 0.25])(two, t, 255), ref)
    with pytest.raises(ValueError, match="alpha has 2 values but the logits have 3 classes"):
        FocalLoss(alpha=[0.5, 0.5])(logits, target)


def test_binary_cross_entropy_one_and_two_channels():
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 2, 4, 5, generator=gen)
    target = torch.randint(0, 2, (2, 4, 5), generator=gen)
    target[1, 0] = 255
    valid = target != 255
    one = logits[:, 1:]
    ref = F.binary_cross_entropy_with_logits(one[:, 0][valid], target[valid].float(), pos_weight=torch.tensor(3.0))
    torch.testing.assert_close(MODELS.build(dict(type="BinaryCrossEntropyLoss", pos_weight=3.0))(one, target), ref)
    # two channels: the logit l1 - l0; without pos_weight it is the 2-class cross-entropy
    diff = (logits[:, 1] - logits[:, 0])[valid]
    torch.testing.assert_close(BinaryCrossEntropyLoss(pos_weight=2.0)(logits, target),
                               F.binary_cross_entropy_with_logits(diff, target[valid].float(),
                                                                  pos_weight=torch.tensor(2.0)))
    torch.testing.assert_close(BinaryCrossEntropyLoss(loss_weight=0.5)(logits, target),
                               0.5 * F.cross_entropy(logits, target, ignore_index=255))
    bad = target.clone()
    bad[0, 0, 0] = 2
    with pytest.raises(ValueError, match=r"expects labels 0 \(background\), 1 \(foreground\) or ignore_index 255, "
                                         r"got \[2\]"):
        BinaryCrossEntropyLoss()(logits, bad)
    with pytest.raises(ValueError, match="got 3; use CrossEntropyLoss"):
        BinaryCrossEntropyLoss()(torch.zeros(1, 3, 2, 2), torch.zeros(1, 2, 2, dtype=torch.long))


def test_head_sums_ce_dice_lovasz_with_their_weights():
    losses = [dict(type="CrossEntropyLoss", loss_weight=1.0), dict(type="DiceLoss", loss_weight=0.5),
              dict(type="LovaszLoss", loss_weight=0.3)]
    head = FCNHead(in_channels=8, channels=4, num_classes=3, dropout_ratio=0.0, loss_decode=losses)
    logits, target = logits_and_target()
    out = head.loss(logits, target)
    assert set(out) == {"loss_ce", "loss_dice", "loss_lovasz", "acc_seg"}
    parts = {"loss_ce": F.cross_entropy(logits, target, ignore_index=255),
             "loss_dice": 0.5 * DiceLoss()(logits, target, 255),
             "loss_lovasz": 0.3 * LovaszLoss()(logits, target, 255)}
    for key, value in parts.items():
        torch.testing.assert_close(out[key], value)
    total, log_vars = BaseModel.parse_losses(head, out)  # what the segmentor's train_step sums
    torch.testing.assert_close(total, sum(parts.values()))
    assert set(log_vars) == {"loss", "loss_ce", "loss_dice", "loss_lovasz", "acc_seg"}


def test_half_precision_logits_give_the_float32_loss():
    # 32768 pixels with a per-pixel loss ~3: a float16 sum would pass 65504 (inf, then NaN)
    gen = torch.Generator().manual_seed(6)
    logits = 3 * torch.randn(1, 3, 128, 256, generator=gen)
    target = torch.randint(0, 3, (1, 128, 256), generator=gen)
    target[0, :8] = 255
    half = logits.half().requires_grad_(True)
    for loss in (CrossEntropyLoss(), OhemCrossEntropyLoss(min_kept=1000), FocalLoss(), LovaszLoss(),
                 BinaryCrossEntropyLoss()):
        inputs, labels = half, target
        if isinstance(loss, BinaryCrossEntropyLoss):
            inputs, labels = half[:, :2], torch.where(target == 255, target, target.clamp(max=1))
        value = loss(inputs, labels)
        value.backward()
        assert value.dtype == torch.float32 and torch.isfinite(half.grad).all(), type(loss).__name__
        torch.testing.assert_close(value, loss(inputs.detach().float(), labels), rtol=2e-3, atol=0)
