"""Localisation post-processing has one implementation, the runtime's NumPy
(oars_deploy.predictors.video_segments.segments): the torch
functions of video.localization are adapters over it (same values and dtypes, on the references' hand cases); the
ActivityNet class pairing by hand; the temporal resize and the snippet rule shared with training; BMN.predict with
``classify`` (segments from class_scores metainfo, a clear error without them); LoadVideoClassScores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oars.errors import DataError
from oars_deploy.predictors.video_segments import segments as rt
from video.localization import bmn_proposals, boundary_candidates, soft_nms


def test_torch_adapters_are_the_numpy_functions():
    g = np.random.default_rng(0)
    start, end, conf = g.random(20, np.float32), g.random(20, np.float32), g.random((2, 15, 20), np.float32)
    props = rt.bmn_proposals(start, end, conf)
    assert props.dtype == np.float32 and props.shape[1] == 3
    via_torch = bmn_proposals(torch.from_numpy(start), torch.from_numpy(end), torch.from_numpy(conf))
    assert via_torch.dtype == torch.float32 and np.array_equal(via_torch.numpy(), props)
    kept = rt.soft_nms(props, 0.4, 0.5, 0.9, top_k=10)
    assert kept.shape == (11, 3) and np.array_equal(soft_nms(torch.from_numpy(props), top_k=10).numpy(), kept)
    assert np.array_equal(boundary_candidates(torch.from_numpy(start), True).numpy(),
                          rt.boundary_candidates(start, True))
    # float64 stays float64 (the reference-loop tests compare at 1e-12)
    assert rt.soft_nms(props.astype(np.float64)).dtype == np.float64


def test_numpy_proposals_and_soft_nms_by_hand():
    start = np.array([0.9, 0.1, 0.6, 0.2])  # candidates {0, 2}
    end = np.array([0.3, 0.7, 0.2, 0.5])  # candidates {1, 3}
    conf = np.ones((2, 4, 4))
    conf[0, 2, 0], conf[1, 0, 2] = 0.5, 0.8
    np.testing.assert_allclose(rt.bmn_proposals(start, end, conf),
                               [[0.0, 0.25, 0.63], [0.5, 0.75, 0.24], [0.0, 0.75, 0.225]])
    props = np.array([[0.1, 0.5, 0.8], [0.0, 0.5, 0.9], [0.6, 1.0, 0.5]])
    np.testing.assert_allclose(rt.soft_nms(props), [[0.0, 0.5, 0.9], [0.6, 1.0, 0.5], [0.1, 0.5, 0.8 * math.exp(-1.6)]])
    assert rt.soft_nms(np.zeros((0, 3))).shape == (0, 3)
    with pytest.raises(ValueError, match="K, >= 3"):
        rt.soft_nms(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"confidence \[2, D, T\]"):
        rt.bmn_proposals(start, end, np.ones((2, 4, 5)))
    # normalised -> seconds, clamped to the span as BMN.predict does
    np.testing.assert_allclose(rt.proposals_in_seconds(np.array([[-0.1, 0.5, 0.3], [0.5, 1.2, 0.2]]), 10.0),
                               [[0.0, 5.0, 0.3], [5.0, 10.0, 0.2]])


def test_class_pairing_by_hand():
    props = np.array([[0.0, 4.0, 0.5], [2.0, 6.0, 0.9]])
    scores = np.array([0.1, 0.6, 0.3])  # top-2: class 1 (0.6), class 2 (0.3)
    out = rt.combine_classes(props, scores, top_k=2)
    np.testing.assert_allclose(out, [[2.0, 6.0, 0.54, 1], [0.0, 4.0, 0.3, 1], [2.0, 6.0, 0.27, 2],
                                     [0.0, 4.0, 0.15, 2]])
    assert rt.combine_classes(props, scores, top_k=10).shape == (6, 4)  # cut to the C classes
    assert rt.top_classes(np.array([0.2, 0.5, 0.5]), 2).tolist() == [1, 2]  # ties: the lower id first
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        rt.combine_classes(props, scores, 0)


def test_resize_and_snippet_rules_are_shared_with_training():
    from video.features.snippets import num_snippets
    from video.transforms import ResizeTemporal

    feats = np.random.default_rng(1).normal(size=(7, 3)).astype(np.float32)
    out = ResizeTemporal(16)({"features": feats})["features"]
    assert np.array_equal(out, rt.resize_temporal(feats, 16))
    np.testing.assert_allclose(rt.resize_temporal(np.array([[0.0], [2.0]]), 4)[:, 0], [0.0, 0.5, 1.5, 2.0])
    assert num_snippets is rt.num_snippets and [rt.num_snippets(f, 8, 4) for f in (5, 8, 30)] == [1, 1, 6]
    assert rt.snippet_indices(np.array([1, 5]), 16, 8, 4).tolist() == [[1, 5], [5, 9], [9, 13]]
    assert rt.feature_seconds(6, 4, 30, 3.75) == pytest.approx(24 / 30 * 3.75)


def test_bmn_predict_with_classify():
    from video.models.localizers import BMN
    from video.structures import ActionDataSample

    small = dict(feat_dim=16, tscale=12, dscale=10, num_sample=4, num_sample_perbin=2, hidden_dim_1d=16,
                 hidden_dim_2d=8, hidden_dim_3d=16, max_proposals=5)
    torch.manual_seed(0)
    plain = BMN(**small).eval()
    model = BMN(**small, classify={"top_k": 2}).eval()
    model.load_state_dict(plain.state_dict())
    x = torch.randn(1, 16, 12)
    scores = np.array([0.1, 0.7, 0.2], np.float32)
    pred = model.predict(x, [ActionDataSample(metainfo={"duration_second": 30.0, "class_scores": scores})])[0]
    ref = plain.predict(x, [ActionDataSample(metainfo={"duration_second": 30.0})])[0]
    assert torch.equal(pred.proposals, ref.proposals) and "segments" not in ref
    assert pred.segments.shape == (10, 4) and set(pred.segments[:, 3].tolist()) == {1.0, 2.0}
    np.testing.assert_allclose(pred.segments.numpy(), rt.combine_classes(ref.proposals.numpy(), scores, 2),
                               rtol=1e-6)
    # the metric's detection mAP reads them: a ground truth equal to the best detection scores AP 1 at 0.5
    from video.evaluation.localization_metrics import LocalizationMetric

    best = pred.segments[0].tolist()
    metric = LocalizationMetric(metrics=["mAP"], map_at=[0.5])
    metric.dataset_meta = {"classes": ["a", "b", "c"]}
    metric.process({}, [{"video_name": "v", "gt_segments": [best[:2]], "gt_labels": [int(best[3])],
                         "segments": pred.segments}])
    assert metric.compute_metrics(metric.results)["mAP@0.5"] == 1.0
    with pytest.raises(KeyError, match="LoadVideoClassScores"):
        model.predict(x, [ActionDataSample(metainfo={"duration_second": 30.0})])
    with pytest.raises(ValueError, match="classify"):
        BMN(**small, classify={"top": 2})


def test_load_video_class_scores(tmp_path):
    from video.transforms import LoadVideoClassScores

    np.save(tmp_path / "v1.scores.npy", np.array([0.25, 0.75], np.float32))
    out = LoadVideoClassScores(num_classes=2)({"feature_path": str(tmp_path / "v1.npy"), "video_name": "v1"})
    assert out["class_scores"].tolist() == [0.25, 0.75]
    with pytest.raises(DataError, match="has 2 class scores, num_classes is 3"):
        LoadVideoClassScores(num_classes=3)({"feature_path": str(tmp_path / "v1.npy")})
    with pytest.raises(DataError, match="class scores file not found"):
        LoadVideoClassScores()({"feature_path": str(tmp_path / "v2.npy")})
