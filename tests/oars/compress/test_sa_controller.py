"""The simulated-annealing controller of automatic pruning (oars.compress.sa_controller) against hand-computed cases:
PaddleSlim's temperature schedule T(i) = 100 * 0.85 ** i, its acceptance rule (better: accepted without a draw;
worse: accepted when the draw u <= exp(scale * (reward - current) / T(i)), against the current reward, not the best;
scale 100 by default, rewards in [0, 1] compared in percentage points, scale 1 PaddleSlim's own rule), the
best kept apart, one-token neighbour mutations within the ranges, candidates never proposed twice, and the same
search under the same seed."""

from __future__ import annotations

import math

import pytest

from oars.compress.sa_controller import INIT_TEMPERATURE, REDUCE_RATE, REWARD_SCALE, SAController


class FixedDraws:
    """Draws read from lists (``random()`` from ``uniform``, ``randrange()`` from ``ints``); running out fails."""

    def __init__(self, uniform=(), ints=()) -> None:
        self.uniform, self.ints = list(uniform), list(ints)

    def random(self) -> float:
        return self.uniform.pop(0)

    def randrange(self, stop: int) -> int:
        value = self.ints.pop(0)
        assert 0 <= value < stop
        return value


def controller(draws: FixedDraws, reward: float = 0.5, tokens=(2, 2, 2), **kw) -> SAController:
    return SAController([0, 0, 0], [4, 4, 4], list(tokens), reward, rng=draws, **kw)


def test_temperature_schedule_is_paddleslims():
    sa = controller(FixedDraws())
    assert (INIT_TEMPERATURE, REDUCE_RATE) == (100.0, 0.85)
    assert sa.temperature(0) == 100.0
    assert sa.temperature(1) == pytest.approx(85.0)
    assert sa.temperature(2) == pytest.approx(72.25)
    assert sa.temperature(10) == pytest.approx(19.687440434072, rel=1e-9)  # 100 * 0.85**10 by hand


def test_better_reward_is_accepted_without_a_draw():
    draws = FixedDraws(uniform=[0.999])
    sa = controller(draws)
    assert sa.update([3, 2, 2], 0.6, iteration=1)
    assert draws.uniform == [0.999]  # PaddleSlim's `or`: no draw for a better reward
    assert (sa.tokens, sa.reward, sa.best_tokens, sa.best_reward) == ([3, 2, 2], 0.6, [3, 2, 2], 0.6)


@pytest.mark.parametrize("iteration, draw, accepted", [
    # T(1) = 85: exp(-0.1 / 85) = 0.998824...
    (1, 0.9988, True), (1, 0.9989, False),
    # T(30) = 100 * 0.85**30 = 0.763076...: exp(-0.1 / 0.763076) = 0.877175...
    (30, 0.8771, True), (30, 0.8773, False),
])
def test_worse_reward_is_accepted_with_probability_exp_of_the_difference_over_t(iteration, draw, accepted):
    # reward_scale=1: PaddleSlim's rule unchanged
    assert math.exp(-0.1 / (100 * 0.85 ** 1)) == pytest.approx(0.998824, abs=1e-6)
    assert math.exp(-0.1 / (100 * 0.85 ** 30)) == pytest.approx(0.877175, abs=1e-6)
    sa = controller(FixedDraws(uniform=[draw]), reward=0.5, reward_scale=1.0)
    assert sa.update([1, 2, 2], 0.4, iteration) is accepted
    assert sa.tokens == ([1, 2, 2] if accepted else [2, 2, 2]) and sa.reward == (0.4 if accepted else 0.5)
    assert (sa.best_tokens, sa.best_reward) == ([2, 2, 2], 0.5)  # a worse candidate never becomes the best


