"""Adaptive repeats (docs/methods.md): the spending rule, the combination of looks and the top-up plan.

The rates (A/A, power and the attempts saved, side by side with fixed 5 repeats) live in
`benchmarks/decision_calibration.py --adaptive`; these tests pin the rules, each failing when its rule breaks.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from eval_assets.stats import (
    AdaptiveDesign,
    Budget,
    Concentrated,
    FirstLook,
    Looks,
    Moments,
    chi_bar_sf,
    collapse_reachable,
    combine_looks,
    compare,
    decide,
    evaluate,
    first_look,
    noise_band,
    obrien_fleming_spent,
    plan_top_ups,
    tail_screen,
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
    # a plan that tops the scenario up whenever its first look is at all uncertain (a suite screen firing
    # tops up scenarios whatever their own p): the second look then has room to add errors
    topped = p1 <= 0.5
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
    base, cand = builds(1, 1, 12)
    cand[:, 0, :] = 1.0  # scenario 0: the candidate passes perfectly where the baseline was mediocre
    base[:, 0, :] = np.clip(base[:, 0, :] - 0.2, 0, 1)
    raw = evaluate(moments(base), moments(cand[:, :, :3]), FLOOR, Budget())
    # neither suite screen is open here (either would top up every scenario)
    assert raw.p_beyond[0] > design.suite_futility
    assert tail_screen(raw.concentrated)[0] > design.tail_futility
    plan = plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), design)
    assert not plan.blocked[0] and not plan.uncertain[0, 0] and plan.repeats[0, 0] == 0


@pytest.mark.parametrize("screen", ["suite", "tail"])
def test_an_open_suite_screen_tops_up_every_comparable_scenario(screen: str) -> None:
    """A suite test's second look needs every scenario's repeats: an open screen tops up all of them
    (but never one the baseline did not score)."""
    base, cand = builds(7, 1, 12)
    base[:, 5, :] = np.nan  # never scored by the baseline: not comparable at any count
    raw = evaluate(moments(base), moments(cand[:, :, :3]), FLOOR, Budget())
    # a bound just above the screen's first-look p opens it; the scenario thresholds stay shut
    design = AdaptiveDesign(
        futility=1e-9,
        suite_futility=min(1.0 - 1e-9, raw.p_beyond[0] * 1.01) if screen == "suite" else 1e-9,
        tail_futility=min(1.0 - 1e-9, tail_screen(raw.concentrated)[0] * 1.01) if screen == "tail" else 1e-9,
    )
    plan = plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), design)
    assert not plan.blocked[0]
    comparable = np.arange(12) != 5
    assert np.all(plan.repeats[0, comparable] == design.maximum - design.start)
    assert plan.repeats[0, 5] == 0
    shut = AdaptiveDesign(futility=1e-9, suite_futility=1e-9, tail_futility=1e-9)
    assert not plan_top_ups(moments(base), moments(cand[:, :, :3]), FLOOR, Budget(), shut).repeats.any()


def test_the_tail_screen_leaves_scenarios_tied_with_the_median_out_of_its_count() -> None:
    """On coarse scores many first-look centred scores are exactly 0; counted, they push the chi-bar p
    to 1 whatever the candidate did. Left out, the same statistic is judged among the scenarios that moved."""
    u = np.array([[-2.0, -1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5]])
    statistic = np.array([4.0 + 2.25])
    conc = Concentrated(statistic, chi_bar_sf(statistic, np.array([10])), np.array([10]), u)
    assert tail_screen(conc)[0] == pytest.approx(chi_bar_sf(statistic, np.array([4]))[0])
    assert tail_screen(conc)[0] < conc.p[0]


def test_the_collapse_condition_is_reachable_only_where_the_remaining_repeats_could_meet_it() -> None:
    """Two more repeats at 0 could take the mean below the floor (0.25 x 3 -> 0.15 of 5) or most repeats
    (3 of 5) below it; not from a mean of 1/3 with no repeat below, nor where the baseline was below."""
    base = Moments.of(np.full((1, 5, 5), 0.45), FLOOR)
    base = Moments(base.n, base.mean.copy(), base.var, base.below.copy(), base.rows)
    base.mean[0, 4], base.below[0, 4] = 0.1, 5.0  # the baseline itself below the floor: no collapse
    first = np.array([[[0.25, 0.25, 0.25], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0], [0.5, 0.5, 0.5], [0.25] * 3]])
    reach = collapse_reachable(base, Moments.of(first, FLOOR), FLOOR, remaining=2)
    # 0.75/5 < 0.2; one below + 2 = 3 of 5; one below + 2 again; 1.5/5 and none below: out of reach
    assert reach.tolist() == [[True, True, True, False, False]]
    assert not collapse_reachable(base, Moments.of(first, FLOOR), None, remaining=2).any()


def test_a_collapsed_scenario_whose_first_repeats_score_above_the_floor_is_topped_up() -> None:
    """Scenario 0 of a 200-scenario 5-level suite collapsed to skill 0, as in a replication of the
    benchmark's 200 x discrete cell that lost its collapse block without this rule: its first three
    repeats are 0.5, 0, 0.5 against 0.55 (mean 1/3, above the floor; its own variance keeps the drop p at 0.085), and
    two more at 0 give 3 of 5 below the floor, the collapse condition the fixed design blocks on. Seeded:
    on an unchanged build of that shape the rule tops up under 0.1% more scenarios."""
    rng = np.random.default_rng(20261205)

    def five_level(latent: np.ndarray, k: int) -> np.ndarray:
        noise = 0.15 * rng.standard_normal((*latent.shape, k))
        return np.round(np.clip(latent[:, :, None] + noise, 0, 1) * 4) / 4

    skills = rng.uniform(0.55, 0.95, (1, 200))
    base, first = five_level(skills, 5), five_level(skills, 3)
    base[0, 0], first[0, 0] = [0.5, 0.5, 0.75, 0.5, 0.5], [0.5, 0.0, 0.5]
    raw = evaluate(moments(base), moments(first), FLOOR, Budget())
    # the suite screens shut in both plans, so only the per-scenario conditions decide scenario 0
    rule = AdaptiveDesign(suite_futility=1e-9, tail_futility=1e-9)
    assert rule.futility < raw.tests.p_drop[0, 0] <= rule.collapse_futility and not raw.tests.collapse[0, 0]
    assert collapse_reachable(moments(base), moments(first), FLOOR, remaining=2)[0, 0]
    without = replace(rule, collapse_futility=1e-12)
    assert plan_top_ups(moments(base), moments(first), FLOOR, Budget(), rule).repeats[0, 0] == 2
    assert plan_top_ups(moments(base), moments(first), FLOOR, Budget(), without).repeats[0, 0] == 0
    # an unchanged build of the same shape, 500 replications of 22 scenarios
    skills = rng.uniform(0.55, 0.95, (500, 22))
    aa_base, aa_first = moments(five_level(skills, 5)), moments(five_level(skills, 3))
    opened = plan_top_ups(aa_base, aa_first, FLOOR, Budget(), rule).uncertain
    shut = plan_top_ups(aa_base, aa_first, FLOOR, Budget(), without).uncertain
    assert (opened & ~shut).mean() < 0.001


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


def test_the_reports_own_aa_rates_simulate_the_design_the_run_made() -> None:
    """With adaptive repeats a report's A/A rates are those of the two looks (plan, top-ups, combined p),
    measured here against the procedure run on raw pass/fail repeats of the baseline's shape; the
    fixed count's rates (the flag rate is about 1.5 points higher on this suite) miss them."""
    rng = np.random.default_rng(5)
    m, reps, design = 22, 6000, AdaptiveDesign()
    pass_rates = rng.uniform(0.55, 0.95, m)
    base = _frame((rng.random((m, 5)) < pass_rates[:, None]).astype(float))
    cand = _frame((rng.random((m, 3)) < pass_rates[:, None]).astype(float))
    adaptive = compare(base, cand, FLOOR, aa_replications=reps, design=design)
    fixed = compare(base, _frame(np.ones((m, 5))), FLOOR, aa_replications=reps)
    # the adaptive procedure on raw 0/1 repeats at the baseline's pass rates (as the report's draws)
    p = base.groupby("scenario_id")["score"].mean().to_numpy()
    xb = (rng.random((reps, m, 5)) < p[None, :, None]).astype(float)
    xc = (rng.random((reps, m, 5)) < p[None, :, None]).astype(float)
    repeat = np.arange(5)[None, None, :]
    interim = Moments.of(xc, FLOOR, np.broadcast_to(repeat < design.start, xc.shape))
    plan = plan_top_ups(Moments.of(xb, FLOOR), interim, FLOOR, Budget(), design)
    ran = repeat < (design.start + plan.repeats)[:, :, None]
    looks = design.looks(interim, plan.repeats > 0, Budget())
    raw = evaluate(Moments.of(xb, FLOOR), Moments.of(xc, FLOOR, ran), FLOOR, Budget(), looks=looks)
    for rate, expected in (
        (adaptive.aa_flag_rate, raw.flag.mean()),
        (adaptive.aa_block_rate, raw.block.mean()),
    ):
        assert rate is not None
        assert abs(rate - expected) <= 3 * np.sqrt(2 * expected * (1 - expected) / reps) + 1e-9
    assert fixed.aa_flag_rate is not None
    assert abs(fixed.aa_flag_rate - raw.flag.mean()) > 3 * np.sqrt(2 * 0.05 * 0.95 / reps)


