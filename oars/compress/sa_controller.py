"""Simulated annealing over integer tokens, as PaddleSlim's ``SAController`` (``paddleslim/common/sa_controller.py``)
drives its ``AutoPruner``: one token per group of layers (its prune ratio in steps), one token mutated per step.

The rules, PaddleSlim's with ``client_num = 1``:

- temperature at iteration ``i``: ``T(i) = init_temperature * reduce_rate ** i`` (defaults 100 and 0.85, those of
  PaddleSlim's ``AutoPruner``);
- acceptance of a candidate's ``reward`` against the *current* (last accepted) one: accepted when
  ``reward > current_reward``, else when a uniform draw ``u`` in [0, 1) satisfies
  ``u <= exp(reward_scale * (reward - current_reward) / T(i))``. ``reward_scale`` (default 100) is oars' addition:
  the metrics scored here are fractions in [0, 1], and PaddleSlim's temperatures (100 falling to 0.76 after 30
  steps) on deltas of a few hundredths accept every candidate (measured: 31 of 31). Scaled by 100 the deltas are
  percentage points: a loss of 0.5 points is accepted with probability exp(-0.5) at T = 1 and almost surely at
  T = 100, so the schedule moves from a random walk to a greedy search within the steps a search runs.
  ``reward_scale = 1`` is PaddleSlim's rule unchanged;
- the best tokens seen (``best_tokens``/``best_reward``) are kept apart from the current ones;
- a candidate is the current tokens with one token (chosen uniformly) changed. PaddleSlim draws the new value
  uniformly in the token's range; here it moves to a neighbouring value (one step up or down, within the range), so
  the search walks along the budget's edge instead of jumping across it. Tokens already proposed are not proposed
  again (PaddleSlim's ``searched`` set); after ``max_try_times`` draws without a new candidate that meets the
  constraint, :meth:`SAController.next_tokens` returns None.

No torch and no numpy: the random draws come from one ``random.Random(seed)`` (or an object with the same
``random()`` and ``randrange()`` methods, which tests use to fix the draws), so a search is deterministic under a seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Protocol

INIT_TEMPERATURE, REDUCE_RATE, MAX_TRY_TIMES = 100.0, 0.85, 300  # PaddleSlim AutoPruner's defaults
REWARD_SCALE = 100.0  # rewards in [0, 1] compared in percentage points (see the module docstring)


class Draws(Protocol):
    """The random draws the controller needs (``random.Random`` has them)."""

    def random(self) -> float: ...

    def randrange(self, stop: int) -> int: ...


class SAController:
    """PaddleSlim's simulated-annealing controller (see the module docstring) over tokens ``low[i] <= t[i] <= high[i]``.

    Args:
        low: the smallest value of each token.
        high: the largest value of each token (inclusive).
        init_tokens: where the search starts (within the ranges).
        init_reward: the reward of ``init_tokens`` (the current and the best reward at the start).
        init_temperature: ``T(0)``.
        reduce_rate: the factor the temperature is multiplied by per iteration.
        max_try_times: draws :meth:`next_tokens` makes before giving up on finding a new candidate.
        seed: seeds ``random.Random`` when ``rng`` is not given.
        rng: the source of draws (tests pass fixed ones).
        reward_scale: reward differences are multiplied by this before the division by the temperature (100: a
            metric in [0, 1] compared in percentage points; 1: PaddleSlim's rule).

    Raises:
        ValueError: ranges of different lengths, an empty range, initial tokens outside their ranges, a temperature
            or reward scale <= 0, or a reduce rate outside (0, 1].
    """

    def __init__(self, low: Sequence[int], high: Sequence[int], init_tokens: Sequence[int], init_reward: float,
                 init_temperature: float = INIT_TEMPERATURE, reduce_rate: float = REDUCE_RATE,
                 max_try_times: int = MAX_TRY_TIMES, seed: int = 0, rng: Draws | None = None,
                 reward_scale: float = REWARD_SCALE) -> None:
        if not (len(low) == len(high) == len(init_tokens)) or not low:
            raise ValueError(f"SAController: low, high and init_tokens need one value per token, got {len(low)}, "
                             f"{len(high)}, {len(init_tokens)}")
        for i, (lo, hi, t) in enumerate(zip(low, high, init_tokens)):
            if not lo <= t <= hi:
                raise ValueError(f"SAController: token {i} = {t} outside its range [{lo}, {hi}]")
        if init_temperature <= 0 or not 0 < reduce_rate <= 1:
            raise ValueError(f"SAController: init_temperature must be > 0 and reduce_rate in (0, 1], got "
                             f"{init_temperature}, {reduce_rate}")
        if not reward_scale > 0:
            raise ValueError(f"SAController: reward_scale must be > 0, got {reward_scale}")
        self.low, self.high = list(low), list(high)
        self.init_temperature, self.reduce_rate, self.max_try_times = init_temperature, reduce_rate, max_try_times
        self.reward_scale = float(reward_scale)
        self.rng: Draws = rng if rng is not None else random.Random(seed)
        self.tokens, self.reward = list(init_tokens), float(init_reward)
        self.best_tokens, self.best_reward = list(init_tokens), float(init_reward)
        self.searched: set[tuple[int, ...]] = {tuple(init_tokens)}

    def temperature(self, iteration: int) -> float:
        """``T(iteration) = init_temperature * reduce_rate ** iteration``."""
        return self.init_temperature * self.reduce_rate ** iteration

    def update(self, tokens: Sequence[int], reward: float, iteration: int) -> bool:
        """Report the reward of ``tokens`` (proposed at ``iteration``); returns whether they became the current
        tokens (PaddleSlim's rule: better, or ``u <= exp(reward_scale * (reward - current) / T)``). The best are
        updated too."""
        self.searched.add(tuple(tokens))
        accepted = reward > self.reward or self.rng.random() <= self.accept_probability(reward, iteration)
        if accepted:
            self.tokens, self.reward = list(tokens), float(reward)
        if reward > self.best_reward:
            self.best_tokens, self.best_reward = list(tokens), float(reward)
        return accepted

    def accept_probability(self, reward: float, iteration: int) -> float:
        """The probability that ``reward`` replaces the current one at ``iteration``: 1 when better, else
        ``exp(reward_scale * (reward - current) / T(iteration))``."""
        if reward > self.reward:
            return 1.0
        return math.exp(self.reward_scale * (reward - self.reward) / self.temperature(iteration))

    def mutate(self, tokens: Sequence[int]) -> list[int]:
        """``tokens`` with one (uniformly chosen) token moved one step up or down within its range."""
        out = list(tokens)
        i = self.rng.randrange(len(out))
        lo, hi = self.low[i], self.high[i]
        if lo == hi:
            return out
        step = 1 if self.rng.randrange(2) else -1
        value = out[i] + step
        out[i] = value if lo <= value <= hi else out[i] - step  # at an end of the range: the other neighbour
        return out

    def next_tokens(self, allowed: Callable[[list[int]], bool] | None = None) -> list[int] | None:
        """The next candidate: a mutation of the current tokens not proposed before and ``allowed`` (the budget:
        called before any scoring, so a candidate over it is never scored); None after ``max_try_times`` draws
        without one."""
        for _ in range(self.max_try_times):
            candidate = self.mutate(self.tokens)
            key = tuple(candidate)
            if key in self.searched:
                continue
            self.searched.add(key)
            if allowed is None or allowed(candidate):
                return candidate
        return None


__all__ = ["INIT_TEMPERATURE", "MAX_TRY_TIMES", "REDUCE_RATE", "REWARD_SCALE", "Draws", "SAController"]