@pytest.mark.parametrize("init_temperature, draw, accepted", [
    # a candidate 0.5 points worse (0.800 -> 0.795) at T = 1: exp(-0.5) = 0.606531 by hand
    (1.0, 0.6065, True), (1.0, 0.6066, False),
    # the same at T = 100: exp(-0.5 / 100) = 0.995012 by hand, accepted by all but the top half-percent of draws
    (100.0, 0.9950, True), (100.0, 0.9951, False),
])
def test_default_scale_measures_reward_differences_in_percentage_points(init_temperature, draw, accepted):
    assert REWARD_SCALE == 100.0
    assert math.exp(-0.5) == pytest.approx(0.606531, abs=1e-6)
    assert math.exp(-0.5 / 100) == pytest.approx(0.995012, abs=1e-6)
    sa = controller(FixedDraws(uniform=[draw]), reward=0.800, init_temperature=init_temperature)
    expected = math.exp(-0.5 / init_temperature)
    assert sa.accept_probability(0.795, iteration=0) == pytest.approx(expected, rel=1e-9)
    assert sa.accept_probability(0.801, iteration=0) == 1.0
    assert sa.update([1, 2, 2], 0.795, iteration=0) is accepted
    # PaddleSlim's rule on the same rewards (scale 1) accepts nearly always even at T = 1: exp(-0.005) = 0.995
    paddle = controller(FixedDraws(), reward=0.800, init_temperature=1.0, reward_scale=1.0)
    assert paddle.accept_probability(0.795, iteration=0) == pytest.approx(math.exp(-0.005), rel=1e-9)


def test_the_default_schedule_turns_greedy_within_a_short_search():
    # a loss of 2 points: accepted with probability exp(-2 / 85) = 0.977 at step 1, exp(-2 / 0.763076) = 0.072732 at 30
    sa = controller(FixedDraws(), reward=0.80)
    assert sa.accept_probability(0.78, 1) == pytest.approx(math.exp(-2 / 85), rel=1e-6)
    assert sa.accept_probability(0.78, 30) == pytest.approx(0.072732, abs=1e-5)
    assert sa.accept_probability(0.78, 30) < 0.1 < 0.9 < sa.accept_probability(0.78, 1)


def test_acceptance_compares_with_the_current_reward_not_the_best():
    # 0.5 (start, best) -> 0.3 accepted by a low draw -> 0.35 is better than the current 0.3: accepted, no draw
    draws = FixedDraws(uniform=[0.0])
    sa = controller(draws)
    assert sa.update([1, 2, 2], 0.3, 1) and sa.update([1, 1, 2], 0.35, 2)
    assert draws.uniform == [] and sa.tokens == [1, 1, 2] and sa.best_tokens == [2, 2, 2]


def test_mutation_moves_one_token_to_a_neighbour_within_its_range():
    # index 1 up; index 0 down; index 2 up from the top of its range -> goes down instead
    sa = controller(FixedDraws(ints=[1, 1, 0, 0, 2, 1]), tokens=(0, 2, 4))
    assert sa.mutate([0, 2, 4]) == [0, 3, 4]
    assert sa.mutate([0, 2, 4]) == [1, 2, 4]  # 0 - 1 is below the range: the other neighbour
    assert sa.mutate([0, 2, 4]) == [0, 2, 3]


def test_next_tokens_skips_searched_and_disallowed_candidates_and_gives_up():
    # draws: (token 0, up) -> [3,2,2] disallowed; (token 0, up) again -> searched, skipped; (token 1, down) -> ok
    sa = controller(FixedDraws(ints=[0, 1, 0, 1, 1, 0]))
    seen = []

    def allowed(tokens):
        seen.append(tokens)
        return tokens != [3, 2, 2]

    assert sa.next_tokens(allowed) == [2, 1, 2]
    assert seen == [[3, 2, 2], [2, 1, 2]]  # the repeated [3, 2, 2] was not even checked again
    stuck = controller(FixedDraws(ints=[0, 1] * 3), max_try_times=3)
    assert stuck.next_tokens(lambda t: False) is None


def test_same_seed_same_search_and_bad_ranges_are_refused():
    def run(seed):
        sa = SAController([0] * 4, [9] * 4, [5] * 4, 0.0, seed=seed, reward_scale=1.0)  # a walk that never sticks
        out = []
        for i in range(1, 20):
            t = sa.next_tokens()
            sa.update(t, -sum(t) / 10, i)
            out.append(t)
        return out, sa.best_tokens

    assert run(3) == run(3) and run(3) != run(4)
    with pytest.raises(ValueError, match="token 1 = 7 outside its range"):
        SAController([0, 0], [4, 4], [1, 7], 0.0)
    with pytest.raises(ValueError, match="one value per token"):
        SAController([0], [4, 4], [1, 1], 0.0)
    with pytest.raises(ValueError, match="reward_scale must be > 0, got 0"):
        SAController([0], [4], [1], 0.0, reward_scale=0)
