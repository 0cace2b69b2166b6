"""Automatic pruning and sensitivity analysis (oars.compress.auto_prune*, oars.pipelines.compress.auto_prune /
.sensitivity): a candidate over the budget is never scored (scorer calls counted, SA and TPE), the layer groups of
the shrunk demo U-Net and per-group ratios applied with the dependency graph, BatchNorm re-calibration, sensitivity
curves monotone on a planted case, tools/compress.py --method auto-prune / sensitivity end to end with the pruned
model reloading from its generated config, and one message for each bad request."""

from __future__ import annotations

import json

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides, load_tool, random_checkpoint, run_tool
from hidden_packages import hide_packages
from torch import nn

from oars.compress.auto_prune import layer_ratios, prunable_groups, prune_groups, recalibrate_bn
from oars.compress.auto_prune_options import auto_prune_settings
from oars.compress.auto_prune_search import Evaluations, optuna_search, sa_search, uniform_start
from oars.compress.prune import PruneSettings
from oars.compress.sensitivity import most_sensitive, sensitivity_curves
from oars.config import load_config
from oars.errors import OarsError
from oars.pipelines.compress.prune import model_and_batch

SHRINK = {"model.backbone.base_channels": 8, "model.decode_head.channels": 4, "train_dataloader.batch_size": 2,
          "custom_hooks": "[]"}
FAST = ["compress.calib_batches=1", "compress.val_batches=1", "compress.export=false", "compress.latency=false"]


# ------------------------------------------------------------------ the search, on plain functions
def toy(budget: float):
    """Cost falls as tokens grow (like FLOPs as ratios grow); the score prefers small tokens; calls are counted."""
    scored = []

    def cost(tokens):
        return 1.0 - sum(tokens) / 40

    def score(tokens):
        scored.append(list(tokens))
        return -sum(t * (i + 1) for i, t in enumerate(tokens)) / 100

    return Evaluations(cost, score, budget), scored


@pytest.mark.parametrize("search", ["sa", "optuna"])
def test_a_candidate_over_budget_is_never_scored(search):
    evals, scored = toy(budget=0.5)
    start = uniform_start([0] * 4, [9] * 4, evals.within)
    assert start == [5, 5, 5, 5] and evals.cost(start) <= 0.5 < evals.cost([4, 5, 5, 5])
    if search == "sa":
        # a cold start (greedy) stays at the budget's edge, where half of the neighbours are over it
        result = sa_search([0] * 4, [9] * 4, start, evals, steps=30, seed=0, init_temperature=1e-3,
                           log=lambda _: None)
    else:
        result = optuna_search([0] * 4, [9] * 4, start, evals, steps=30, seed=0, log=lambda _: None)
    over = [s for s in result.history if s.cost > 0.5]
    assert over and all(s.score is None for s in over)  # proposed, measured, rejected before scoring
    assert scored and all(evals.cost(t) <= 0.5 for t in scored)
    assert len(scored) == len({tuple(t) for t in scored})  # each candidate scored once
    assert result.best_cost <= 0.5 and result.best_score == max(s.score for s in result.history if s.score is not None)
    with pytest.raises(AssertionError, match="over the budget"):
        evals.score([0, 0, 0, 0])


def test_uniform_start_is_the_least_pruned_within_budget_or_none():
    evals, _ = toy(budget=0.5)
    assert uniform_start([0, 0], [3, 9], lambda t: 1.0 - sum(t) / 12 <= 0.5) == [3, 3]
    assert uniform_start([0] * 4, [2] * 4, evals.within) is None  # all at the top: cost 0.8 > 0.5


