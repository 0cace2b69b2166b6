"""Sliding-window inference: equals whole inference when one crop covers the image, and equals a plain
window-by-window loop (mmseg's algorithm) otherwise."""

from __future__ import annotations

import pytest
import torch

from segmentation.models.segmentors import slide_inference, window_starts
from segmentation.registry import MODELS


def loop_reference(inputs, crop, stride, encode):
    """mmseg's slide_inference, one window at a time."""
    b, _, h, w = inputs.shape
    ch, cw = crop
    sh, sw = stride
    out, count = None, torch.zeros(1, 1, h, w)
    for hi in range(max(h - ch + sh - 1, 0) // sh + 1):
        for wi in range(max(w - cw + sw - 1, 0) // sw + 1):
            y1, x1 = hi * sh, wi * sw
            y2, x2 = min(y1 + ch, h), min(x1 + cw, w)
            y1, x1 = max(y2 - ch, 0), max(x2 - cw, 0)
            logits = encode(inputs[:, :, y1:y2, x1:x2])
            if out is None:
                out = inputs.new_zeros(b, logits.shape[1], h, w)
            out[:, :, y1:y2, x1:x2] += logits
            count[:, :, y1:y2, x1:x2] += 1
    return out / count


def test_window_starts():
    assert window_starts(10, 4, 3).tolist() == [0, 3, 6]
    assert window_starts(11, 4, 3).tolist() == [0, 3, 6, 7]
    assert window_starts(4, 4, 3).tolist() == [0]


def test_matches_window_loop():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 5, 3, padding=1)
    # position-dependent encoder (adds each crop's own mean) so a misplaced window would show
    encode = lambda x: conv(x) + x.mean(dim=(1, 2, 3), keepdim=True)
    x = torch.randn(2, 3, 23, 30)
    with torch.no_grad():
        for crop, stride, bs in [((8, 10), (5, 7), None), ((16, 16), (16, 16), 3), ((40, 12), (4, 5), 2)]:
            ours = slide_inference(x, crop, stride, encode, batch_size=bs)
            ref = loop_reference(x, (min(crop[0], 23), min(crop[1], 30)), stride, encode)
            torch.testing.assert_close(ours, ref)


def test_slide_equals_whole_when_crop_covers_image(cfg_factory, batch_factory):
    torch.manual_seed(0)
    model = MODELS.build(cfg_factory("deeplabv3_r50")).eval()
    batch = batch_factory(with_gt=False)
    with torch.no_grad():
        whole = model.test_step(batch)
        model.test_cfg = dict(mode="slide", crop_size=(64, 80), stride=(32, 32))
        slide = model.test_step(batch_factory(with_gt=False))
        model.test_cfg = dict(mode="slide", crop_size=(32, 32), stride=(16, 16))
        data = model.data_preprocessor(batch_factory(with_gt=False), False)
        tiled = model.inference(data["inputs"])
    for a, b in zip(whole, slide):
        torch.testing.assert_close(a.seg_logits.data, b.seg_logits.data)
        assert torch.equal(a.pred_sem_seg.data, b.pred_sem_seg.data)
    assert tiled.shape == (2, 4, 64, 64) and torch.isfinite(tiled).all()


def test_windows_run_in_chunks_and_match_loop():
    """Default: one window per forward (bounded memory); batch_size=n: at most n, across image borders."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    seen: list[int] = []

    def encode(x):
        seen.append(x.shape[0])
        return conv(x) + x.mean(dim=(1, 2, 3), keepdim=True)

    x = torch.randn(2, 3, 20, 27)
    windows = 2 * len(window_starts(20, 8, 6)) * len(window_starts(27, 9, 7))
    with torch.no_grad():
        ref = loop_reference(x, (8, 9), (6, 7), lambda t: conv(t) + t.mean(dim=(1, 2, 3), keepdim=True))
        for bs, expected in [(None, [1] * windows), (5, [5] * (windows // 5) + [windows % 5] * (windows % 5 > 0))]:
            seen.clear()
            ours = slide_inference(x, (8, 9), (6, 7), encode, batch_size=bs)
            assert seen == expected
            torch.testing.assert_close(ours, ref)
            assert ours.is_contiguous() and ours.shape == (2, 4, 20, 27)


def test_bad_batch_size_is_rejected(cfg_factory):
    with pytest.raises(ValueError, match="batch_size"):
        slide_inference(torch.zeros(1, 3, 8, 8), (4, 4), (4, 4), lambda t: t, batch_size=0)
    cfg = cfg_factory("unet")
    cfg["test_cfg"] = dict(mode="slide", crop_size=[32, 32], stride=[16, 16], batch_size=0)
    with pytest.raises(ValueError, match="test_cfg.batch_size"):
        MODELS.build(cfg)
