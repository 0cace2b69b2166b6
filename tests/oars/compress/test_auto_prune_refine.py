"""Automatic pruning uses its budget: the refinement that scales the search's best ratios toward the budget
(oars.compress.auto_prune_search.refine_to_budget, ``compress.refine_rounds``) on a planted latency, its option's
messages, and ``compress.round_to`` / ``--round-to`` keeping the pruned widths multiples of 8."""

from __future__ import annotations

import pytest
from demo_utils import DEMO_CFG, demo_overrides, load_tool, random_checkpoint
from torch import nn

from oars.compress.auto_prune import prunable_groups, prune_groups
from oars.compress.auto_prune_options import auto_prune_settings
from oars.compress.auto_prune_search import Evaluations, refine_to_budget, sa_search, scaled_ratios, uniform_start
from oars.compress.prune import PruneSettings
from oars.config import load_config
from oars.errors import OarsError
from oars.pipelines.compress.prune import model_and_batch

STEP, GROUPS, ORIGINAL_MS = 0.05, 4, 100.0


def planted_latency(ratios: list[float]) -> float:
    """A fake latency in ms: 100 unpruned, falling with the square of the channels kept in each group."""
    return ORIGINAL_MS * sum((1 - r) ** 2 for r in ratios) / len(ratios)


def planted_search(budget: float, rounds: int):
    """SA on the 0.05 grid under ``budget`` with a proxy that prefers pruning group 0 (so the best sits well under
    the budget), then the refinement with ``rounds``; returns the search's result and the refinement."""
    def ratios(tokens):
        return [round(t * STEP, 6) for t in tokens]

    evals = Evaluations(lambda t: planted_latency(ratios(t)), lambda t: t[0] - 0.1 * sum(t[1:]), budget)
    low, high = [0] * GROUPS, [18] * GROUPS
    start = uniform_start(low, high, evals.within)
    result = sa_search(low, high, start, evals, steps=20, seed=0, log=lambda _: None)
    return result, refine_to_budget(ratios(result.best_tokens), planted_latency, budget, result.best_cost, rounds)


def test_the_refined_search_ends_within_5_percent_of_a_latency_budget():
    budget = 0.7 * ORIGINAL_MS
    result, refined = planted_search(budget, rounds=7)
    assert result.best_cost < 0.95 * budget  # the search alone leaves more than 5 % of the budget unused
    assert 0.95 * budget <= refined.cost <= budget  # refined: within 5 %, never over
    assert refined.cost == pytest.approx(planted_latency(refined.ratios))
    assert 0 < refined.scale < 1 and len(refined.tried) == 7
    searched = [round(t * STEP, 6) for t in result.best_tokens]
    assert refined.ratios == scaled_ratios(searched, refined.scale)  # the searched shape, scaled
    assert all(c > budget for s, c in refined.tried if s < refined.scale)  # each smaller scale tried was over
    none = refine_to_budget(searched, planted_latency, budget, result.best_cost, rounds=0)
    assert (none.scale, none.ratios, none.cost, none.tried) == (1.0, searched, result.best_cost, [])


def test_refinement_keeps_the_best_when_every_smaller_scale_is_over_budget():
    calls = []

    def cost(ratios):
        calls.append(ratios)
        return 1.0 if ratios[0] < 0.5 else 0.4

    refined = refine_to_budget([0.5, 0.25], cost, 0.5, 0.4, rounds=3)
    assert (refined.scale, refined.ratios, refined.cost) == (1.0, [0.5, 0.25], 0.4)
    assert [s for s, _ in refined.tried] == [0.5, 0.75, 0.875] and len(calls) == 3


def test_refine_rounds_option():
    assert auto_prune_settings({"target_flops": 0.5}).refine_rounds == 7
    assert auto_prune_settings({"target_latency": 10, "refine_rounds": 0}).refine_rounds == 0
    with pytest.raises(OarsError, match=r"compress.refine_rounds must be in \[0, 20\], got -1"):
        auto_prune_settings({"target_flops": 0.5, "refine_rounds": -1})
    with pytest.raises(OarsError, match=r"compress.refine_rounds must be an integer, got 2.5"):
        auto_prune_settings({"target_flops": 0.5, "refine_rounds": 2.5})


# ------------------------------------------------------------------ round_to, on the shrunk demo U-Net
@pytest.fixture(scope="module")
def unet(demo_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("auto_prune_round")
    overrides = demo_overrides(demo_data, **{"model.backbone.base_channels": 8, "model.decode_head.channels": 4,
                                             "custom_hooks": "[]"})
    ckpt = random_checkpoint(DEMO_CFG, overrides, folder)
    model, data = model_and_batch(load_config(DEMO_CFG, overrides), ckpt)
    return model, data["inputs"][:1, :, :32, :32], overrides, ckpt


def widths(net: nn.Module) -> list[int]:
    return [m.out_channels for n, m in net.named_modules() if isinstance(m, nn.Conv2d) and n.startswith("backbone")]


def test_round_to_keeps_the_pruned_widths_multiples_of_8(unet):
    model, inputs, *_ = unet
    groups = prunable_groups(model, PruneSettings())
    ratios = [0.3] * len(groups)
    free = widths(prune_groups(model, inputs, PruneSettings(), groups, ratios))
    assert any(w % 8 for w in free)  # without round_to: 5, 11, 22, 44 ... channels
    rounded = prune_groups(model, inputs, PruneSettings(round_to=8), groups, ratios)
    assert all(w % 8 == 0 for w in widths(rounded)) and widths(rounded) != widths(model)  # pruned, in 8s
    assert auto_prune_settings({"target_latency": 10, "round_to": 8}).prune.round_to == 8
    assert auto_prune_settings({"target_flops": 0.5}).prune.round_to is None  # the default leaves widths as they were


def test_round_to_flag_gives_one_message_for_a_bad_value(unet, tmp_path):
    _, _, overrides, ckpt = unet
    with pytest.raises(OarsError, match=r"compress.round_to must be a positive integer, got 0"):
        load_tool("compress").main(["-c", DEMO_CFG, "-w", ckpt, "--method", "auto-prune", "--target-flops", "0.5",
                                    "--round-to", "0", "--work-dir", str(tmp_path / "work"), "-o", *overrides])
    assert not (tmp_path / "work" / "auto-prune-flops0.5-sa").exists()