# ------------------------------------------------------------------ the model side, on the shrunk demo U-Net
@pytest.fixture(scope="module")
def unet(demo_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("auto_prune")
    overrides = demo_overrides(demo_data, **SHRINK)
    ckpt = random_checkpoint(DEMO_CFG, overrides, folder)
    model, data = model_and_batch(load_config(DEMO_CFG, overrides), ckpt)
    return model, data["inputs"][:1, :, :32, :32], overrides, ckpt, folder


def test_groups_follow_the_blocks_and_ratios_apply_per_group(unet):
    model, inputs, *_ = unet
    groups = prunable_groups(model, PruneSettings(), max_groups=16)
    names = [g.name for g in groups]
    assert len(groups) <= 16 and names[0] == "backbone.encoder.0.0" and "backbone.decoder.2.conv" in names
    assert not any(layer.startswith("decode_head") for g in groups for layer in g.layers)  # outside the scope
    assert [g.name for g in prunable_groups(model, PruneSettings(), max_groups=2)] == ["backbone.encoder",
                                                                                       "backbone.decoder"]
    first = {"backbone.encoder.0.0.0": 0.5}
    ratios = [0.5] + [0.0] * (len(groups) - 1)
    assert layer_ratios(groups, ratios) == first
    pruned = prune_groups(model, inputs, PruneSettings(), groups, ratios)
    assert pruned.backbone.encoder[0][0][0].out_channels == model.backbone.encoder[0][0][0].out_channels // 2
    assert pruned.backbone.encoder[1][0][0].out_channels == model.backbone.encoder[1][0][0].out_channels  # untouched
    assert model.backbone.encoder[0][0][0].out_channels == 8  # the original is left as it was
    with pytest.raises(OarsError, match="no layer of .* can be pruned"):
        prunable_groups(model, PruneSettings(ignore=["backbone"]))


def test_bn_recalibration_sets_the_batch_statistics_and_keeps_momentum():
    net = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4))
    x = torch.randn(8, 3, 5, 5) * 3 + 2
    recalibrate_bn(net, [x], forward_fn=lambda m, inputs: m(inputs))
    with torch.no_grad():
        expected = net[0](x).mean(dim=(0, 2, 3))
    assert torch.allclose(net[1].running_mean, expected, atol=1e-5) and not net.training
    assert net[1].momentum == 0.1 and int(net[1].num_batches_tracked) == 1
    before = net[1].running_mean.clone()
    recalibrate_bn(net, [], forward_fn=lambda m, inputs: m(inputs))  # no batches: unchanged
    assert torch.equal(net[1].running_mean, before)


def test_sensitivity_curves_are_monotone_on_a_planted_case(unet):
    """The planted metric is the share of channels left in the encoder (1.0 unpruned): pruning the encoder must
    lower it step by step, pruning the decoder must not move it."""
    model, inputs, *_ = unet
    groups = prunable_groups(model, PruneSettings(), max_groups=2)
    encoder = [m for n, m in model.named_modules() if n in groups[0].layers]
    full = sum(m.out_channels for m in encoder)

    def score(index, ratio):
        ratios = [ratio if i == index else 0.0 for i in range(len(groups))]
        pruned = dict(prune_groups(model, inputs, PruneSettings(), groups, ratios).named_modules())
        return sum(pruned[p].out_channels for p in groups[0].layers) / full

    curves = sensitivity_curves([g.name for g in groups], [0.25, 0.5, 0.75], score, log=lambda _: None)
    enc, dec = [v for _, v in curves["backbone.encoder"]], [v for _, v in curves["backbone.decoder"]]
    assert enc[0] > enc[1] > enc[2] and enc[0] < 1.0
    assert dec == [1.0, 1.0, 1.0]
    assert most_sensitive(curves, 1.0)[0] == "backbone.encoder"


