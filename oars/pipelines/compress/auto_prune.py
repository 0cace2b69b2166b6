"""``tools/compress.py --method auto-prune``: search per-group prune ratios under a FLOPs or latency budget, then
write, fine-tune and measure the best candidate as ``--method prune`` does (:func:`.prune.finish_variant`).

A candidate is a token per layer group (:func:`oars.compress.auto_prune.prunable_groups`; token t prunes the group by
t x ``ratio_step`` of its channels) applied to a copy of the trained model with torch-pruning's dependency graph.
Its cost is measured first, FLOPs with the table's counter (a fraction of the original) or the ONNX Runtime latency
of the task's export graph on this machine (median of 10 runs); a candidate over the budget is never scored. Its
score is the proxy of :class:`.proxy_score.ProxyScorer` (the validation metric on a few batches after BatchNorm
re-calibration). The search starts at the least-pruned uniform candidate within the budget and runs simulated
annealing (PaddleSlim's controller: :mod:`oars.compress.sa_controller`) or Optuna's TPE for ``--steps`` candidates.
The best candidate's ratios are then scaled toward the budget (``compress.refine_rounds`` bisection rounds,
:func:`oars.compress.auto_prune_search.refine_to_budget`): that scaled candidate is the one written.

``DIR/<variant>/`` holds what ``--method prune`` writes (``pruned_config.yaml``, ``pruned_init.pth``,
``prune_report.json``, the fine-tuning's checkpoints, ``export/``, ``eval/``) plus ``auto_prune.json``: the groups
and their layers, the budget, the settings, every proposed candidate (cost, score or none when over budget), the
search's best and its refinement (``refine``: scale, cost, proxy, every scale tried). Re-running continues: a
variant whose pruned config and weights exist is not searched again.
"""

from __future__ import annotations

import json
import os.path as osp
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch
from mmengine.config import Config
from torch import nn

from oars.compress.auto_prune import LayerGroup, prunable_groups, prune_groups, recalibrate_bn
from oars.compress.auto_prune_options import LATENCY_THREADS, AutoPruneSettings, auto_prune_settings, auto_variant_name
from oars.compress.auto_prune_search import (
    Evaluations,
    Refinement,
    SearchResult,
    optuna_search,
    refine_to_budget,
    sa_search,
    uniform_start,
)
from oars.compress.measure import count_flops, count_params, ort_latency_ms, tensor_forward
from oars.compress.prune import PruneReport, check_supported, kept_layers, measure_pruned, scope_layers
from oars.engine.checkpoint import check_checkpoint_file
from oars.errors import OarsError
from oars.export.guards import DEFAULT_OPSET
from oars.export.onnx_export import export_spec_to_onnx, export_task
from oars.export.options import task_export_options
from oars_deploy.atomic import atomic_write

from .proxy_score import ProxyScorer
from .prune import PRUNED_CONFIG, PRUNED_INIT, finish_variant, model_and_batch, write_pruned

AUTO_REPORT = "auto_prune.json"


class Candidates:
    """Pruned copies of one trained model by ratio vector (the last one kept: a candidate's cost and score are
    computed on the same copy), with the groups, the token ranges and the model's original FLOPs."""

    def __init__(self, model: nn.Module, inputs: Any, settings: AutoPruneSettings, kept: dict[str, str]) -> None:
        self.model, self.inputs, self.settings, self.kept = model, inputs, settings, list(kept)
        self.groups: list[LayerGroup] = prunable_groups(model, settings.prune, self.kept, settings.max_groups)
        top = int(settings.prune.max_layer_ratio / settings.ratio_step + 1e-9)
        self.low, self.high = [0] * len(self.groups), [top] * len(self.groups)
        self.flops0 = count_flops(model, inputs)
        self._last: tuple[tuple[float, ...], nn.Module] | None = None

    def ratios(self, tokens: Sequence[int]) -> list[float]:
        return [round(t * self.settings.ratio_step, 6) for t in tokens]

    def pruned_ratios(self, ratios: Sequence[float]) -> nn.Module:
        """The model pruned by one ratio per group (the refinement's ratios are off the token grid)."""
        key = tuple(ratios)
        if self._last is None or self._last[0] != key:
            net = prune_groups(self.model, self.inputs, self.settings.prune, self.groups, list(ratios), self.kept)
            self._last = (key, net)
        return self._last[1]

    def pruned(self, tokens: Sequence[int]) -> nn.Module:
        return self.pruned_ratios(self.ratios(tokens))

    def flops_fraction(self, ratios: Sequence[float]) -> float:
        return measure_pruned(self.pruned_ratios(ratios), self.inputs, tensor_forward, "flops") / self.flops0


