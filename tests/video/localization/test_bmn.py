"""BMN: the boundary-matching sampling matrix and BM map by hand and against the reference's loops, the targets
and the three losses on hand-computed cases, candidate proposals, the three modes, and a few optimizer steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from video.localization import bmn_proposals, boundary_candidates
from video.models.localizers import (
    BMN,
    bm_valid_mask,
    bmn_targets,
    boundary_matching,
    interp1d_sample_mask,
    pad_segments,
)
from video.models.losses.bmn_loss import BMNLoss, balanced_iou_regression, weighted_binary_logistic
from video.structures import ActionDataSample

SMALL = dict(feat_dim=16, tscale=12, dscale=10, num_sample=4, num_sample_perbin=2, hidden_dim_1d=16,
             hidden_dim_2d=8, hidden_dim_3d=16)


def reference_mask(tscale, dscale, ratio, num_sample, per_bin):
    """The reference's ``_get_interp1d_mask`` loops, restated (``math.modf`` truncation included)."""
    out = np.zeros((tscale, num_sample, dscale, tscale))
    for s in range(tscale):
        for d in range(dscale):
            if s + d >= tscale:
                continue
            lo, hi = s - (d + 1) * ratio, s + d + (d + 1) * ratio
            step = (hi - lo) / (num_sample * per_bin - 1.0)
            points = [lo + step * i for i in range(num_sample * per_bin)]
            for n in range(num_sample):
                for x in points[n * per_bin:(n + 1) * per_bin]:
                    frac, down = math.modf(x)
                    if 0 <= int(down) <= tscale - 1:
                        out[int(down), n, d, s] += (1 - frac) / per_bin
                    if 0 <= int(math.ceil(x)) <= tscale - 1:
                        out[int(math.ceil(x)), n, d, s] += frac / per_bin
    return out.reshape(tscale, -1)


def test_sample_mask_by_hand():
    # T=4, D=2, ratio .5, N=2 samples of P=2 points: 4 points spaced by a third of the extended region.
    mask = interp1d_sample_mask(4, 2, 0.5, 2, 2).view(4, 2, 2, 4)  # [t, n, d, s]
    # cell [d=0, s=1]: region [.5, 1.5], points .5, .8333, 1.1667, 1.5
    #   sample 0 = mean of (.5 on 0, .5 on 1) and (1/6 on 0, 5/6 on 1) -> 1/3 on 0, 2/3 on 1
    #   sample 1 = mean of (5/6 on 1, 1/6 on 2) and (.5 on 1, .5 on 2) -> 2/3 on 1, 1/3 on 2
    torch.testing.assert_close(mask[:, 0, 0, 1], torch.tensor([1 / 3, 2 / 3, 0, 0]))
    torch.testing.assert_close(mask[:, 1, 0, 1], torch.tensor([0, 2 / 3, 1 / 3, 0]))
    # cell [d=0, s=0]: points -.5, -1/6 truncate to 0 and weigh 1 there (1 - frac + frac, frac < 0)
    torch.testing.assert_close(mask[:, 0, 0, 0], torch.tensor([1.0, 0, 0, 0]))
    torch.testing.assert_close(mask[:, 1, 0, 0], torch.tensor([2 / 3, 1 / 3, 0, 0]))
    # cell [d=1, s=2]: region [1, 4], points 1, 2, 3, 4; the point at 4 lies outside and adds nothing
    torch.testing.assert_close(mask[:, 0, 1, 2], torch.tensor([0, 0.5, 0.5, 0]))
    torch.testing.assert_close(mask[:, 1, 1, 2], torch.tensor([0, 0, 0, 0.5]))
    # cell [d=1, s=3] would end past the sequence: all zero
    assert mask[:, :, 1, 3].abs().sum() == 0
    # the BM map of x = [10, 20, 30, 40]
    x = torch.tensor([[[10.0, 20.0, 30.0, 40.0]]])
    bm = boundary_matching(x, interp1d_sample_mask(4, 2, 0.5, 2, 2), num_sample=2, dscale=2)
    assert bm.shape == (1, 1, 2, 2, 4)
    torch.testing.assert_close(bm[0, 0, :, 0, 1], torch.tensor([50 / 3, 70 / 3]))
    torch.testing.assert_close(bm[0, 0, :, 1, 2], torch.tensor([25.0, 20.0]))


@pytest.mark.parametrize("args", [(10, 7, 0.5, 4, 3), (9, 9, 0.25, 3, 1), (12, 5, 0.5, 32, 3)])
def test_sample_mask_matches_reference_loops(args):
    ours = interp1d_sample_mask(*args)
    torch.testing.assert_close(ours, torch.from_numpy(reference_mask(*args)).float(), rtol=0, atol=1e-6)


