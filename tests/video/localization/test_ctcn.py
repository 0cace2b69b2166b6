"""C-TCN: anchors by hand and against PaddleVideo's BoxCoder loops, matching and the encoding round trip, the loss
with hard negative mining on hand cases, the NMS steps against loop references, the shrunk model in its three
modes (RGB only and RGB + flow), its detections through LocalizationMetric's mAP, and a few optimizer steps."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from video.evaluation.localization_metrics import LocalizationMetric
from video.models.localizers import (
    CTCN,
    CTCNAnchorGenerator,
    CTCNLoss,
    anchor_targets,
    ctcn_detections,
    decode,
    encode,
    gaussian_soft_nms_rows,
    hard_negatives,
    match_anchors,
    segment_nms,
)
from video.structures import ActionDataSample

PADDLE_WIDTHS = [[1.0, 0.9, 1.1, 0.8, 1.2, 0.7, 1.3]] * 7 + [[1.0, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65]]


def small_cfg(streams: dict[str, int]) -> dict:
    return dict(num_classes=3, streams=streams, temporal_dim=32, loc_channels=8, cls_channels=8,
                backbone=dict(type="ConceptTCN", stem_channels=[4, 8], stage_blocks=[1, 1, 1, 1],
                              stage_planes=[4, 4, 8, 8], fpn_channels=8, num_extra_levels=0),
                anchor_generator=dict(widths=[[1.0, 0.8, 1.2]] * 4))


def paddle_default_boxes() -> np.ndarray:
    """PaddleVideo's ``BoxCoder._get_default_boxes`` loops restated: (centre, width) in positions of 512."""
    boxes = []
    for step, size in zip((4, 8, 16, 32, 64, 128, 256, 512), (128, 64, 32, 16, 8, 4, 2, 1)):
        for h in range(size):
            boxes.append(((h + 0.5) * step, step))
            for p in range(3):
                s = (step * 4.5 / 15.0) * (1.0 + p) / 3
                boxes.append(((h + 0.5) * step, step - s))
                boxes.append(((h + 0.5) * step, step - s - step * 4.5 / 15.0 / 6 if step == 512 else step + s))
    return np.array(boxes)


def test_anchors_by_hand_and_as_paddlevideo():
    gen = CTCNAnchorGenerator(strides=[4, 8], widths=[[1.0, 0.5], [1.0, 2.0]])
    expected = torch.tensor([[0.25, 0.5], [0.25, 0.25], [0.75, 0.5], [0.75, 0.25], [0.5, 1.0], [0.5, 2.0]])
    torch.testing.assert_close(gen(8), expected)
    assert gen.num_anchors == 2 and gen.level_sizes(8) == [2, 1]
    full = CTCNAnchorGenerator([4, 8, 16, 32, 64, 128, 256, 512], PADDLE_WIDTHS)(512)
    assert full.shape == (1785, 2)  # PaddleVideo's total_num_anchors
    np.testing.assert_allclose(full.numpy() * 512, paddle_default_boxes(), rtol=1e-6, atol=1e-4)
    with pytest.raises(ValueError, match="multiple of every stride"):
        gen(12)
    with pytest.raises(ValueError, match="one list per level"):
        CTCNAnchorGenerator([4, 8], [[1.0]])


def test_encode_by_hand_and_round_trip():
    anchors = torch.tensor([[0.5, 0.2], [0.3, 0.4]])
    seg = torch.tensor([[0.42, 0.62], [0.0, 0.8]])
    # centre .52 vs .5 over width .2 / 0.1 = 1; width .2 / .2 - 1 = 0 ; centre .4 vs .3 / .4 / .1 = 2.5, (2 - 1) / .2
    torch.testing.assert_close(encode(seg, anchors), torch.tensor([[1.0, 0.0], [2.5, 5.0]]))
    g = torch.Generator().manual_seed(0)
    start = torch.rand(3, 2, generator=g)
    seg = torch.stack([start, start + torch.rand(3, 2, generator=g) * 0.5 + 0.01], dim=-1)  # [3, 2, 2]
    torch.testing.assert_close(decode(encode(seg, anchors), anchors), seg)