def export_latency_ms(cfg: Config, model: nn.Module, runs: int = 10, threads: int = LATENCY_THREADS) -> float:
    """ONNX Runtime CPU latency (median of ``runs``) of ``model``'s export graph, the one ``tools/export.py``
    writes for ``cfg`` (the task's export spec, static batch 1), exported to a temporary file, on ``threads``
    intra-op threads (0: ONNX Runtime's default, all cores). The search times the original (the budget's
    reference) and every candidate with the same ``threads``."""
    task = export_task(cfg)
    options = task_export_options(task, cfg, dynamic=False, opset=DEFAULT_OPSET)
    spec = task.exporter(cfg).build_export_spec(model, cfg, options)
    spec.module.eval()
    inputs = spec.sample_inputs(1, 0)[0] if spec.sample_inputs else torch.zeros(options.input_shape[1:])[None]
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, "candidate.onnx")
        export_spec_to_onnx(spec, inputs, path, options)
        latency = ort_latency_ms(path, runs=runs, warmup=2, threads=threads)
    if latency is None:
        raise OarsError("--target-latency needs ONNX Runtime (pip install onnxruntime)")
    return latency


def _cost_fn(cfg: Config, candidates: Candidates, settings: AutoPruneSettings) -> Callable[[list[float]], float]:
    """The budget's measure of a ratio vector: the FLOPs fraction, or the export's ONNX Runtime milliseconds."""
    if settings.target_flops is not None:
        return candidates.flops_fraction
    return lambda ratios: export_latency_ms(cfg, candidates.pruned_ratios(ratios), threads=settings.latency_threads)


def _unreachable(settings: AutoPruneSettings, smallest: float) -> OarsError:
    """The message of a budget no candidate meets, naming the most that pruning reaches."""
    most = f"pruning every group by the most allowed (compress.max_layer_ratio {settings.prune.max_layer_ratio:g})"
    if settings.target_flops is not None:
        return OarsError(f"--target-flops {settings.target_flops:g} is unreachable: {most} still leaves "
                         f"{smallest:.3f} of the original FLOPs (the rest is in layers outside compress.scope "
                         f"{settings.prune.scope} or tied to them); ask for at least {smallest:.3f}")
    return OarsError(f"--target-latency {settings.target_latency:g} ms is unreachable: {most} still runs in "
                     f"{smallest:.3f} ms on this machine (ONNX Runtime, CPU); ask for at least {smallest:.3f} ms")


def search_candidates(cfg: Config, candidates: Candidates, settings: AutoPruneSettings,
                      score: Callable[[nn.Module], float]) -> tuple[SearchResult, Refinement]:
    """Run the search (see the module docstring), then scale its best toward the budget
    (:func:`oars.compress.auto_prune_search.refine_to_budget`, ``compress.refine_rounds``); ``score(pruned copy)``
    is the proxy.

    Raises:
        OarsError: the budget is unreachable (naming the smallest reachable FLOPs fraction or latency).
    """
    budget = settings.target_flops if settings.target_flops is not None else settings.target_latency
    cost = _cost_fn(cfg, candidates, settings)
    evals = Evaluations(lambda tokens: cost(candidates.ratios(tokens)),
                        lambda tokens: score(candidates.pruned(tokens)), budget)
    start = uniform_start(candidates.low, candidates.high, evals.within)
    if start is None:
        raise _unreachable(settings, evals.cost(candidates.high))
    print(f"auto-prune: {len(candidates.groups)} groups ({', '.join(g.name for g in candidates.groups)}); start: "
          f"every group by {candidates.ratios(start)[0]:g} (cost {evals.cost(start):.4g}, budget {budget:g})")
    if settings.search == "optuna":
        result = optuna_search(candidates.low, candidates.high, start, evals, settings.steps, settings.seed)
    else:
        result = sa_search(candidates.low, candidates.high, start, evals, settings.steps, settings.seed,
                           settings.init_temperature, settings.reduce_rate, settings.max_try_times,
                           reward_scale=settings.sa_scale)
    refined = refine_to_budget(candidates.ratios(result.best_tokens), cost, budget, result.best_cost,
                               settings.refine_rounds)
    print(f"auto-prune: refined the best by scale {refined.scale:g} in {len(refined.tried)} rounds: cost "
          f"{result.best_cost:.4g} -> {refined.cost:.4g} (budget {budget:g}, {refined.cost / budget:.3f} of it)")
    return result, refined