def test_bm_valid_mask():
    torch.testing.assert_close(bm_valid_mask(4, 3), torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]]))


def test_targets_by_hand():
    # T = D = 4, one segment [.25, .75]; the second video has none.
    segments, valid = pad_segments([torch.tensor([[0.25, 0.75]]), torch.zeros(0, 2)], torch.device("cpu"))
    iou, start, end = bmn_targets(segments, valid, tscale=4, dscale=4)
    assert iou.shape == (2, 4, 4) and start.shape == end.shape == (2, 4)
    # cell [d, s] = [s / 4, (s + d + 1) / 4]
    assert iou[0, 1, 1] == 1.0  # [.25, .75]
    torch.testing.assert_close(iou[0, 0, 1], torch.tensor(0.5))  # [.25, .5]
    torch.testing.assert_close(iou[0, 2, 0], torch.tensor(2 / 3))  # [0, .75]
    assert iou[0, 0, 0] == 0  # [0, .25]
    # anchors [(i - .5) / 4, (i + 1.5) / 4]; start region [.25 -+ 3/8] = [-.125, .625]; end region [.375, 1.125]
    torch.testing.assert_close(start[0], torch.tensor([1.0, 1.0, 0.5, 0.0]))
    torch.testing.assert_close(end[0], torch.tensor([0.0, 0.5, 1.0, 1.0]))
    assert iou[1].abs().sum() == 0 and start[1].abs().sum() == 0 and end[1].abs().sum() == 0


def reference_targets(gt: np.ndarray, tscale: int):
    """The reference's ``generate_labels`` loops for one video (IoU per proposal, IoA per anchor), restated."""
    gap = 1.0 / tscale
    iou = np.zeros((tscale, tscale))
    for d in range(tscale):
        for s in range(tscale):
            p0, p1 = s * gap, (s + d + 1) * gap
            for g0, g1 in gt:
                inter = max(min(p1, g1) - max(p0, g0), 0.0)
                iou[d, s] = max(iou[d, s], inter / (p1 - p0 + g1 - g0 - inter))

    def ioa(centres):
        out = np.zeros(tscale)
        for i in range(tscale):
            a0, a1 = gap * (i - 0.5), gap * (i + 1.5)
            for c in centres:
                inter = max(min(a1, c + 1.5 * gap) - max(a0, c - 1.5 * gap), 0.0)
                out[i] = max(out[i], inter / (a1 - a0))
        return out

    return iou, ioa(gt[:, 0]), ioa(gt[:, 1])


def test_targets_match_reference_loops():
    rng = np.random.default_rng(0)
    gts = []
    for n in (3, 1, 5):
        start = rng.uniform(0, 0.8, n)
        gts.append(np.stack([start, np.minimum(start + rng.uniform(0.02, 0.5, n), 1.0)], 1))
    segments, valid = pad_segments([torch.from_numpy(g).float() for g in gts], torch.device("cpu"))
    iou, start, end = bmn_targets(segments, valid, tscale=16, dscale=16)
    for i, gt in enumerate(gts):
        ref = reference_targets(gt.astype(np.float32).astype(np.float64), 16)
        for ours, theirs in zip((iou[i], start[i], end[i]), ref):
            np.testing.assert_allclose(ours.numpy(), theirs, atol=2e-6)


def test_tem_loss_by_hand():
    pred = torch.tensor([0.8, 0.2, 0.4, 0.1])
    target = torch.tensor([0.9, 0.3, 0.0, 0.5])  # one positive (> .5): ratio 4, weights 2 and 2/3
    eps = 1e-5
    expected = -(2 * math.log(0.8 + eps) + 2 / 3 * (math.log(0.8 + eps) + math.log(0.6 + eps)
                                                     + math.log(0.9 + eps))) / 4
    torch.testing.assert_close(weighted_binary_logistic(pred, target), torch.tensor(expected))
    # the ratio is clamped to [1.05, 21]: all positives -> ratio 1.05
    all_pos = weighted_binary_logistic(pred, torch.ones(4))
    expected = -0.5 * 1.05 * sum(math.log(p + eps) for p in (0.8, 0.2, 0.4, 0.1)) / 4
    torch.testing.assert_close(all_pos, torch.tensor(expected))