def _rows(x: np.ndarray) -> pd.DataFrame:
    """Verdict rows of (m, k) scores, a NaN being a repeat run whose verdict failed (a row, no score)."""
    frame = _frame(np.nan_to_num(x, nan=0.5))
    failed = ~np.isfinite(x.ravel())
    frame.loc[failed, "status"], frame.loc[failed, "score"] = "failed", np.nan
    return frame


DESIGNS = [AdaptiveDesign(), AdaptiveDesign(start=3, maximum=4), AdaptiveDesign(start=2, maximum=5)]
BUDGETS = [(0.05, 0.05, 1), (0.02, 0.1, 2), (0.1, 0.2, 3)]


def _first_look_case(case: int) -> tuple[FirstLook, object, dict[str, object]]:
    """One case of the property below: builds, a design, a budget, a floor near the scores (0.5) or none,
    a rebuild's band or none; returns `first_look`'s answer, `plan_top_ups`' and the arguments."""
    rng = np.random.default_rng(case)
    design, (alpha, q, versions) = DESIGNS[case % 3], BUDGETS[(case // 3) % 3]
    floor = 0.5 if case % 2 == 0 else None
    shift = np.zeros(14)
    shift[: case % 6] = -rng.uniform(0.05, 0.35, case % 6)
    base, cand = builds(300 + case, 1, 14, shift)
    cand[0, 5, :2] = np.nan  # two first-look verdicts failed
    base[0, 6, :] = np.nan  # every baseline verdict failed: cannot be compared at any count
    band, between = None, (0.0, 0)
    if case % 4 != 3:
        rebuild = np.clip(base[0] + rng.uniform(0.05, 0.15), 0, 1)
        band = noise_band(_rows(base[0]), rebuild=_frame(rebuild))
        between = (band.between_build_var, band.between_build_df)
    first = cand[:, :, : design.start]
    args: dict[str, object] = {
        "baseline": _rows(base[0]), "candidate": _rows(first[0]), "floor": floor, "design": design,
        "alpha": alpha, "q": q, "n_judge_versions": versions, "band": band,
    }  # fmt: skip
    budget = Budget(alpha_block=alpha, alpha_flag=q, n_judge_versions=versions)
    plan = plan_top_ups(
        Moments.of(base, floor),
        Moments.of(first, floor),
        floor,
        budget,
        design,
        between=between[0],
        between_df=between[1],
    )
    return first_look(**args), plan, args  # type: ignore[arg-type]


def test_the_first_look_is_the_vectorised_plan_for_any_floor_budget_design_and_band() -> None:
    """`first_look` (what the engine asks after the first repeats) plans exactly as `plan_top_ups` on the
    same moments, in 80 cases: whatever the rubric floor, the release's budget and its split over judge
    versions, the design (one more repeat or several, start 2 or 3), a rebuild's between-build variance in
    the band, first-look verdicts that failed and a scenario the baseline never scored; it says whether the
    first look already blocks, and over how many scenarios it looked."""
    outcomes = set()
    for case in range(80):
        look, plan, args = _first_look_case(case)
        assert set(look.top_up) == {f"s{i:02d}" for i in np.flatnonzero(plan.repeats[0] > 0)}, case  # type: ignore[attr-defined]
        assert look.blocked == bool(plan.blocked[0]) and look.scenarios == 14, case  # type: ignore[attr-defined]
        outcomes.add((bool(look.top_up), look.blocked))
        if case == 0:  # the defaults are the release's own budget, one judge version
            defaults = {k: v for k, v in args.items() if k not in ("alpha", "q", "n_judge_versions")}
            assert first_look(**defaults) == look  # type: ignore[arg-type]
    assert outcomes == {(False, False), (True, False), (False, True)}  # every kind of answer was checked


def test_the_first_look_defaults_to_the_releases_budget_at_one_judge_version() -> None:
    """Case 45 of the property above (budget 0.05/0.05 at one judge version) already blocks at the first
    look; at two judge versions (half the alpha) it does not, and tops up instead."""
    look, plan, args = _first_look_case(45)
    defaults = {k: v for k, v in args.items() if k not in ("alpha", "q", "n_judge_versions")}
    assert (args["alpha"], args["q"], args["n_judge_versions"]) == (0.05, 0.05, 1)
    assert look.blocked and not look.top_up and first_look(**defaults) == look  # type: ignore[arg-type]
    halved = first_look(**defaults, n_judge_versions=2)  # type: ignore[arg-type]
    assert not halved.blocked and halved.top_up


def test_a_first_look_scenario_the_baseline_never_ran_is_not_topped_up() -> None:
    base, cand = builds(7, 1, 10)
    candidate = pd.concat(
        [_frame(cand[0, :, :3]), _frame(np.array([[0.7, 0.8, 0.75]])).assign(scenario_id="zz")],
        ignore_index=True,
    )
    look = first_look(_frame(base[0]), candidate, FLOOR, AdaptiveDesign())
    assert look == FirstLook((), False, 11)


def test_first_look_repeats_below_the_floor_open_the_floor_test() -> None:
    """Three of four first-look repeats below the floor (mean 0.31, above it) against none of the
    baseline's five: Fisher P(X >= 3), X ~ hypergeometric(9, 3, 4) = 4/84 <= the futility bound 0.05,
    so the scenario is topped up; its drop alone (repeats 0.1 to 0.95) would not have been."""
    design = AdaptiveDesign(start=4, maximum=5)
    base, cand = builds(7, 1, 10)
    first, baseline = cand[0, :, :4].copy(), base[0].copy()
    first[2], baseline[2] = [0.1, 0.1, 0.1, 0.95], [0.6, 0.65, 0.7, 0.6, 0.65]
    assert stats.hypergeom.sf(2, 9, 3, 4) == pytest.approx(4 / 84)
    assert first_look(_frame(baseline), _frame(first), FLOOR, design).top_up == ("s02",)


def test_the_first_look_reads_the_rebuilds_degrees_of_freedom_in_the_band() -> None:
    """A rebuild's between-build variance estimated on 1 degree of freedom widens the suite's band (a
    t quantile on few df): the first look's suite test stays closed and only s11 (and s03, s06: the collapse
    condition at this high floor, 0.5, is reachable by two more repeats and their drop p is at most 0.1)
    are topped up. Read as known (df 0), the same variance leaves the band narrow and the suite test tops
    up every scenario. Seeds 937 (builds) and 37 (the shift and the rebuild); the suite bound 0.4, at
    which the narrow band's p opens the suite test."""
    design = AdaptiveDesign(suite_futility=0.4)
    rng = np.random.default_rng(37)
    base, cand = builds(937, 1, 14, np.full(14, -rng.uniform(0.0, 0.12)))
    rebuild = np.clip(base[0] + rng.normal(0, 0.1, (14, 1)), 0, 1)
    band = noise_band(_frame(base[0]), rebuild=_frame(rebuild))
    assert band.between_build_df == 1 and band.between_build_var > 0
    look = first_look(_frame(base[0]), _frame(cand[0, :, :3]), 0.5, design, band=band)
    assert look.top_up == ("s03", "s06", "s11")
    plan = {
        df: plan_top_ups(
            Moments.of(base, 0.5), Moments.of(cand[:, :, :3], 0.5), 0.5, Budget(), design,
            between=band.between_build_var, between_df=df,
        )
        for df in (band.between_build_df, 0)
    }  # fmt: skip
    assert np.flatnonzero(plan[1].repeats[0]).tolist() == [3, 6, 11]
    assert (plan[0].repeats[0] > 0).all()