def test_matching_bipartite_then_threshold():
    # anchors [0, .2], [.2, .4], [.4, .6], [.2, .8], [.8, 1], [.18, .42]
    anchors = torch.tensor([[0.1, 0.2], [0.3, 0.2], [0.5, 0.2], [0.5, 0.6], [0.9, 0.2], [0.3, 0.24]])
    gt = torch.tensor([[[0.2, 0.45], [0.9, 0.95]], [[0.0, 0.0], [0.0, 0.0]]])
    valid = torch.tensor([[True, True], [False, False]])
    # gt 0: IoU .8 with anchor 1, .8148 with anchor 5 (bipartite pick), .4167 with anchor 3 (< .5: background);
    # gt 1: IoU .25 with anchor 4 only: below .5, yet matched (every segment gets its best anchor)
    index = match_anchors(anchors, gt, valid)
    assert index.tolist() == [[-1, 0, -1, -1, 1, 0], [-1] * 6]
    loc, cls = anchor_targets(anchors, gt, torch.tensor([[3, 7], [0, 0]]), valid)
    assert cls.tolist() == [[0, 4, 0, 0, 8, 4], [0] * 6]
    torch.testing.assert_close(decode(loc, anchors)[0, [1, 4, 5]], gt[0, [0, 1, 0]])
    # one anchor best for two segments: the bipartite step still gives each segment its own anchor
    index = match_anchors(torch.tensor([[0.5, 1.0], [0.25, 0.5]]), torch.tensor([[[0.0, 1.0], [0.0, 0.9]]]),
                          torch.tensor([[True, True]]))
    assert index.tolist() == [[0, 1]]


def test_hard_negatives_respect_the_ratio():
    ce = torch.tensor([[0.1, 5.0, 0.3, 0.9, 0.2, 0.8, 0.05, 0.4],
                       [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]])
    pos = torch.zeros(2, 8, dtype=torch.bool)
    pos[0, 1] = True  # 1 positive -> its 3 hardest negatives: .9, .8, .4
    pos[1, [0, 1, 2]] = True  # 3 positives -> 9 wanted, only the 5 negatives exist
    neg = hard_negatives(ce, pos, 3.0)
    assert neg[0].nonzero().flatten().tolist() == [3, 5, 7]
    assert neg[1].nonzero().flatten().tolist() == [3, 4, 5, 6, 7]
    assert not (neg & pos).any()
    assert hard_negatives(ce, pos, 1.0).sum(dim=1).tolist() == [1, 3]