# ------------------------------------------------------------------ options and errors
def test_options_give_one_message_per_bad_request(monkeypatch):
    with pytest.raises(OarsError, match="needs one budget.*not both; got both"):
        auto_prune_settings({"target_flops": 0.5, "target_latency": 10})
    with pytest.raises(OarsError, match="needs one budget.*got neither"):
        auto_prune_settings({})
    with pytest.raises(OarsError, match="instead of --target-params"):
        auto_prune_settings({"target_params": 0.5})
    with pytest.raises(OarsError, match=r"--search must be one of \['sa', 'optuna'\], got 'ga'"):
        auto_prune_settings({"target_flops": 0.5, "search": "ga"})
    with pytest.raises(OarsError, match=r"unknown option\(s\) \['serch'\] for --method auto-prune"):
        auto_prune_settings({"target_flops": 0.5, "serch": "sa"})
    with pytest.raises(OarsError, match="compress.ratios must be a list of prune ratios"):
        auto_prune_settings({"ratios": [0.5, 1.5]}, method="sensitivity")
    with pytest.raises(OarsError, match="--method sensitivity takes no budget"):
        auto_prune_settings({"target_flops": 0.5}, method="sensitivity")
    good = auto_prune_settings({"target_latency": 12, "search": "optuna", "steps": 5})
    assert (good.target_latency, good.search, good.steps, good.target_flops) == (12.0, "optuna", 5, None)
    assert auto_prune_settings({"target_flops": 0.5}).steps == 300
    hide_packages(monkeypatch, "onnxruntime")
    with pytest.raises(OarsError, match="--target-latency .*onnxruntime"):
        auto_prune_settings({"target_latency": 12})
    assert auto_prune_settings({"target_flops": 0.5}).target_flops == 0.5  # FLOPs need no ONNX Runtime


def test_sa_scale_and_latency_threads_options():
    default = auto_prune_settings({"target_flops": 0.5})
    assert (default.sa_scale, default.latency_threads) == (100.0, 1)
    given = auto_prune_settings({"target_flops": 0.5, "sa_scale": 1, "latency_threads": 0})
    assert (given.sa_scale, given.latency_threads) == (1.0, 0)  # PaddleSlim's rule; ONNX Runtime's default threads
    with pytest.raises(OarsError, match=r"compress.latency_threads must be >= 0, got -1"):
        auto_prune_settings({"target_flops": 0.5, "latency_threads": -1})
    with pytest.raises(OarsError, match=r"compress.latency_threads must be an integer, got 'two'"):
        auto_prune_settings({"target_flops": 0.5, "latency_threads": "two"})
    with pytest.raises(OarsError, match=r"compress.sa_scale must be >= 1e-09, got 0"):
        auto_prune_settings({"target_flops": 0.5, "sa_scale": 0})


def test_ort_latency_sets_the_session_threads(monkeypatch, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from oars.compress.measure import ort_latency_ms

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = str(tmp_path / "relu.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    seen, real = [], ort.InferenceSession

    def session(model, options=None, **kw):
        seen.append(options.intra_op_num_threads)
        return real(model, options, **kw)

    monkeypatch.setattr(ort, "InferenceSession", session)
    assert ort_latency_ms(path, runs=2, warmup=1, threads=3) >= 0
    assert ort_latency_ms(path, runs=2, warmup=1) >= 0
    assert seen == [3, 0]  # 0: ONNX Runtime's default (all cores)


def test_unreachable_budget_names_the_smallest_reachable_fraction(unet, tmp_path):
    _, _, overrides, ckpt, _ = unet
    main = load_tool("compress").main
    with pytest.raises(OarsError, match=r"--target-flops 0.001 is unreachable: .* still leaves 0\.\d+ of the "
                                        r"original FLOPs.*ask for at least 0\.\d+"):
        main(["-c", DEMO_CFG, "-w", ckpt, "--method", "auto-prune", "--target-flops", "0.001", "--work-dir",
              str(tmp_path / "work"), "-o", *overrides, *FAST])
    assert not (tmp_path / "work" / "auto-prune-flops0.001-sa" / "pruned_config.yaml").exists()


# ------------------------------------------------------------------ through tools/compress.py
@pytest.mark.slow
def test_auto_prune_tool_writes_a_variant_that_reloads_from_its_config(unet, tmp_path):
    from oars.pipelines.model import init_model

    model, inputs, overrides, ckpt, _ = unet
    work = tmp_path / "work"
    out = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "auto-prune", "--target-flops", "0.5",
                   "--steps", "3", "--epochs", "0", "--work-dir", str(work), "-o", *overrides, *FAST)
    variant = work / "auto-prune-flops0.5-sa"
    search = json.loads((variant / "auto_prune.json").read_text())
    assert search["search"] == "sa" and search["init_temperature"] == 100.0 and search["reduce_rate"] == 0.85
    scored = [s for s in search["history"] if s["score"] is not None]
    assert 2 <= len(scored) <= 4 and all(s["cost"] <= 0.5 for s in scored)  # the start + up to 3 steps
    assert search["best_cost"] <= 0.5 and set(search["best_ratios"]) == {g["name"] for g in search["groups"]}
    refine = search["refine"]  # the written ratios: the search's best scaled toward the budget, never over it
    assert refine["rounds"] == 7 and len(refine["tried"]) == 7 and search["best_cost"] <= refine["cost"] <= 0.5
    assert search["best_ratios"] == {k: round(v * refine["scale"], 6) for k, v in search["search_best_ratios"].items()}
    rows = {r["variant"]: r for r in json.loads((work / "compression.json").read_text())["rows"]}
    assert rows["auto-prune-flops0.5-sa"]["method"] == "auto-prune" and "| auto-prune-flops0.5-sa" in out.stdout
    assert rows["auto-prune-flops0.5-sa"]["flops"] <= 0.5 * rows["original"]["flops"]
    assert "--method auto-prune" in (variant / "pruned_config.yaml").read_text().splitlines()[0]
    cfg = load_config(str(variant / "pruned_config.yaml"))
    net = init_model(cfg, str(variant / "pruned_init.pth"))  # strict load of the searched widths
    assert cfg.model.type == "PrunedModel" and net.backbone.encoder[0][0][0].out_channels < 8
    with torch.no_grad():
        assert net.eval()(inputs, mode="tensor").shape[1] == model.decode_head.conv_seg.out_channels
    again = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "auto-prune", "--target-flops", "0.5",
                     "--steps", "3", "--epochs", "0", "--work-dir", str(work), "-o", *overrides, *FAST)
    assert "not searching again" in again.stdout


