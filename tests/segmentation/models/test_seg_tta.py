"""Test-time augmentation (test_cfg.aug) of EncoderDecoder: one view equals plain inference, flips and scales equal
the hand-made average of the model's softmax over the views, slide mode works, and bad aug keys are explained."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from segmentation.models.segmentors import check_aug_cfg
from segmentation.registry import MODELS


def _model(cfg_factory, name: str, **test_cfg):
    torch.manual_seed(0)
    cfg = cfg_factory(name)
    cfg["test_cfg"] = test_cfg
    return MODELS.build(cfg).eval()


def _set_aug(model, **aug):
    model.test_cfg["aug"] = check_aug_cfg(aug)


def test_tta_matches_manual_average(cfg_factory, batch_factory):
    # U-Net needs sizes divisible by 16: the 0.75-scale view (48x48) is padded to 48, 1.25 (80x80) to 80,
    # 0.6 (38x38) to 48 by the data preprocessor's size_divisor (set to 16 here)
    model = _model(cfg_factory, "unet")
    model.data_preprocessor.size_divisor = 16
    data = model.data_preprocessor(batch_factory(with_gt=False), False)
    x = data["inputs"]  # [2, 3, 64, 64], second image padded from 56x48
    with torch.no_grad():
        plain_logits = model.inference(x)
        plain = model.predict(x, data["data_samples"])

        # one view, no flip: exactly the plain inference's softmax, same labels
        _set_aug(model, scales=[1.0], flip=False)
        one = model.aug_inference(x)
        assert torch.equal(one, plain_logits.softmax(1))
        tta = model.predict(x, batch_factory(with_gt=False)["data_samples"])
        assert torch.equal(tta[0].pred_sem_seg.data, plain[0].pred_sem_seg.data)
        torch.testing.assert_close(tta[0].seg_logits.data, plain[0].seg_logits.data.softmax(0))
        assert tta[1].seg_logits.data.shape == plain[1].seg_logits.data.shape == (4, 112, 96)

        # horizontal flip: mean of softmax(model(x)) and softmax(model(flip(x))) flipped back
        _set_aug(model, scales=[1.0], flip=True)
        manual = (plain_logits.softmax(1) + model.inference(x.flip(3)).flip(3).softmax(1)) / 2
        torch.testing.assert_close(model.aug_inference(x), manual)

        # two scales x two flip directions = 4 views in 2 forwards (one per scale)
        calls = []
        encode = model.encode_decode
        model.encode_decode = lambda v: (calls.append(tuple(v.shape)), encode(v))[1]
        _set_aug(model, scales=[0.6, 1.25], flip=True, flip_direction=["horizontal", "vertical"])
        got = model.aug_inference(x)
        model.encode_decode = encode
        assert calls == [(6, 3, 48, 48), (6, 3, 80, 80)]
        views = []
        for s in (0.6, 1.25):
            size = round(64 * s)
            xs = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
            for dims in ((), (3,), (2,)):
                v = xs.flip(dims) if dims else xs
                pad = -size % 16
                out = model.inference(F.pad(v, (0, pad, 0, pad)))[..., :size, :size]
                out = out.flip(dims) if dims else out
                views.append(F.interpolate(out, size=(64, 64), mode="bilinear", align_corners=False).softmax(1))
        torch.testing.assert_close(got, torch.stack(views).mean(0))
        torch.testing.assert_close(got.sum(1), torch.ones(2, 64, 64))


def test_tta_with_slide_inference(cfg_factory):
    model = _model(cfg_factory, "deeplabv3_r50", mode="slide", crop_size=[32, 32], stride=[24, 24], batch_size=4,
                   aug=dict(scales=[1.0, 1.5], flip=True))
    x = torch.randn(1, 3, 48, 40)
    with torch.no_grad():
        got = model.aug_inference(x)
        manual = 0
        for s in (1.0, 1.5):
            xs = F.interpolate(x, size=(round(48 * s), round(40 * s)), mode="bilinear") if s != 1 else x
            for flip in (False, True):
                out = model.inference(xs.flip(3) if flip else xs)
                out = out.flip(3) if flip else out
                manual = manual + F.interpolate(out, size=(48, 40), mode="bilinear").softmax(1) / 4
        preds = model.predict(x)
    torch.testing.assert_close(got, manual)
    assert torch.equal(preds[0].pred_sem_seg.data[0], manual[0].argmax(0))


@pytest.mark.parametrize("aug, message", [
    (dict(scales=[]), "test_cfg.aug.scales must be a non-empty list of positive numbers"),
    (dict(scales=[1.0, -0.5]), "test_cfg.aug.scales must be"),
    (dict(scales="big"), "test_cfg.aug.scales must be"),
    (dict(flip="yes"), "test_cfg.aug.flip must be true or false"),
    (dict(flip=True, flip_direction=["sideways"]), r"test_cfg.aug.flip_direction must be a non-empty list of \["),
    (dict(flip=True, flip_direction=["vertical", "vertical"]), "without repeats"),
    (dict(scale=[1.0]), r"unknown key test_cfg.aug.scale \(did you mean 'scales'\?\)"),
    (dict(size_divisor=0), "test_cfg.aug.size_divisor must be an int >= 1"),
    ([1.0, 2.0], "test_cfg.aug must be a mapping"),
])
def test_aug_cfg_errors(cfg_factory, aug, message):
    cfg = cfg_factory("unet")
    cfg["test_cfg"] = dict(mode="whole", aug=aug)
    with pytest.raises(ValueError, match=message):
        MODELS.build(cfg)


def test_aug_cfg_defaults():
    assert check_aug_cfg({"flip": True}) == {"scales": [1.0], "flip": True, "flip_direction": ["horizontal"],
                                             "size_divisor": None}
    assert check_aug_cfg({"scales": 2, "flip_direction": "diagonal"})["flip_direction"] == ["diagonal"]
