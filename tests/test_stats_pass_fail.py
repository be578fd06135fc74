"""Pass/fail (0/1) repeats: the per-scenario drop test is exact, so an unchanged build stays within budget.

The moderated t borrowed variances across scenarios and was anti-conservative on 0/1 scores (3 passes of
5 then 0 of 5 gave p ~ 0.015), and the collapse rule then gave its whole share of alpha to such a
scenario: an unchanged pass/fail suite was blocked 6-12% of the time (docs/methods.md: pass/fail scores).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from eval_assets.stats import (
    Budget,
    Moments,
    aa_rates,
    binary_repeats,
    evaluate,
    pass_fail_scenarios,
    scenario_table,
    scenario_tests,
    validate_verdicts,
)

FLOOR = 0.2


def _moments(x: np.ndarray) -> Moments:
    """(R, m, k) scores -> Moments (every repeat scored)."""
    return Moments.of(x, FLOOR)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=8), min_size=1, max_size=6))
def test_zero_one_repeats_are_recognised_from_their_moments(rows: list[list[float]]) -> None:
    for scores in rows:
        x = np.asarray(scores)[None, None, :]
        assert bool(binary_repeats(_moments(x))[0, 0])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=7),
    st.floats(min_value=1e-6, max_value=1 - 1e-6),
)
def test_any_graded_repeat_makes_a_scenario_not_pass_fail(scores: list[float], graded: float) -> None:
    x = np.asarray([*scores, graded])[None, None, :]
    assert not bool(binary_repeats(_moments(x))[0, 0])


def _exact_size(k_b: int, k_c: int, rate: float, alpha: float, others: np.ndarray) -> float:
    """P(the rules' per-scenario p <= alpha) for a scenario passing at `rate` in both builds, by
    enumerating every (baseline passes, candidate passes) outcome as one replication of a pass/fail
    suite whose other scenarios are `others` (fixed 0/1 repeats, the same in both builds)."""
    outcomes = list(itertools.product(range(k_b + 1), range(k_c + 1)))
    r = len(outcomes)

    def build(k: int, which: int) -> Moments:
        x = np.zeros((r, 1, k))
        for row, counts in enumerate(outcomes):
            x[row, 0, : counts[which]] = 1.0
        rest = np.broadcast_to(others[None, :, :k], (r, others.shape[0], k))
        return _moments(np.concatenate([x, rest], axis=1))

    p = scenario_tests(build(k_b, 0), build(k_c, 1), FLOOR).p_drop[:, 0]
    weight = np.array([stats.binom.pmf(b, k_b, rate) * stats.binom.pmf(c, k_c, rate) for b, c in outcomes])
    return float(weight[p <= alpha].sum())


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=2, max_value=6),
    st.integers(min_value=2, max_value=6),
    st.floats(min_value=0.0, max_value=1.0).map(lambda x: round(x, 6)),
    st.sampled_from([0.05 * 0.35, 0.05 * 0.1 / 22, 0.05, 0.2]),
)
def test_the_pass_fail_drop_test_never_exceeds_its_level_at_any_pass_rate(
    k_b: int, k_c: int, rate: float, alpha: float
) -> None:
    # the rest of the suite: pass/fail scenarios that vary (so the suite is pass/fail)
    others = np.array([[1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 1, 0], [1, 1, 1, 0, 1, 1]], dtype=float)
    assert _exact_size(k_b, k_c, rate, alpha, others) <= alpha + 1e-12


def test_a_pass_fail_scenario_falling_from_three_of_five_to_none_is_fishers_p() -> None:
    others = np.tile(np.array([1, 0, 1, 1, 0], dtype=float), (6, 1))
    base = _moments(np.concatenate([np.array([[1, 1, 1, 0, 0]], float), others])[None])
    cand = _moments(np.concatenate([np.zeros((1, 5)), others])[None])
    p = scenario_tests(base, cand, FLOOR).p_drop[0, 0]
    expected = stats.fisher_exact([[3, 0], [2, 5]], alternative="greater").pvalue  # 10/120
    assert abs(p - expected) < 1e-12


def test_a_constant_zero_one_scenario_among_graded_scores_keeps_the_moderated_t() -> None:
    rng = np.random.default_rng(3)
    graded = np.clip(0.7 + 0.1 * rng.standard_normal((12, 3)), 0, 1)
    fell = np.array([[1.0, 1.0, 1.0]]), np.array([[0.0, 0.0, 0.0]])
    base = _moments(np.concatenate([fell[0], graded])[None])
    cand = _moments(np.concatenate([fell[1], graded])[None])
    assert not pass_fail_scenarios(base, cand, np.full((1, 13), np.nan))[0, 0]
    # borrowing the graded scenarios' small variance, a fall from 1 to 0 is far beyond 1/20
    assert scenario_tests(base, cand, FLOOR).p_drop[0, 0] < 1e-4


def test_a_constant_scenario_in_a_pass_fail_suite_gets_the_exact_test() -> None:
    others = np.tile(np.array([1, 0, 1], dtype=float), (12, 1))
    base = _moments(np.concatenate([np.ones((1, 3)), others])[None])
    cand = _moments(np.concatenate([np.zeros((1, 3)), others])[None])
    assert abs(scenario_tests(base, cand, FLOOR).p_drop[0, 0] - 1 / 20) < 1e-12


def test_a_constant_scenario_gets_the_exact_test_once_any_scenario_shows_pass_fail_repeats() -> None:
    # a mixed suite (graded scenarios and one varying 0/1 scenario): 1, 1, 1 then 0, 0, 0 is a chance
    # event for a pass/fail scenario, so it must not borrow the graded scenarios' small variance
    rng = np.random.default_rng(3)
    graded = np.clip(0.7 + 0.1 * rng.standard_normal((12, 3)), 0, 1)
    varying = np.array([[1.0, 0.0, 1.0]])
    base = _moments(np.concatenate([np.ones((1, 3)), varying, graded])[None])
    cand = _moments(np.concatenate([np.zeros((1, 3)), varying, graded])[None])
    assert abs(scenario_tests(base, cand, FLOOR).p_drop[0, 0] - 1 / 20) < 1e-12


def test_an_unchanged_mixed_suite_is_blocked_within_budget() -> None:
    # a quarter of the scenarios pass/fail, the rest graded (normal, 3 and 5 levels), 50 x 3
    rng = np.random.default_rng(20261203)
    reps, m, k = 1000, 50, 3
    skills = rng.uniform(0.55, 0.95, (reps, m))
    kind = rng.integers(0, 4, (reps, m))[:, :, None]

    def draw() -> np.ndarray:
        x = np.clip(skills[:, :, None] + 0.15 * rng.standard_normal((reps, m, k)), 0.0, 1.0)
        x = np.where(kind == 1, (rng.random((reps, m, k)) < skills[:, :, None]).astype(float), x)
        x = np.where(kind == 2, np.round(x * 2.0) / 2.0, x)
        return np.where(kind == 3, np.round(x * 4.0) / 4.0, x)

    outcome = evaluate(_moments(draw()), _moments(draw()), FLOOR, Budget())
    assert outcome.block.mean() <= 0.05 and outcome.flag.mean() <= 0.15


def _pass_fail_suite(rng: np.random.Generator, reps: int, m: int, k: int) -> np.ndarray:
    rates = rng.uniform(0.05, 0.95, (reps, m))
    rates[:, -2] = 1.0  # always passes
    rates[:, -1] = 0.0  # always fails
    return rates


def test_an_unchanged_pass_fail_suite_is_blocked_within_budget() -> None:
    rng = np.random.default_rng(20261202)
    for m, k in ((12, 3), (22, 3), (22, 5), (50, 5)):
        rates = _pass_fail_suite(rng, 1000, m, k)
        draw = [(rng.random((1000, m, k)) < rates[:, :, None]).astype(float) for _ in range(2)]
        outcome = evaluate(_moments(draw[0]), _moments(draw[1]), FLOOR, Budget())
        assert outcome.block.mean() <= 0.05, (m, k, outcome.block.mean())
        assert outcome.flag.mean() <= 0.15, (m, k, outcome.flag.mean())


def test_the_reports_own_aa_simulation_of_a_pass_fail_baseline_matches_drawing_its_passes() -> None:
    # drawn as graded scores (normal means, chi-square variances) the simulation would test a pass/fail
    # suite with the moderated t and report block 1.1%, flag 6.2% for this suite; its exact test's rates
    # (passes ~ Binomial, through the same rules) are block 0.0%, flag 4.9%
    rng = np.random.default_rng(7)
    m, k, reps = 22, 3, 4000
    rates = np.r_[rng.uniform(0.3, 0.7, m - 4), [0.9, 0.95, 0.1, 0.05]]
    rows = [(f"s{i:02d}", r, "scored", float(rng.random() < rates[i]), 0) for i in range(m) for r in range(k)]
    columns = ["scenario_id", "repeat", "status", "score", "policy_failures"]
    table = scenario_table(validate_verdicts(pd.DataFrame(rows, columns=columns)), FLOOR)
    simulated = aa_rates(table, FLOOR, Budget(), replications=reps, seed=1)
    assert simulated is not None
    mu = table["mean"].to_numpy(dtype=float)
    drawn = [(rng.random((reps, m, k)) < mu[None, :, None]).astype(float) for _ in range(2)]
    direct = evaluate(_moments(drawn[0]), _moments(drawn[1]), FLOOR, Budget())
    for got, want in ((simulated.block, direct.block.mean()), (simulated.flag, direct.flag.mean())):
        se = np.sqrt(max(want * (1 - want), 1.0 / reps) * 2.0 / reps)
        assert abs(got - want) <= 3.0 * se, (got, want)
