"""Adaptive repeats (docs/methods.md): the spending rule, the combination of looks and the top-up plan.

The rates (A/A, power and the attempts saved, side by side with fixed 5 repeats) live in
`benchmarks/decision_calibration.py --adaptive`; these tests pin the rules, each failing when its rule breaks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from eval_assets.stats import (
    AdaptiveDesign,
    Budget,
    Looks,
    Moments,
    combine_looks,
    compare,
    decide,
    evaluate,
    first_look,
    obrien_fleming_spent,
    plan_top_ups,
)

FLOOR = 0.2


def moments(x: np.ndarray) -> Moments:
    """(R, m) moments of (R, m, k) scores (NaN: a repeat not run)."""
    return Moments.of(x, FLOOR, np.isfinite(x))


def builds(seed: int, reps: int, m: int, shift: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Baseline (R, m, 5) and candidate (R, m, 5) scores: skills U(0.55, 0.95), sd 0.15, clipped."""
    rng = np.random.default_rng(seed)
    skills = rng.uniform(0.55, 0.95, (reps, m))
    base = np.clip(skills[:, :, None] + 0.15 * rng.standard_normal((reps, m, 5)), 0, 1)
    cand = np.clip((skills + shift)[:, :, None] + 0.15 * rng.standard_normal((reps, m, 5)), 0, 1)
    return base, cand


def adaptive(base: np.ndarray, cand: np.ndarray, design: AdaptiveDesign) -> tuple[np.ndarray, object]:
    """The adaptive procedure as the engine runs it: look at `design.start` repeats, top up, decide."""
    interim = moments(cand[:, :, : design.start])
    plan = plan_top_ups(moments(base), interim, FLOOR, Budget(), design)
    ran = np.arange(cand.shape[2])[None, None, :] < (design.start + plan.repeats)[:, :, None]
    looks = design.looks(interim, plan.repeats > 0, Budget())
    return plan.repeats, evaluate(
        moments(base), moments(np.where(ran, cand, np.nan)), FLOOR, Budget(), looks=looks
    )


# --- the spending rule ------------------------------------------------------------------------------


def test_obrien_fleming_spending_matches_lan_and_demets_published_values() -> None:
    # Lan & DeMets (1983), O'Brien-Fleming-type, alpha 0.05: 0.00557 spent by half the information,
    # 1.2e-5 by a fifth, all of alpha at the end
    assert obrien_fleming_spent(0.5, 0.05) == pytest.approx(0.005575, rel=1e-3)
    assert obrien_fleming_spent(0.2, 0.05) == pytest.approx(1.17e-5, rel=2e-2)
    assert obrien_fleming_spent(1.0, 0.05) == pytest.approx(0.05, rel=1e-12)
    times = np.linspace(0.05, 1.0, 40)
    assert np.all(np.diff([obrien_fleming_spent(t, 0.05) for t in times]) > 0)
    with pytest.raises(ValueError, match="information time"):
        obrien_fleming_spent(0.0, 0.05)


@pytest.mark.parametrize(("start", "maximum"), [(2, 5), (3, 5), (4, 5), (3, 8)])
def test_the_first_look_spends_only_the_obrien_fleming_share_and_the_looks_sum_to_alpha(
    start: int, maximum: int
) -> None:
    """Spending all of alpha (or most of it) at the first look breaks this test."""
    design = AdaptiveDesign(start=start, maximum=maximum)
    x = np.full((1, 2, 1), 0.5)
    shares = design.looks(moments(x), np.zeros((1, 2), dtype=bool), Budget()).shares
    level = Budget().report_alpha * Budget().w_floor
    assert shares[0] == pytest.approx(obrien_fleming_spent(start / maximum, level) / level, rel=1e-12)
    # O'Brien-Fleming: far less than the information share (linear spending) at the first look
    assert shares[0] < 0.5 * start / maximum < shares[1]
    assert sum(shares) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("shares", [(1.0, 1.0), (0.6, 0.5), (-0.1, 1.1), (0.5, 0.4)])