def test_loss_hand_case():
    logits = torch.tensor([[[0.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [2.0, 2.0, 0.0]]])
    cls_t = torch.tensor([[1, 0, 0, 0, 0]])
    loc_p = torch.tensor([[[0.5, -2.0], [9.0, 9.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    loc_t = torch.zeros(1, 5, 2)
    out = CTCNLoss(loc_weight=2.0, neg_pos_ratio=2.0)(loc_p, logits, loc_t, cls_t)

    def ce(z, k):
        return math.log(sum(math.exp(v) for v in z)) - z[k]

    pos = ce([0.0, 2.0, 0.0], 1)
    negs = sorted([ce([3.0, 0.0, 0.0], 0), ce([0.0, 1.0, 1.0], 0), ce([1.0, 0.0, 0.0], 0), ce([2.0, 2.0, 0.0], 0)])
    # one positive, ratio 2: the two hardest negatives (anchors 2 and 4); anchor 1's huge offset is not positive
    assert out["loss_cls"].item() == pytest.approx(pos + negs[-1] + negs[-2], rel=1e-6)
    assert out["loss_loc"].item() == pytest.approx(2.0 * (0.5 * 0.5**2 + (2.0 - 0.5)), rel=1e-6)
    none = CTCNLoss()(loc_p, logits, loc_t, torch.zeros_like(cls_t))  # no positive: no term, no NaN
    assert none["loss_cls"].item() == 0.0 and none["loss_loc"].item() == 0.0


def test_segment_nms_and_soft_nms_against_loops():
    g = torch.Generator().manual_seed(1)
    start = torch.rand(40, generator=g)
    seg = torch.stack([start, start + 0.05 + 0.3 * torch.rand(40, generator=g)], dim=1)
    score = torch.rand(40, generator=g)
    cls = torch.randint(0, 3, (40,), generator=g)

    def iou(a, b):
        inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
        return inter / (a[1] - a[0] + b[1] - b[0] - inter)

    expected = []
    for i in score.argsort(descending=True).tolist():  # greedy NMS per class, restated
        if all(cls[i] != cls[j] or iou(seg[i], seg[j]) <= 0.5 for j in expected):
            expected.append(i)
    assert segment_nms(seg, score, cls, 0.5).tolist() == expected

    def soft_loop(props, sigma, thresh):  # PaddleVideo's soft_nms(method=2), restated
        props, kept = [list(p) for p in props], []
        while props:
            props.sort(key=lambda p: -p[2])
            m = props.pop(0)
            kept.append(m)
            props = [[p[0], p[1], p[2] * math.exp(-iou(p, m) ** 2 / sigma)] for p in props]
            props = [p for p in props if p[2] >= thresh]
        return kept

    rows = [torch.cat([seg[cls == c], score[cls == c, None]], dim=1) for c in range(3)]
    width = max(len(r) for r in rows)
    grid_seg, grid_score = torch.zeros(3, width, 2), torch.zeros(3, width)
    for c, r in enumerate(rows):
        grid_seg[c, : len(r)], grid_score[c, : len(r)] = r[:, :2], r[:, 2]
    kept = gaussian_soft_nms_rows(grid_seg, grid_score, 0.3, 0.2)
    for c, r in enumerate(rows):
        ref = sorted(p[2] for p in soft_loop(r.tolist(), 0.3, 0.2))
        ours = sorted(kept[c][kept[c] > 0].tolist())
        assert ours == pytest.approx(ref, rel=1e-5)


@pytest.fixture(scope="module", params=[{"rgb": 5}, {"rgb": 5, "flow": 4}], ids=["rgb", "rgb_flow"])
def model(request):
    torch.manual_seed(0)
    return CTCN(**small_cfg(request.param))


def batch(model, n=2):
    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(n, model.concepts, model.temporal_dim, generator=g)
    samples = []
    for i in range(n):
        sample = ActionDataSample(metainfo={"video_name": f"v{i}", "duration_second": 20.0, "feature_second": 16.0,
                                            "gt_segments": np.array([[1.6, 7.2], [9.6, 14.4]]) if i == 0 else
                                            np.array([[4.0, 12.0]])})
        sample.gt_bbox = torch.tensor([[0.1, 0.45], [0.6, 0.9]]) if i == 0 else torch.tensor([[0.25, 0.75]])
        sample.gt_labels = torch.tensor([0, 2]) if i == 0 else torch.tensor([1])
        samples.append(sample)
    return inputs, samples


def test_modes_and_metric(model):
    inputs, samples = batch(model)
    model.train()
    losses = model(inputs, samples, mode="loss")
    assert set(losses) == {"loss_loc", "loss_cls"} and all(torch.isfinite(v) for v in losses.values())
    sum(losses.values()).backward()
    assert model.cls_head[-1].weight.grad.abs().sum() > 0
    model.eval()
    anchors = model.anchors.shape[0]
    assert anchors == 3 * (8 + 4 + 2 + 1)
    loc, probs = model(inputs, mode="tensor")
    assert loc.shape == (2, anchors, 2) and probs.shape == (2, anchors, 4) and loc.abs().max() <= 5
    preds = model(inputs, batch(model)[1], mode="predict")
    for pred in preds:
        dets = pred.segments
        assert dets.dtype == torch.float32 and dets.shape[1] == 4 and dets.shape[0] > 0
        assert (dets[:, 0] >= 0).all() and (dets[:, 1] <= 16.0).all() and (dets[:, 0] < dets[:, 1]).all()
        assert (dets[1:, 2] <= dets[:-1, 2]).all() and set(dets[:, 3].tolist()) <= {0.0, 1.0, 2.0}
        assert pred.proposals.shape == (min(len(dets), 100), 3)
    metric = LocalizationMetric(metrics=["mAP", "AR@AN"])
    metric.dataset_meta = {"classes": ["a", "b", "c"]}
    metric.process({}, [p.to_dict() for p in preds])
    out = metric.evaluate(2)
    assert 0.0 <= out["localization/mAP"] <= 1.0 and "localization/AUC" in out
    with pytest.raises(ValueError, match=r"inputs must be \[B, "):
        model(inputs[:, :-1], mode="tensor")


def test_perfect_scores_give_map_one():
    """Detections made from anchor scores that name the right class on the matched anchors score mAP 1 through
    LocalizationMetric: the class ids and the seconds are what the metric expects."""
    anchors = CTCNAnchorGenerator([4, 8, 16, 32], [[1.0, 0.8, 1.2]] * 4)(32)
    gt = torch.tensor([[[0.1, 0.45], [0.6, 0.9]]])
    loc, cls = anchor_targets(anchors, gt, torch.tensor([[0, 2]]), torch.tensor([[True, True]]))
    probs = torch.nn.functional.one_hot(cls[0], 4).float()
    dets = ctcn_detections(decode(loc[0], anchors), probs * 0.9)
    assert dets.shape[0] >= 2 and set(dets[:, 3].tolist()) == {0.0, 2.0}
    metric = LocalizationMetric(metrics=["mAP"])
    metric.dataset_meta = {"classes": ["a", "b", "c"]}
    times = torch.cat([dets[:, :2] * 16.0, dets[:, 2:]], dim=1)
    metric.process({}, [{"video_name": "v", "gt_segments": gt[0].numpy() * 16.0, "gt_labels": np.array([0, 2]),
                         "segments": times}])
    assert metric.evaluate(1)["localization/mAP"] == pytest.approx(1.0)


def test_a_few_steps_lower_the_loss():
    torch.manual_seed(0)
    model = CTCN(**small_cfg({"rgb": 5}))
    inputs, samples = batch(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    first = None
    for _ in range(15):
        loss = sum(model(inputs, samples, mode="loss").values())
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first


@pytest.mark.parametrize("streams", [{"rgb": 5}, {"rgb": 5, "flow": 4}], ids=["rgb", "rgb_flow"])
def test_stream_files_through_the_pipeline_and_model(tmp_path, streams):
    """One file per stream (flow a snippet shorter, as PaddleVideo's odd-frame videos): cut to the shorter,
    columns side by side in the streams' order, resized and packed into what the model takes."""
    from mmengine.dataset import Compose, pseudo_collate

    from video.models.localizers import LocalizationDataPreprocessor
    from video.transforms import LoadLocalizationStreams

    rng = np.random.default_rng(0)
    arrays = {}
    for k, (name, width) in enumerate(streams.items()):
        (tmp_path / name).mkdir()
        arrays[name] = rng.standard_normal((21 - k, width)).astype(np.float32)
        np.save(tmp_path / name / "v.npy", arrays[name])
    results = {"video_name": "v", "feature_path": str(tmp_path / "v.npy"), "duration_second": 20.0,
               "gt_segments": np.array([[2.0, 9.0]]), "gt_labels": np.array([2])}
    loaded = LoadLocalizationStreams(streams)(dict(results))
    length = 21 - (len(streams) - 1)
    np.testing.assert_array_equal(loaded["features"], np.concatenate([a[:length] for a in arrays.values()], axis=1))
    pipeline = Compose([LoadLocalizationStreams(streams), dict(type="ResizeTemporal", temporal_dim=32),
                        dict(type="GenerateLocalizationLabels"), dict(type="PackLocalizationInputs")])
    data = LocalizationDataPreprocessor()(pseudo_collate([pipeline(dict(results))]))
    torch.manual_seed(0)
    model = CTCN(**small_cfg(streams)).eval()
    pred = model(data["inputs"], data["data_samples"], mode="predict")[0]
    assert pred.segments.shape[1] == 4 and pred.gt_labels.tolist() == [2]
    with pytest.raises(Exception, match="columns"):
        LoadLocalizationStreams({name: w + 1 for name, w in streams.items()})(dict(results))
    with pytest.raises(Exception, match="not found"):
        LoadLocalizationStreams({"audio": 3})(dict(results))


def test_rgb_flow_export_is_refused_with_the_reason():
    from oars.config import load_config
    from oars.export.errors import ExportError
    from oars.tasks import get_task

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    cfg = load_config(os.path.join(root, "configs/video/ctcn/ctcn_activitynet_feature.yaml"))
    with pytest.raises(ExportError, match="a C-TCN exports with one feature stream.*no optical-flow extractor"):
        get_task("video").exporter(cfg).check_export(cfg, "onnx", "fp32")