def run_auto_prune(cfg: Config, checkpoint: str, work_dir: str, options: dict[str, Any],
                   overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Search, write the best candidate, fine-tune and measure it; returns what ``--method prune`` returns
    (:func:`.prune.finish_variant`) plus ``search`` (the content of ``auto_prune.json``).

    Args:
        cfg: the loaded config of the trained model (``-o`` applied).
        checkpoint: its trained weights.
        work_dir: ``DIR``.
        options: the merged ``compress`` options (:func:`oars.compress.auto_prune_options.auto_prune_settings`).
        overrides: the ``-o`` overrides.
    """
    settings = auto_prune_settings(options, cfg.filename)
    variant = auto_variant_name(options, settings)
    check_checkpoint_file(checkpoint)
    folder = osp.join(work_dir, variant)
    if osp.isfile(osp.join(folder, PRUNED_CONFIG)) and osp.isfile(osp.join(folder, PRUNED_INIT)):
        print(f"{folder}: the searched model exists; not searching again (delete {PRUNED_CONFIG} to search anew)")
    else:
        _search_and_write(cfg, checkpoint, folder, settings)
    result = finish_variant(work_dir, variant, "auto-prune", options, overrides)
    with open(osp.join(folder, AUTO_REPORT), encoding="utf-8") as f:
        return {**result, "search": json.load(f)}


def _search_and_write(cfg: Config, checkpoint: str, folder: str, settings: AutoPruneSettings) -> None:
    model, data = model_and_batch(cfg, checkpoint)
    inputs = data["inputs"][:1]
    prefixes, _ = scope_layers(model, settings.prune)
    check_supported(model, prefixes)
    kept = kept_layers(model, inputs, tensor_forward, prefixes)
    candidates = Candidates(model, inputs, settings, kept)
    scorer = ProxyScorer(cfg, model, settings.calib_batches, settings.val_batches)
    result, refined = search_candidates(cfg, candidates, settings, scorer)
    best = prune_groups(model, inputs, settings.prune, candidates.groups, refined.ratios, candidates.kept)
    refined_score = result.best_score if refined.scale == 1.0 else scorer(best)  # the written model's proxy
    recalibrate_bn(best, scorer.calib)  # what was scored (and a better start for fine-tuning)
    latency = settings.target_latency is not None
    before = export_latency_ms(cfg, model, threads=settings.latency_threads) if latency else candidates.flops0
    after = refined.cost if latency else count_flops(best, inputs)
    report = PruneReport(measure="latency_ms" if latency else "flops",
                         target=settings.target_latency if latency else settings.target_flops, before=before,
                         after=after, flops_before=candidates.flops0, flops_after=count_flops(best, inputs),
                         params_before=count_params(model), params_after=count_params(best), step_ratios=[],
                         unprunable=dict(kept))
    write_pruned(cfg, model, best, report, checkpoint, folder, "auto-prune")
    names = [g.name for g in candidates.groups]
    search = {"budget": {"flops_fraction": settings.target_flops, "latency_ms": settings.target_latency},
              "search": settings.search, "steps": settings.steps, "seed": settings.seed,
              "init_temperature": settings.init_temperature, "reduce_rate": settings.reduce_rate,
              "sa_scale": settings.sa_scale, "latency_threads": settings.latency_threads,
              "ratio_step": settings.ratio_step, "round_to": settings.prune.round_to, "metric": scorer.metric,
              "scored": scorer.calls, "groups": [{"name": g.name, "layers": list(g.layers)} for g in candidates.groups],
              "best_ratios": dict(zip(names, refined.ratios)),
              "search_best_ratios": dict(zip(names, candidates.ratios(result.best_tokens))),
              "refine": {"rounds": settings.refine_rounds, "scale": refined.scale, "cost": refined.cost,
                         "score": refined_score, "tried": refined.tried},
              **result.to_dict()}
    atomic_write(osp.join(folder, AUTO_REPORT), json.dumps(search, indent=2) + "\n")
    print(f"auto-prune: best {search['best_ratios']} ({scorer.metric} proxy {refined_score:.4g}); "
          f"{report.measure} {before:.4g} -> {after:.4g}; params {report.params_before:,} -> "
          f"{report.params_after:,}; {scorer.calls} candidates scored")


__all__ = ["AUTO_REPORT", "Candidates", "export_latency_ms", "run_auto_prune", "search_candidates"]