def test_looks_refuse_shares_that_do_not_split_alpha_exactly(shares: tuple[float, float]) -> None:
    x = np.full((1, 2, 3), 0.5)
    with pytest.raises(ValueError, match="sum to 1"):
        Looks(moments(x), np.zeros((1, 2), dtype=bool), shares)


def _two_look_p(seed: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """One scenario under an unchanged build, many times: the one-sided pooled-t p of 5 baseline repeats
    against the candidate's first 3 (first look) and all 5 (second look)."""
    rng = np.random.default_rng(seed)
    base, cand = rng.standard_normal((reps, 5)), rng.standard_normal((reps, 5))

    def p(c: np.ndarray) -> np.ndarray:
        return stats.ttest_ind(c, base, axis=1, alternative="less").pvalue

    return p(cand[:, :3]), p(cand)


def test_combining_looks_by_the_spending_rule_holds_alpha_and_spending_alpha_at_both_looks_does_not() -> None:
    p1, p2 = _two_look_p(20261204, 200_000)
    topped = p1 <= AdaptiveDesign().futility  # the plan's rule for one scenario
    alpha, se = 0.05, np.sqrt(0.05 * 0.95 / 200_000)
    shares = AdaptiveDesign().shares(0.0025)
    held = (combine_looks(p1, p2, topped, shares) <= alpha).mean()
    assert held <= alpha + 3 * se
    # all of alpha at the first look, and all of it again at the second: the error exceeds alpha
    twice = (combine_looks(p1, p2, topped, (1.0, 1.0)) <= alpha).mean()
    assert twice > alpha + 10 * se


@settings(max_examples=60, deadline=None)
@given(
    p1=st.lists(st.one_of(st.floats(0, 1), st.just(float("nan"))), min_size=1, max_size=8),
    p2=st.lists(st.one_of(st.floats(0, 1), st.just(float("nan"))), min_size=8, max_size=8),
    looked=st.lists(st.booleans(), min_size=8, max_size=8),
    w1=st.floats(0.0, 1.0),
)
def test_a_combined_p_is_never_below_either_look_and_counts_the_second_only_when_it_happened(
    p1: list[float], p2: list[float], looked: list[bool], w1: float
) -> None:
    n = len(p1)
    a, b, seen = np.array(p1), np.array(p2[:n]), np.array(looked[:n])
    out = combine_looks(a, b, seen, (w1, 1.0 - w1))
    tested = np.isfinite(a) | (seen & np.isfinite(b))
    assert np.array_equal(np.isfinite(out), tested)
    smallest = np.fmin(a, np.where(seen, b, np.nan))
    assert np.all(out[tested] >= smallest[tested] - 1e-15)
    assert np.all(out[tested] <= 1.0)
    # a second look that did not happen changes nothing, whatever its p
    assert np.array_equal(
        combine_looks(a, np.zeros(n), np.zeros(n, dtype=bool), (w1, 1.0 - w1)),
        combine_looks(a, b, np.zeros(n, dtype=bool), (w1, 1.0 - w1)),
        equal_nan=True,
    )


# --- the plan ---------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(5, 30), drop=st.floats(0.0, 0.6))
def test_the_plan_tops_up_only_uncertain_scenarios_by_the_full_difference_and_is_repeatable(
    seed: int, m: int, drop: float
) -> None:
    design = AdaptiveDesign()
    shift = np.zeros(m)
    shift[: max(1, m // 5)] = -drop
    base, cand = builds(seed, 4, m, shift)
    interim = moments(cand[:, :, : design.start])
    plan = plan_top_ups(moments(base), interim, FLOOR, Budget(), design)
    again = plan_top_ups(moments(base), interim, FLOOR, Budget(), design)
    assert np.array_equal(plan.repeats, again.repeats)  # a re-run looks at the same verdicts: same top-ups
    assert set(np.unique(plan.repeats)) <= {0, design.maximum - design.start}
    assert not np.any((plan.repeats > 0) & ~plan.uncertain)
    assert not np.any(plan.repeats[plan.blocked] > 0)
    raw = evaluate(moments(base), interim, FLOOR, Budget())
    assert np.all(plan.uncertain[raw.tests.p_drop <= design.futility])


def test_a_scenario_the_candidate_is_clearly_not_worse_in_is_not_topped_up() -> None:
    design = AdaptiveDesign()
    base, cand = builds(7, 1, 12)
    cand[:, 0, :] = 1.0  # scenario 0: the candidate passes perfectly where the baseline was mediocre
    base[:, 0, :] = np.clip(base[:, 0, :] - 0.2, 0, 1)
    plan = plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), design)
    assert not plan.blocked[0] and not plan.uncertain[0, 0] and plan.repeats[0, 0] == 0


def test_a_scenario_the_candidate_could_not_be_tested_in_is_topped_up_unless_the_baseline_never_scored_it() -> (
    None
):
    design = AdaptiveDesign()
    base, cand = builds(8, 1, 12)
    cand[:, 2, :] = np.nan  # every first-look verdict failed: topping up may make it comparable
    base[:, 3, :] = np.nan  # no baseline repeat: no number of candidate repeats makes it comparable
    plan = plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), design)
    assert plan.repeats[0, 2] == design.maximum - design.start
    assert plan.repeats[0, 3] == 0