@pytest.mark.slow
def test_latency_budget_and_candidates_are_timed_on_the_given_threads(unet, tmp_path, monkeypatch):
    import oars.pipelines.compress.auto_prune as pipeline

    _, _, overrides, ckpt, _ = unet
    calls: list = []

    def latency(path, runs=20, warmup=3, threads=None):  # every latency the search measures (exported for real)
        calls.append(threads)
        return 5.0

    monkeypatch.setattr(pipeline, "ort_latency_ms", latency)
    work = tmp_path / "work"
    load_tool("compress").main(["-c", DEMO_CFG, "-w", ckpt, "--method", "auto-prune", "--target-latency", "10",
                                "--latency-threads", "2", "--steps", "1", "--epochs", "0", "--work-dir", str(work),
                                "-o", *overrides, *FAST, "compress.refine_rounds=1"])
    search = json.loads((work / "auto-prune-latency10ms-sa" / "auto_prune.json").read_text())
    assert search["latency_threads"] == 2 and search["sa_scale"] == 100.0
    assert len(calls) >= 4 and set(calls) == {2}  # the start, a candidate, the refinement, the original: 2 threads
    calls.clear()
    pipeline.export_latency_ms(load_config(DEMO_CFG, overrides), unet[0])
    assert calls == [1]  # the default: one thread


@pytest.mark.slow
def test_sensitivity_tool_writes_curves_picture_and_a_row(unet, tmp_path):
    _, _, overrides, ckpt, _ = unet
    work = tmp_path / "work"
    run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "sensitivity", "--work-dir", str(work),
             "-o", *overrides, *FAST, "compress.ratios=[0.3,0.6]", "compress.max_groups=2")
    data = json.loads((work / "sensitivity.json").read_text())
    assert set(data["curves"]) == {"backbone.encoder", "backbone.decoder"} and data["metric"] == "mIoU"
    assert [p[0] for p in data["curves"]["backbone.encoder"]] == [0.3, 0.6]
    assert (work / "sensitivity.png").read_bytes()[:4] == b"\x89PNG"
    rows = {r["variant"]: r for r in json.loads((work / "compression.json").read_text())["rows"]}
    assert "most sensitive at ratio 0.5" in rows["sensitivity"]["metric"]
