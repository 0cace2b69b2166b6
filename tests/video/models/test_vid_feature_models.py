"""Frame-feature models (AttentionLSTM, AttentionCluster, NeXtVLAD, FeatureRecognizer): modes, masks,
attention weights, gradients, learning a tiny problem, and their real sizes."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from video.models.feature_models import (
    FeatureRecognizer,
    NeXtVLADLayer,
    masked_softmax,
    reverse_valid,
)
from video.registry import MODELS
from video.structures import ActionDataSample

DIMS = {"rgb": 12, "audio": 6}
SMALL = {
    "AttentionLSTM": dict(embedding_size=8, lstm_size=6, fc_sizes=[16, 12]),
    "AttentionCluster": dict(cluster_nums={"rgb": 4, "audio": 3}, fc_sizes=[16, 12]),
    "NeXtVLAD": dict(cluster_size={"rgb": 4, "audio": 3}, groups={"rgb": 4, "audio": 2}, hidden_size=16,
                     gating_reduction=4),
}
TYPES = list(SMALL)


def build(kind: str, num_classes: int = 5, multi_label: bool = True, **over) -> FeatureRecognizer:
    torch.manual_seed(0)
    head = dict(type=kind, feature_dims=DIMS, **SMALL[kind], **over)
    return MODELS.build(dict(type="FeatureRecognizer", num_classes=num_classes, multi_label=multi_label, head=head))


def batch(lengths: list[int], t: int = 7, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    out = {m: torch.randn(b, t, d, generator=g) for m, d in DIMS.items()}
    out["mask"] = torch.arange(t)[None] < torch.tensor(lengths)[:, None]
    return out


def samples(labels: list, num_classes: int = 5, multi_label: bool = True) -> list[ActionDataSample]:
    return [ActionDataSample().set_gt_label(lab, num_classes, multi_label) for lab in labels]


def repad(inputs: dict[str, torch.Tensor], value: float) -> dict[str, torch.Tensor]:
    """The same batch with other values (and a NaN) in the padded frames."""
    out = dict(inputs)
    pad = ~inputs["mask"]
    for m in DIMS:
        x = inputs[m].clone()
        x[pad] = value
        x[pad.nonzero()[:1].unbind(1)] = float("nan")
        out[m] = x
    return out


def test_masked_softmax_and_reverse_valid_by_hand():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, 9.0, -1.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    w = masked_softmax(scores, mask, dim=1)
    e1, e2 = torch.exp(torch.tensor(1.0)), torch.exp(torch.tensor(2.0))
    assert torch.allclose(w[0], torch.stack([e1 / (e1 + e2), e2 / (e1 + e2), torch.tensor(0.0)]))
    assert torch.equal(w[1], torch.zeros(3))  # no valid frame: zeros, not NaN
    x = torch.arange(10.0).reshape(2, 5, 1)
    r = reverse_valid(x, torch.tensor([3, 5]))
    assert r[..., 0].tolist() == [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]]
    assert torch.equal(reverse_valid(r, torch.tensor([3, 5])), x)


@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("multi_label", [True, False])
def test_modes_shapes(kind, multi_label):
    model = build(kind, multi_label=multi_label)
    inputs = batch([7, 4, 1])
    labels = [[0, 3], [1], [4]] if multi_label else [0, 2, 4]
    model.train()
    losses = model(inputs, samples(labels, multi_label=multi_label), mode="loss")
    assert set(losses) == {"loss_cls"} and losses["loss_cls"].dim() == 0 and torch.isfinite(losses["loss_cls"])
    model.eval()
    with torch.no_grad():
        preds = model(inputs, samples(labels, multi_label=multi_label), mode="predict")
        scores = model(inputs, mode="tensor")
    assert scores.shape == (3, 5)
    assert len(preds) == 3 and preds[0].pred_score.shape == (5,) and preds[0].pred_label.shape == (1,)
    assert torch.allclose(torch.stack([p.pred_score for p in preds]), scores)
    assert torch.equal(torch.cat([p.pred_label for p in preds]), scores.argmax(1))
    if multi_label:
        assert ((scores > 0) & (scores < 1)).all()
    else:
        assert torch.allclose(scores.sum(1), torch.ones(3))


@pytest.mark.parametrize("kind", TYPES)
def test_padding_changes_nothing(kind):
    """Padded frames' values (NaN included) reach no output, in eval and in train mode (same dropout draw)."""
    model = build(kind)
    inputs = batch([7, 3, 5])
    model.eval()
    with torch.no_grad():
        ref = model(inputs, mode="tensor")
        assert torch.allclose(model(repad(inputs, 50.0), mode="tensor"), ref, atol=1e-6)
        # a sample run alone on its valid frames equals its row in the padded batch
        alone = {m: inputs[m][1:2, :3] for m in DIMS}
        assert torch.allclose(model(alone, mode="tensor"), ref[1:2], atol=1e-5)
    model.train()
    torch.manual_seed(3)
    a = model.head(inputs)
    torch.manual_seed(3)
    b = model.head(repad(inputs, -7.0))
    assert torch.allclose(a, b, atol=1e-5)