def test_a_report_that_already_blocks_at_the_first_look_tops_up_nothing() -> None:
    design = AdaptiveDesign()
    base, cand = builds(9, 1, 22)
    cand[:, :4, :] = 0.0  # four scenarios collapse: the first look's spent share already blocks
    plan = plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), design)
    assert plan.blocked[0]
    assert not plan.repeats.any()
    _, outcome = adaptive(base, cand, design)
    assert outcome.block[0]  # type: ignore[attr-defined]


def test_the_adaptive_procedure_blocks_an_unchanged_build_within_its_budget_and_saves_attempts() -> None:
    """Seeded A/A simulation through the project's own rules: the budget holds across looks."""
    design = AdaptiveDesign()
    base, cand = builds(20261204, 2000, 22)
    repeats, outcome = adaptive(base, cand, design)
    block = outcome.block.mean()  # type: ignore[attr-defined]
    assert block <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
    paid = design.start + repeats.mean()
    assert paid <= 0.7 * 5  # >= 30% fewer attempts than fixed 5 repeats


def _frame(x: np.ndarray) -> pd.DataFrame:
    m, k = x.shape
    rows = [
        {
            "scenario_id": f"s{i:02d}",
            "repeat": r + 1,
            "status": "scored",
            "score": x[i, r],
            "policy_failures": 0,
        }
        for i in range(m)
        for r in range(k)
        if np.isfinite(x[i, r])
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compare_with_a_design_plans_and_decides_as_the_vectorised_rules(seed: int) -> None:
    design = AdaptiveDesign()
    shift = np.zeros(12)
    shift[:3] = -0.3 * (seed - 1)
    base, cand = builds(seed, 1, 12, shift)
    repeats, outcome = adaptive(base, cand, design)
    look = first_look(_frame(base[0]), _frame(cand[0, :, : design.start]), FLOOR, design)
    assert set(look.top_up) == {f"s{i:02d}" for i in np.flatnonzero(repeats[0] > 0)}
    ran = np.arange(5)[None, :] < (design.start + repeats[0])[:, None]
    report = compare(
        _frame(base[0]), _frame(np.where(ran, cand[0], np.nan)), FLOOR, aa_replications=0, design=design
    )
    expected = "block" if outcome.block[0] else "investigate" if outcome.flag[0] else "allow"  # type: ignore[attr-defined]
    assert decide([report]).decision == expected