def test_pem_cls_loss_by_hand():
    # masked: the last cell is invalid; positives IoU > .9: one of three entries -> ratio 3
    pred = torch.tensor([[0.7, 0.4, 0.2, 0.9]])
    target = torch.tensor([[0.95, 0.5, 0.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    eps = 1e-5
    expected = -(1.5 * math.log(0.7 + eps) + 0.75 * (math.log(0.6 + eps) + math.log(0.8 + eps))) / 3
    torch.testing.assert_close(weighted_binary_logistic(pred, target * mask, mask, threshold=0.9),
                               torch.tensor(expected))


def test_pem_reg_loss_by_hand():
    # one high (.8), one medium (.5), two low (.1, 0) cells, one invalid: r_m = 1 -> the medium cell counts;
    # r_l = 1/2 -> a low cell counts when its draw is below .5 (the .1 cell: .3 yes; the 0 cell: .7 no)
    pred = torch.tensor([[[0.6, 0.3, 0.4, 0.2, 0.9]]])
    target = torch.tensor([[[0.8, 0.5, 0.1, 0.0, 0.0]]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    rand = torch.tensor([[[0.99, 0.99, 0.3, 0.7, 0.0]]])
    expected = 0.5 * (0.2**2 + 0.2**2 + 0.3**2) / 3
    loss = balanced_iou_regression(pred, target, mask, 0.7, 0.3, rand=rand)
    torch.testing.assert_close(loss, torch.tensor(expected))
    # no high cell: nothing is drawn and the loss is 0, not NaN
    assert balanced_iou_regression(pred, target * 0.5, mask, rand=rand) == 0


def test_bmn_loss_total_and_weights():
    torch.manual_seed(0)
    pred_bm, start, end = torch.rand(2, 2, 3, 4), torch.rand(2, 4), torch.rand(2, 4)
    gt_iou, gt_s, gt_e = torch.rand(2, 3, 4), torch.rand(2, 4), torch.rand(2, 4)
    mask = bm_valid_mask(4, 3)
    torch.manual_seed(1)
    losses = BMNLoss()(pred_bm, start, end, gt_iou, gt_s, gt_e, mask)
    torch.manual_seed(1)
    reg = balanced_iou_regression(pred_bm[:, 0], gt_iou * mask, mask)
    cls = weighted_binary_logistic(pred_bm[:, 1], gt_iou * mask, mask, threshold=0.9)
    tem = weighted_binary_logistic(start, gt_s) + weighted_binary_logistic(end, gt_e)
    torch.testing.assert_close(losses["loss_tem"], tem)
    torch.testing.assert_close(losses["loss_pem_reg"], 10 * reg)
    torch.testing.assert_close(losses["loss_pem_cls"], cls)


def test_candidate_proposals_by_hand():
    start = torch.tensor([0.9, 0.1, 0.6, 0.2])  # 0 always; 2 is a peak; 1 neither; 3 never -> {0, 2}
    end = torch.tensor([0.3, 0.7, 0.2, 0.5])  # 1 is a peak; 3 always; 0 never -> {1, 3}
    assert boundary_candidates(start, first=True).tolist() == [True, False, True, False]
    assert boundary_candidates(end, first=False).tolist() == [False, True, False, True]
    conf = torch.ones(2, 4, 4)
    conf[0, 2, 0] = 0.5  # reg of [0 -> 3]
    conf[1, 0, 2] = 0.8  # cls of [2 -> 3]
    props = bmn_proposals(start, end, conf)
    # pairs with end = s + d + 1 < 4, in [d, s] order: (d0, s0) 0 -> 1, (d0, s2) 2 -> 3, (d2, s0) 0 -> 3
    expected = torch.tensor([[0.0, 0.25, 0.9 * 0.7], [0.5, 0.75, 0.6 * 0.5 * 0.8], [0.0, 0.75, 0.9 * 0.5 * 0.5]])
    torch.testing.assert_close(props, expected)


def test_candidate_proposals_match_reference_loops():
    g = torch.Generator().manual_seed(0)
    t = 20
    start, end, conf = torch.rand(t, generator=g), torch.rand(t, generator=g), torch.rand(2, t, t, generator=g)
    s_, e_ = start.numpy(), end.numpy()
    s_bins, e_bins = np.zeros(t), np.zeros(t)
    s_bins[0], e_bins[-1] = 1, 1
    for i in range(1, t - 1):
        if (s_[i] > s_[i + 1] and s_[i] > s_[i - 1]) or s_[i] > 0.5 * s_.max():
            s_bins[i] = 1
        if (e_[i] > e_[i + 1] and e_[i] > e_[i - 1]) or e_[i] > 0.5 * e_.max():
            e_bins[i] = 1
    expected = [[s / t, (s + d + 1) / t, s_[s] * e_[s + d + 1] * conf[1, d, s].item() * conf[0, d, s].item()]
                for d in range(t) for s in range(t) if s + d + 1 < t and s_bins[s] and e_bins[s + d + 1]]
    np.testing.assert_allclose(bmn_proposals(start, end, conf).numpy(), np.array(expected), rtol=1e-6)


def _batch(model, seconds=(30.0, 12.0)):
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(model.feat_dim, model.tscale, generator=g) for _ in seconds]
    samples = []
    for i, sec in enumerate(seconds):
        sample = ActionDataSample(metainfo={"duration_second": sec})
        sample.gt_bbox = torch.tensor([[0.1, 0.4], [0.55, 0.9]])[: i + 1]
        samples.append(sample)
    return model.data_preprocessor({"inputs": inputs, "data_samples": samples})


def test_modes():
    torch.manual_seed(0)
    model = BMN(**SMALL, max_proposals=5)
    data = _batch(model)
    losses = model(**data, mode="loss")
    assert set(losses) == {"loss_tem", "loss_pem_reg", "loss_pem_cls"}
    sum(losses.values()).backward()
    assert all(torch.isfinite(v) for v in losses.values())
    confidence, start, end = model(data["inputs"], mode="tensor")
    assert confidence.shape == (2, 2, 10, 12) and start.shape == end.shape == (2, 12)
    preds = model(**data, mode="predict")
    for pred, sec in zip(preds, (30.0, 12.0)):
        props = pred.proposals
        assert props.dtype == torch.float32 and props.shape == (5, 3)
        assert (props[:, 0] >= 0).all() and (props[:, 1] <= sec * 11 / 12 + 1e-5).all()
        assert (props[1:, 2] <= props[:-1, 2]).all()
    # feature_second (the span the features cover) wins over duration_second
    assert BMN.video_seconds({"duration_second": 40.0, "feature_second": 38.4}) == 38.4
    with pytest.raises(KeyError, match="duration_second"):
        BMN.video_seconds({})
    with pytest.raises(ValueError, match="feat_dim=16, tscale=12"):
        model(torch.zeros(1, 16, 10), mode="tensor")


def test_sampling_buffers_are_not_saved():
    model = BMN(**SMALL)
    assert "sample_mask" not in model.state_dict() and "bm_mask" not in model.state_dict()
    assert model.sample_mask.shape == (12, 4 * 10 * 12)


def test_a_few_steps_reduce_the_loss():
    torch.manual_seed(0)
    model = BMN(**SMALL)
    data = _batch(model)
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)

    def total():
        torch.manual_seed(123)  # the same regression draw each time
        return sum(model(**data, mode="loss").values())

    first = total().item()
    for _ in range(30):
        optim.zero_grad()
        total().backward()
        optim.step()
    last = total().item()
    assert last < 0.7 * first, (first, last)


def test_tensor_mode_exports_to_onnx(tmp_path):
    """The tensor mode (confidence, start, end) exports with a dynamic batch and ONNX Runtime matches eager."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    model = BMN(**SMALL).eval()

    class Tensors(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x, mode="tensor")

    path = str(tmp_path / "bmn.onnx")
    torch.onnx.export(Tensors(model), (torch.randn(2, 16, 12),), path, dynamo=True, input_names=["features"],
                      output_names=["confidence", "start", "end"], dynamic_shapes={"x": {0: "batch"}})
    x = np.random.default_rng(0).standard_normal((3, 16, 12)).astype(np.float32)
    outs = ort.InferenceSession(path).run(None, {"features": x})
    with torch.no_grad():
        ref = model(torch.from_numpy(x), mode="tensor")
    for out, expected in zip(outs, ref):
        np.testing.assert_allclose(out, expected.numpy(), atol=1e-5)


def test_export_checks_of_a_localizer():
    """A localiser exports with its recognizer as two FP32 ONNX graphs (video.export_localizer): the task accepts
    onnx/fp32 and refuses TensorRT and --half before the model is built; its input is one video's features."""
    import os

    from demo_utils import ROOT

    from oars.config import load_config
    from oars.export.errors import ExportError
    from oars.tasks import get_task

    path = os.path.join(ROOT, "configs/video/bmn/bmn_400x100_9e_activitynet_feature.yaml")
    cfg = load_config(path)
    task = get_task("video").exporter(cfg)  # the localiser kind's exporter
    task.check_export(cfg, fmt="onnx", precision="fp32")
    with pytest.raises(ExportError, match="--format tensorrt is not supported"):
        task.check_export(cfg, fmt="tensorrt", precision="fp32")
    with pytest.raises(ExportError, match="FP32 graphs only"):
        task.check_export(cfg, fmt="onnx", precision="fp16")
    assert task.export_options(cfg, dynamic=False, opset=18).input_shape == (1, 400, 100)
    assert task.preprocess_steps(cfg) == []