def test_mask_from_num_frames_metainfo():
    model = build("AttentionCluster").eval()
    inputs = batch([7, 2])
    data = samples([[0], [1]])
    for s, n in zip(data, [7, 2]):
        s.set_metainfo(dict(num_frames=n))
    no_mask = {m: inputs[m] for m in DIMS}
    with torch.no_grad():
        ref = model(inputs, mode="tensor")
        got = torch.stack([p.pred_score for p in model(no_mask, data, mode="predict")])
        unmasked = model(no_mask, mode="tensor")
    assert torch.allclose(got, ref, atol=1e-6)
    assert not torch.allclose(unmasked[1], ref[1], atol=1e-4)


def test_attention_weights_sum_to_one_over_valid_frames():
    inputs = batch([7, 3, 1])
    mask = inputs["mask"]
    lstm = build("AttentionLSTM").head.eval()
    cluster = build("AttentionCluster").head.eval()
    vlad = build("NeXtVLAD").head.eval()
    feats = {k: inputs[k] for k in DIMS}
    with torch.no_grad():
        for w in lstm.attention(feats, mask)[1].values():
            assert w.shape == (3, 7)
            assert torch.allclose(w.sum(1), torch.ones(3)) and (w[~mask] == 0).all() and (w[mask] > 0).all()
        for m, w in cluster.attention(feats, mask)[1].items():
            units = SMALL["AttentionCluster"]["cluster_nums"][m]
            assert w.shape == (3, units, 7)
            assert torch.allclose(w.sum(2), torch.ones(3, units))
            assert (w.permute(0, 2, 1)[~mask] == 0).all()
        for m, att in vlad.attention(feats, mask)[1].items():
            assert att.shape == (3, 7, SMALL["NeXtVLAD"]["groups"][m])
            assert (att[~mask] == 0).all() and ((att[mask] > 0) & (att[mask] < 1)).all()


