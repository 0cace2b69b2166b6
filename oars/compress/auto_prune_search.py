"""Automatic pruning's search: integer tokens (one per layer group: the group's prune ratio in steps) under a
budget, scored by a proxy; simulated annealing (:class:`oars.compress.sa_controller.SAController`, PaddleSlim's) or
Optuna's TPE; then :func:`refine_to_budget`, which scales the best candidate's ratios so that it uses the budget.

The budget is checked first: ``cost(tokens)`` (FLOPs fraction, or ONNX Runtime milliseconds) is measured and a
candidate over ``budget`` is recorded and dropped, never passed to ``score``. Both functions are called at most once
per distinct token vector (:class:`Evaluations`). No torch here: the caller's ``cost`` and ``score`` prune and
measure; tests drive the search with plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from oars.extras import require_extra

from .sa_controller import INIT_TEMPERATURE, MAX_TRY_TIMES, REDUCE_RATE, REWARD_SCALE, SAController

Tokens = list[int]
REFINE_ROUNDS = 7  # bisection rounds of the refinement: the scale to 1/128, as many as uniform pruning's bisection


@dataclass
class Step:
    """One proposed candidate: ``cost``; ``score`` (None: over budget, not scored); ``accepted`` (SA: became the
    current tokens)."""

    step: int
    tokens: Tokens
    cost: float
    score: float | None = None
    accepted: bool | None = None


@dataclass
class SearchResult:
    """The best candidate (``best_tokens``, its ``best_score`` and ``best_cost``) and every proposal."""

    best_tokens: Tokens
    best_score: float
    best_cost: float
    history: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"best_tokens": self.best_tokens, "best_score": self.best_score, "best_cost": self.best_cost,
                "history": [asdict(s) for s in self.history]}


class Evaluations:
    """``cost`` and ``score`` memoised by token vector, with the budget rule: :meth:`score` of a candidate over
    ``budget`` is an error (the search must check :meth:`within` first)."""

    def __init__(self, cost: Callable[[Tokens], float], score: Callable[[Tokens], float], budget: float) -> None:
        self._cost, self._score, self.budget = cost, score, budget
        self.costs: dict[tuple[int, ...], float] = {}
        self.scores: dict[tuple[int, ...], float] = {}

    def cost(self, tokens: Sequence[int]) -> float:
        key = tuple(tokens)
        if key not in self.costs:
            self.costs[key] = float(self._cost(list(tokens)))
        return self.costs[key]

    def within(self, tokens: Sequence[int]) -> bool:
        return self.cost(tokens) <= self.budget

    def score(self, tokens: Sequence[int]) -> float:
        key = tuple(tokens)
        if key not in self.scores:
            if not self.within(tokens):
                raise AssertionError(f"candidate {list(tokens)} is over the budget and must not be scored")
            self.scores[key] = float(self._score(list(tokens)))
        return self.scores[key]


def uniform_start(low: Sequence[int], high: Sequence[int], within: Callable[[Tokens], bool]) -> Tokens | None:
    """The least-pruned uniform candidate within the budget: every token at the smallest level ``t`` (clipped to its
    range) that meets it, by bisection on ``t`` (cost falls as ratios grow); None when even the highest tokens do
    not (the budget is unreachable)."""
    def at(level: int) -> Tokens:
        return [min(max(level, lo), hi) for lo, hi in zip(low, high)]

    top = max(high)
    if not within(at(top)):
        return None
    lo, hi = min(low), top
    if within(at(lo)):
        return at(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if within(at(mid)) else (mid, hi)
    return at(hi)


def sa_search(low: Sequence[int], high: Sequence[int], start: Tokens, evals: Evaluations, steps: int, seed: int = 0,
              init_temperature: float = INIT_TEMPERATURE, reduce_rate: float = REDUCE_RATE,
              max_try_times: int = MAX_TRY_TIMES, log: Callable[[str], None] = print,
              reward_scale: float = REWARD_SCALE) -> SearchResult:
    """Simulated annealing from ``start`` (within the budget) for ``steps`` scored candidates at most (PaddleSlim's
    rules, :mod:`oars.compress.sa_controller`); stops early when no new candidate within the budget is found in
    ``max_try_times`` draws."""
    history = [Step(0, list(start), evals.cost(start), evals.score(start), True)]
    controller = SAController(low, high, start, history[0].score, init_temperature, reduce_rate, max_try_times, seed,
                              reward_scale=reward_scale)

    def allowed(tokens: Tokens) -> bool:
        ok = evals.within(tokens)
        if not ok:
            history.append(Step(len(history), tokens, evals.cost(tokens)))
        return ok

    for iteration in range(1, steps + 1):
        tokens = controller.next_tokens(allowed)
        if tokens is None:
            log(f"auto-prune: no new candidate within the budget after {max_try_times} tries; stopping at step "
                f"{iteration - 1}")
            break
        score = evals.score(tokens)
        accepted = controller.update(tokens, score, iteration)
        history.append(Step(len(history), tokens, evals.cost(tokens), score, accepted))
        log(f"auto-prune step {iteration}/{steps}: tokens {tokens} cost {evals.cost(tokens):.4g} score {score:.4g}"
            f"{' accepted' if accepted else ''} (best {controller.best_reward:.4g}, "
            f"T {controller.temperature(iteration):.3g})")
    best = controller.best_tokens
    return SearchResult(best, controller.best_reward, evals.cost(best), history)


def optuna_search(low: Sequence[int], high: Sequence[int], start: Tokens, evals: Evaluations, steps: int,
                  seed: int = 0, log: Callable[[str], None] = print) -> SearchResult:
    """Optuna's TPE over the tokens for ``steps`` trials (the first is ``start``); a trial over the budget is told
    as pruned without being scored."""
    optuna = require_extra("optuna", "tools/compress.py --method auto-prune --search optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial({f"g{i}": t for i, t in enumerate(start)})
    history: list[Step] = []
    for step in range(steps):
        trial = study.ask()
        tokens = [trial.suggest_int(f"g{i}", lo, hi) for i, (lo, hi) in enumerate(zip(low, high))]
        cost = evals.cost(tokens)
        if not evals.within(tokens):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            history.append(Step(step, tokens, cost))
            continue
        score = evals.score(tokens)
        study.tell(trial, score)
        history.append(Step(step, tokens, cost, score))
        log(f"auto-prune trial {step + 1}/{steps}: tokens {tokens} cost {cost:.4g} score {score:.4g} "
            f"(best {study.best_value:.4g})")
    scored = [s for s in history if s.score is not None]
    best = max(scored, key=lambda s: s.score)  # the start is within the budget: at least one is scored
    return SearchResult(best.tokens, float(best.score), best.cost, history)


@dataclass
class Refinement:
    """The search's best ratios scaled toward the budget: ``scale`` (1.0: the search's best unchanged), the scaled
    ``ratios`` and their ``cost``; ``tried``: every ``[scale, cost]`` the bisection measured, in order."""

    scale: float
    ratios: list[float]
    cost: float
    tried: list[list[float]] = field(default_factory=list)


def scaled_ratios(ratios: Sequence[float], scale: float) -> list[float]:
    """Every ratio times ``scale`` (rounded to 1e-6, as token ratios are)."""
    return [round(r * scale, 6) for r in ratios]


def refine_to_budget(ratios: Sequence[float], cost: Callable[[list[float]], float], budget: float, best_cost: float,
                     rounds: int = REFINE_ROUNDS) -> Refinement:
    """The search's best ``ratios`` (cost ``best_cost`` <= ``budget``) scaled by the smallest ``s`` in (0, 1] whose
    cost is still within the budget, found by ``rounds`` bisection steps on ``s`` (cost rises as ``s`` falls: less
    is pruned). ``rounds`` 0 returns the ratios unchanged.

    Why: the search moves on a grid of ``ratio_step`` (0.05) and keeps the candidate with the best proxy, which may
    sit well under the budget: a latency budget at 0.7 of the original ended at 0.82 of the budget, every group a
    grid step away from the next uniform level. Scaling every ratio by one factor keeps the searched shape (which
    groups are pruned more) and only gives back channels: the importance ranking does not depend on the ratio, so
    the channels kept at a smaller ratio include those kept at the larger one and the refined model holds the
    searched one. A finer grid would not
    do this: SA would still keep its best proxy wherever it lies, and one-token moves of 0.01 walk five times slower.
    """
    tried: list[list[float]] = []
    lo, hi, hi_cost = 0.0, 1.0, best_cost
    for _ in range(rounds):
        mid = (lo + hi) / 2
        value = float(cost(scaled_ratios(ratios, mid)))
        tried.append([mid, value])
        if value <= budget:
            hi, hi_cost = mid, value
        else:
            lo = mid
    return Refinement(hi, scaled_ratios(ratios, hi), hi_cost, tried)


__all__ = ["REFINE_ROUNDS", "Evaluations", "Refinement", "SearchResult", "Step", "optuna_search", "refine_to_budget",
           "sa_search", "scaled_ratios", "uniform_start"]
