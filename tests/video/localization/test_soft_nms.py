"""Gaussian Soft-NMS of temporal proposals: the decay formula by hand, the width-adaptive threshold, and the
whole procedure against a literal re-statement of the reference loop (MMAction2's ``soft_nms``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from video.localization import segment_ioa, segment_iou, soft_nms


def reference_soft_nms(proposals: np.ndarray, alpha: float, low: float, high: float, top_k: int) -> np.ndarray:
    """MMAction2's loop, restated: pick the best remaining, decay the others above the adaptive threshold."""
    order = proposals[:, -1].argsort()[::-1]
    tstart, tend, tscore = (list(proposals[order, c]) for c in (0, 1, -1))
    kept = []
    while tscore and len(kept) <= top_k:
        m = int(np.argmax(tscore))
        width = tend[m] - tstart[m]
        for i in range(len(tscore)):
            if i == m:
                continue
            inter = max(min(tend[i], tend[m]) - max(tstart[i], tstart[m]), 0.0)
            iou = inter / (tend[i] - tstart[i] + width - inter)
            if iou > low + (high - low) * width:
                tscore[i] *= math.exp(-iou**2 / alpha)
        kept.append((tstart.pop(m), tend.pop(m), tscore.pop(m)))
    return np.array(kept).reshape(-1, 3)


def test_decay_by_hand():
    # A [0, .5] 0.9 picked first; B [.1, .5]: IoU .4/.5 = .8 > .5 + .4 * .5 = .7 -> .8 * exp(-.64 / .4);
    # C [.6, 1] does not overlap A or B and keeps 0.5.
    props = torch.tensor([[0.1, 0.5, 0.8], [0.0, 0.5, 0.9], [0.6, 1.0, 0.5]], dtype=torch.float64)
    out = soft_nms(props, alpha=0.4, low_threshold=0.5, high_threshold=0.9, top_k=100)
    expected = torch.tensor([[0.0, 0.5, 0.9], [0.6, 1.0, 0.5], [0.1, 0.5, 0.8 * math.exp(-1.6)]], dtype=torch.float64)
    torch.testing.assert_close(out, expected)


def test_threshold_grows_with_the_kept_width():
    # A spans the whole video: threshold .5 + .4 * 1 = .9; B overlaps it with IoU .85 and is not decayed.
    props = torch.tensor([[0.0, 1.0, 0.9], [0.0, 0.85, 0.8]])
    out = soft_nms(props, alpha=0.4, low_threshold=0.5, high_threshold=0.9)
    torch.testing.assert_close(out[:, 2], torch.tensor([0.9, 0.8]))
    # the same IoU under a short kept proposal (threshold .5 + .4 * .2 = .58) decays
    props = torch.tensor([[0.0, 0.2, 0.9], [0.0, 0.17, 0.8]])
    out = soft_nms(props, alpha=0.4, low_threshold=0.5, high_threshold=0.9)
    torch.testing.assert_close(out[1, 2], torch.tensor(0.8 * math.exp(-(0.85**2) / 0.4)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_reference_loop(seed):
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, 0.9, 300)
    props = np.stack([start, np.minimum(start + rng.uniform(0.01, 0.6, 300), 1.0), rng.uniform(0, 1, 300)], 1)
    expected = reference_soft_nms(props, 0.4, 0.5, 0.9, top_k=100)
    out = soft_nms(torch.from_numpy(props), alpha=0.4, low_threshold=0.5, high_threshold=0.9, top_k=100)
    assert out.shape == (101, 3)  # top_k + 1, as the reference's `len(kept) <= top_k`
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert (out[1:, 2] <= out[:-1, 2]).all()


def test_empty_and_invalid():
    assert soft_nms(torch.zeros(0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="K, >= 3"):
        soft_nms(torch.zeros(4, 2))


def test_segment_overlaps():
    a0, a1 = torch.tensor([0.0, 0.2]), torch.tensor([0.5, 0.4])
    torch.testing.assert_close(segment_iou(a0, a1, torch.tensor(0.25), torch.tensor(0.75)),
                               torch.tensor([0.25 / 0.75, 0.15 / 0.55]))
    torch.testing.assert_close(segment_ioa(a0, a1, torch.tensor(0.25), torch.tensor(0.75)),
                               torch.tensor([0.5, 0.75]))
    assert segment_iou(torch.tensor(0.3), torch.tensor(0.3), torch.tensor(0.3), torch.tensor(0.3)) == 0