def test_lstm_matches_packed_bidirectional_reference():
    """The two one-way LSTMs with the valid-reversal equal torch's bidirectional LSTM on packed sequences."""
    pool = build("AttentionLSTM").head.pools["rgb"].eval()
    inputs = batch([7, 4, 2])
    x, mask = inputs["rgb"], inputs["mask"]
    ref = nn.LSTM(8, 6, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name, p in pool.lstm_fw.named_parameters():
            getattr(ref, name).copy_(p)
        for name, p in pool.lstm_bw.named_parameters():
            getattr(ref, name + "_reverse").copy_(p)
        emb = torch.tanh(pool.fc(x))
        lengths = mask.sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        out, _ = nn.utils.rnn.pad_packed_sequence(ref(packed)[0], batch_first=True, total_length=7)
        w = masked_softmax(pool.att_fc(out).squeeze(2), mask, dim=1)
        expected = (out * w.unsqueeze(2)).sum(1)
        got, _ = pool(torch.where(mask.unsqueeze(2), x, 0.0), mask)
    assert torch.allclose(got, expected, atol=1e-6)


def test_nextvlad_layer_against_loop_reference():
    torch.manual_seed(0)
    layer = NeXtVLADLayer(6, cluster_size=3, groups=2, expansion=2).eval()
    with torch.no_grad():
        for bn in (layer.cluster_bn, layer.vlad_bn):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 4, 6)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    with torch.no_grad():
        got, _ = layer(x, mask)
        b, dg, k = 2, layer.group_dim, layer.cluster_size
        expected = torch.zeros(b, dg, k)
        for i in range(b):
            for t in range(int(mask[i].sum())):
                xe = layer.expansion_fc(x[i, t])
                att = torch.sigmoid(layer.group_attention(xe))
                logits = (layer.cluster_fc(xe) - layer.cluster_bn.running_mean) / torch.sqrt(
                    layer.cluster_bn.running_var + layer.cluster_bn.eps)
                logits = logits * layer.cluster_bn.weight + layer.cluster_bn.bias
                for g in range(layer.groups):
                    a = torch.softmax(logits[g * k:(g + 1) * k], 0) * att[g]
                    xg = xe[g * dg:(g + 1) * dg]
                    for c in range(k):
                        expected[i, :, c] += a[c] * (xg - layer.centroids[:, c])
        expected = torch.nn.functional.normalize(expected, dim=1).reshape(b, -1)
        bn = layer.vlad_bn
        expected = (expected - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
    assert torch.allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("kind", TYPES)
def test_gradients_reach_every_parameter(kind):
    model = build(kind, drop_rate=0.0).train()
    loss = model(batch([7, 5, 2, 6]), samples([[0], [1, 2], [3], [4]]), mode="loss")["loss_cls"]
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("multi_label", [True, False])
def test_learns_a_tiny_separable_problem(kind, multi_label):
    """4 classes, each a direction added to a few random valid frames of noise; 40 Adam steps."""
    torch.manual_seed(0)
    n, t, num_classes = 32, 6, 4
    labels = torch.arange(n) % num_classes
    proto = {m: torch.randn(num_classes, d) * 2 for m, d in DIMS.items()}
    lengths = torch.randint(2, t + 1, (n,))
    mask = torch.arange(t)[None] < lengths[:, None]
    inputs = {m: torch.randn(n, t, d) * 0.5 + proto[m][labels][:, None] * (torch.rand(n, t, 1) < 0.7)
              for m, d in DIMS.items()}
    inputs["mask"] = mask
    data = samples([[int(c)] if multi_label else int(c) for c in labels], num_classes, multi_label)
    model = build(kind, num_classes=num_classes, multi_label=multi_label, drop_rate=0.0).train()
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = []
    for _ in range(40):
        loss = model(inputs, data, mode="loss")["loss_cls"]
        optim.zero_grad()
        loss.backward()
        optim.step()
        history.append(float(loss.detach()))
    assert all(torch.isfinite(torch.tensor(history)))
    assert history[-1] < 0.3 * history[0], history
    model.eval()
    with torch.no_grad():
        acc = (model(inputs, mode="tensor").argmax(1) == labels).float().mean()
    assert acc >= 0.9


def test_bad_inputs_and_configs_are_refused():
    model = build("NeXtVLAD").eval()
    inputs = batch([7, 3])
    with pytest.raises(ValueError, match="lack modalities \\['audio'\\]"):
        model({"rgb": inputs["rgb"]}, mode="tensor")
    with pytest.raises(ValueError, match="inputs\\['audio'\\] has shape"):
        model(dict(inputs, audio=torch.zeros(2, 7, 5)), mode="tensor")
    with pytest.raises(ValueError, match="mask has shape"):
        model(dict(inputs, mask=torch.ones(2, 6, dtype=torch.bool)), mode="tensor")
    with pytest.raises(ValueError, match="multi-hot"):
        model(inputs, samples([1, 2], multi_label=False), mode="loss")
    head = dict(type="AttentionCluster", feature_dims=DIMS, num_classes=7)
    with pytest.raises(ValueError, match="head.num_classes=7 differs"):
        MODELS.build(dict(type="FeatureRecognizer", num_classes=5, head=head))
    with pytest.raises(ValueError, match="cluster_nums"):
        MODELS.build(dict(type="AttentionCluster", feature_dims=DIMS, num_classes=5, cluster_nums={"rgb": 2}))
    with pytest.raises(ValueError, match="must divide by groups"):
        MODELS.build(dict(type="NeXtVLAD", feature_dims={"rgb": 5}, num_classes=5, groups=4, expansion=1))


REAL = {
    "AttentionLSTM": ({}, 108.7e6),
    "AttentionCluster": ({}, 57.8e6),
    "NeXtVLAD": (dict(cluster_size={"rgb": 128, "audio": 64}, groups={"rgb": 8, "audio": 4}), 88.9e6),
}


@pytest.mark.parametrize("kind", TYPES)
def test_real_size_parameter_count(kind):
    """YouTube-8M size (rgb 1024 + audio 128, 3862 classes), built on the meta device (no memory, no time)."""
    over, expected = REAL[kind]
    with torch.device("meta"):
        model = MODELS.build(dict(type="FeatureRecognizer", num_classes=3862, head=dict(
            type=kind, feature_dims={"rgb": 1024, "audio": 128}, **over))).eval()
        count = sum(p.numel() for p in model.parameters())
        print(f"{kind}: {count / 1e6:.1f} M parameters")
        assert abs(count - expected) < 0.01 * expected
        scores = model(dict(rgb=torch.empty(2, 3, 1024), audio=torch.empty(2, 3, 128),
                            mask=torch.ones(2, 3, dtype=torch.bool)), mode="tensor")
    assert scores.shape == (2, 3862)


def test_recognizer_is_deep_copyable_and_state_dict_round_trips():
    model = build("AttentionLSTM").eval()
    other = copy.deepcopy(model)
    other.load_state_dict(model.state_dict())
    inputs = batch([5, 7])
    with torch.no_grad():
        assert torch.equal(model(inputs, mode="tensor"), other(inputs, mode="tensor"))


@pytest.fixture(autouse=True)
def _one_thread():
    """These tensors are tiny: one intra-op thread avoids OpenMP hand-offs that dominate on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_pipeline_batches_through_the_data_preprocessor():
    """PackFeatureInputs samples of different lengths -> pseudo_collate -> ActionDataPreprocessor -> the model:
    each sample's prediction equals the model on that sample alone."""
    import numpy as np
    from mmengine.dataset import pseudo_collate

    from video.transforms.formatting import PackFeatureInputs

    pack = PackFeatureInputs()
    g = np.random.default_rng(0)
    items = [pack(dict(features={m: g.standard_normal((n, d)).astype(np.float32) for m, d in DIMS.items()},
                       label=[1, 3], multi_label=True, num_classes=5, filename=f"v{n}.npz")) for n in (6, 2, 4)]
    model = build("NeXtVLAD").eval()
    with torch.no_grad():
        data = model.data_preprocessor(pseudo_collate(items), training=False)
        assert data["inputs"]["mask"].sum(1).tolist() == [6, 2, 4]
        preds = model(**data, mode="predict")
        for item, pred in zip(items, preds):
            alone = {m: x[None] for m, x in item["inputs"].items()}
            assert torch.allclose(model(alone, mode="tensor")[0], pred.pred_score, atol=1e-5)
    model.train()
    losses = model(**model.data_preprocessor(pseudo_collate(items), training=True), mode="loss")
    assert torch.isfinite(losses["loss_cls"])
