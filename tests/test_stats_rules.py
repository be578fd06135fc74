"""Each rule of the release decision (docs/methods.md), pinned one by one (issue 10).

The rates (A/A block and flag, power) live in benchmarks/decision_calibration.py; these tests pin the
rules: each one fails when its rule is broken.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from shared import frame_from

from eval_assets.capability.track import exclude_stopped_scenarios
from eval_assets.stats import (
    Budget,
    CapabilityReport,
    Concentrated,
    Looks,
    Moments,
    VerdictFrameError,
    chi_bar_sf,
    combine_looks,
    compare,
    concentrated_test,
    concentrated_without,
    decide,
    evaluate,
    holm_blocks,
    holm_inputs,
    mean_rule_p,
    mean_test,
    moderated_prior,
    release_invariant,
    scenario_tests,
    weighted_holm,
)

FLOOR = 0.2


def draws(skills: np.ndarray, seed: int, k: int, sd: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(skills[:, None] + sd * rng.standard_normal((len(skills), k)), 0.0, 1.0)


def suite(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    skills = np.random.default_rng(seed).uniform(0.6, 0.9, n)
    return skills, draws(skills, seed + 1, k), draws(skills, seed + 2, k)


def run(base: np.ndarray, cand: np.ndarray, **kwargs: object) -> CapabilityReport:
    kwargs.setdefault("aa_replications", 0)
    return compare(frame_from(base), frame_from(cand), FLOOR, judge_version="j-v1", **kwargs)  # type: ignore[arg-type]


def row(report: CapabilityReport, name: str, scenario_id: str | None = None):  # noqa: ANN201
    return next(f for f in report.findings if f.finding == name and f.scenario_id == scenario_id)


# --- policy: absolute --------------------------------------------------------------------------------


def test_any_candidate_policy_failure_blocks_whatever_the_baseline_did_and_whatever_the_scores() -> None:
    _, base, cand = suite(20, 5)
    baseline = frame_from(base)
    baseline.loc[baseline["scenario_id"] == "s004", "policy_failures"] = 1  # the baseline leaked MORE
    candidate = frame_from(np.clip(cand + 0.1, 0, 1))  # and the candidate scores better
    candidate.loc[(candidate["scenario_id"] == "s004") & (candidate["repeat"] == 0), "policy_failures"] = 1
    report = compare(baseline, candidate, FLOOR, aa_replications=0)
    policy = row(report, "policy_failures")
    assert policy.verdict == "block"
    assert "s004 (candidate 1 of 5 attempts with output, baseline 5 of 5)" in policy.detail
    decision = decide([report])
    assert decision.decision == "block" and decision.reasons[0].finding == "policy_failures"


def test_policy_failures_of_a_stopped_scenario_still_count() -> None:
    """Issue 11: a ceiling exclusion must not hide a policy leak (one invariant, track and statistics)."""
    rows = [
        {"scenario_id": "a", "repeat": 0, "status": "ok", "output": "x", "policy_failures": 1},
        {"scenario_id": "a", "repeat": 1, "status": "excluded", "output": None, "policy_failures": 0},
        {"scenario_id": "b", "repeat": 0, "status": "ok", "output": "y", "policy_failures": 0},
    ]
    out = exclude_stopped_scenarios(rows)
    assert [r["status"] for r in out] == ["excluded", "excluded", "ok"] and out[0]["policy_failures"] == 1
    with pytest.raises(VerdictFrameError, match="without output"):
        exclude_stopped_scenarios([dict(rows[1], policy_failures=1)])
    assert list(release_invariant(["excluded", "excluded"], [1, 0])) == [True, False]


# --- insufficient evidence ---------------------------------------------------------------------------


def test_a_build_whose_attempts_mostly_errored_is_investigate_with_counts_over_attempts_with_output() -> None:
    _, base, cand = suite(21, 5)
    candidate = frame_from(cand)
    errored = np.random.default_rng(3).permutation(len(candidate))[:81]
    candidate.loc[errored, ["status", "score"]] = ["failed", math.nan]
    candidate["has_output"] = True
    candidate.loc[errored, "has_output"] = False
    report = run(base, cand)  # the same scores, all present: fine
    assert report.verdict == "ok"
    thin = compare(frame_from(base), candidate, FLOOR, aa_replications=0)
    evidence = row(thin, "evidence")
    assert evidence.verdict == "investigate" and evidence.detail.startswith("insufficient evidence: ")
    assert "candidate: 24 of 105 attempts produced output, 24 scored (77% unscored)" in evidence.detail
    assert decide([thin]).decision == "investigate"


@pytest.mark.parametrize("thin_build", ["baseline", "candidate"])
def test_mostly_failed_verdicts_in_either_build_investigate_naming_that_build(thin_build: str) -> None:
    """Issue 24: thin evidence in the baseline is as untrustworthy as in the candidate, never allow."""
    _, base, cand = suite(21, 5)
    frames = {"baseline": frame_from(base), "candidate": frame_from(cand)}
    failed = np.random.default_rng(3).permutation(len(frames[thin_build]))[:81]
    frames[thin_build].loc[failed, ["status", "score"]] = ["failed", math.nan]
    report = compare(frames["baseline"], frames["candidate"], FLOOR, aa_replications=0)
    evidence = row(report, "evidence")
    other = "candidate" if thin_build == "baseline" else "baseline"
    assert evidence.verdict == "investigate" and evidence.detail.startswith("insufficient evidence: ")
    assert f"a build, thin in the {thin_build} (" in evidence.detail
    assert f"{thin_build}: 105 of 105 attempts produced output, 24 scored (77% unscored)" in evidence.detail
    assert f"{other}: 105 of 105" not in evidence.detail  # the sound build is not blamed
    assert decide([report]).decision == "investigate"


@pytest.mark.parametrize("thin_build", ["baseline", "candidate"])
def test_thin_scenarios_in_either_build_alone_investigate_naming_that_build(thin_build: str) -> None:
    """Only the thin-scenario rule can see this: 10% of one build's verdicts failed (under the 20%
    unscored limit), one per scenario, so 20% of the compared scenarios keep a single scored repeat."""
    _, base, cand = suite(30, 2)
    frames = {"baseline": frame_from(base), "candidate": frame_from(cand)}
    table = frames[thin_build]
    failed = table.index[table["repeat"] == 1][:6]
    table.loc[failed, ["status", "score"]] = ["failed", math.nan]
    report = compare(frames["baseline"], frames["candidate"], FLOOR, aa_replications=0)
    evidence = row(report, "evidence")
    shares = "baseline 20%, candidate 0%" if thin_build == "baseline" else "baseline 0%, candidate 20%"
    assert evidence.verdict == "investigate"
    assert evidence.detail == (
        "insufficient evidence: 20% of compared scenarios have fewer than 2 scored repeats in a build, "
        f"thin in the {thin_build} ({shares}; limit 10%)"
    )
    assert decide([report]).decision == "investigate"
    whole = compare(frame_from(base), frame_from(cand), FLOOR, aa_replications=0)
    assert row(whole, "evidence").verdict == "ok"  # the same builds with every verdict scored


@pytest.mark.parametrize("thin_build", ["baseline", "candidate"])
def test_whole_scenarios_lost_to_failed_verdicts_in_either_build_investigate_naming_that_build(
    thin_build: str,
) -> None:
    """Only the unscored-share rule can see this: 6 of 21 scenarios have every verdict failed in one
    build (29% unscored), so they are not compared and no compared scenario is thin."""
    _, base, cand = suite(21, 5)
    frames = {"baseline": frame_from(base), "candidate": frame_from(cand)}
    table = frames[thin_build]
    table.loc[table["scenario_id"] < "s006", ["status", "score"]] = ["failed", math.nan]
    report = compare(frames["baseline"], frames["candidate"], FLOOR, aa_replications=0)
    evidence = row(report, "evidence")
    assert evidence.verdict == "investigate"
    assert evidence.detail == (
        f"insufficient evidence: {thin_build}: 105 of 105 attempts produced output, 75 scored (29% unscored) "
        "(limit 20% unscored)"
    )
    assert decide([report]).decision == "investigate"


def test_too_few_scenarios_is_insufficient_evidence_not_allow() -> None:
    _, base, cand = suite(4, 5)
    report = run(base, cand)
    assert row(report, "evidence").verdict == "investigate"
    assert "4 scenarios compared (need 5)" in row(report, "evidence").detail
    assert decide([report]).decision == "investigate"
    _, base, cand = suite(5, 5)
    assert row(run(base, cand), "evidence").verdict == "ok"


# --- floor ----------------------------------------------------------------------------------------------


def test_the_floor_test_is_fisher_exact_on_repeats_below_the_floor_and_blocks_under_holm() -> None:
    skills, base, cand = suite(12, 10)
    base[3] = np.full(10, 0.3) + np.linspace(0, 0.05, 10)  # just above the floor
    cand[3] = np.full(10, 0.15) + np.linspace(0, 0.04, 10)  # every repeat just below it
    report = run(base, cand)
    scenario = row(report, "floor_drop", "s003")
    expected = stats.fisher_exact([[10, 0], [0, 10]], alternative="greater").pvalue
    assert f"Fisher floor p={expected:.3g}" in scenario.detail
    assert scenario.verdict == "block" and "floor_test" in scenario.detail


def test_a_scenario_already_below_the_floor_in_the_baseline_is_no_collapse() -> None:
    """The collapse rule is "fell below the floor where the baseline's did not"."""
    skills, base, cand = suite(22, 3)
    base[5] = np.array([0.10, 0.12, 0.08])
    cand[5] = np.array([0.09, 0.10, 0.07])
    scenario = row(run(base, cand), "floor_drop", "s005")
    assert "fell below the floor" not in scenario.detail
    assert scenario.verdict == "ok" and scenario.rule == ""
    cand[5] = np.array([0.09, 0.10, 0.07])
    base[5] = np.array([0.30, 0.32, 0.28])  # the same candidate scores, from above the floor
    assert "fell below the floor" in row(run(base, cand), "floor_drop", "s005").detail


def test_a_total_collapse_blocks_at_three_repeats_and_is_named() -> None:
    skills, base, cand = suite(22, 3)
    cand[5] = np.zeros(3)
    report = run(base, cand)
    scenario = row(report, "floor_drop", "s005")
    assert scenario.verdict == "block" and scenario.rule == "collapse"
    block = next(r for r in decide([report]).reasons if r.severity == "block")
    assert block.scenario_ids == ("s005",) and "below the rubric floor" in block.message


# --- no step change -----------------------------------------------------------------------------------


def test_one_dropped_scenario_gets_the_same_decision_at_25_and_26_scenarios() -> None:
    """The old lone-flag exemption turned a block at 25 scenarios into 'investigate' at 26."""
    skills, base, cand = suite(26, 5, seed=4)
    cand[2] = draws(skills[2:3] - 0.35, 11, 5)[0]
    at_25 = run(base[:25], cand[:25])
    at_26 = run(base, cand)
    assert row(at_25, "floor_drop", "s002").verdict == row(at_26, "floor_drop", "s002").verdict == "block"
    # blocked by the same per-scenario rule at both sizes, not rescued by another signal at one of them
    assert row(at_25, "floor_drop", "s002").rule == row(at_26, "floor_drop", "s002").rule == "drop"
    assert decide([at_25]).decision == decide([at_26]).decision == "block"


def test_the_per_scenario_blocking_threshold_moves_smoothly_with_the_suite_size() -> None:
    """The drop a lone scenario needs to block grows with the number of scenarios (Holm shares
    alpha over them), without a jump between any two neighbouring sizes."""
    needed = []
    for n in (20, 24, 25, 26, 27, 32):
        skills, base, cand = suite(n, 5, seed=4)
        for drop in np.linspace(0.05, 0.6, 56):
            changed = cand.copy()
            changed[2] = np.clip(base[2] - drop, 0, 1)
            if row(run(base, changed), "floor_drop", "s002").rule == "drop":
                needed.append(drop)
                break
        else:
            pytest.fail(f"no drop blocked at {n} scenarios")
    assert max(np.diff(needed)) <= 0.03, needed


# --- one error budget -------------------------------------------------------------------------------


def test_two_judge_versions_split_the_release_budget() -> None:
    """A drop that blocks with the whole budget no longer does with half of it."""
    skills, base, _ = suite(30, 5, seed=8)
    for drop in np.linspace(0.02, 0.5, 49):
        cand = draws(skills, 3, 5)
        cand[9] = np.clip(base[9] - drop, 0, 1)
        one = run(base, cand, n_judge_versions=1)
        if row(one, "floor_drop", "s009").verdict == "block":
            two = run(base, cand, n_judge_versions=2)
            assert row(two, "floor_drop", "s009").verdict != "block"
            assert two.n_judge_versions == 2 and two.alpha == one.alpha == 0.05
            return
    pytest.fail("no drop blocked")


def test_two_judge_versions_split_the_investigate_budget_too() -> None:
    """A mean drop significant at 0.05 but not at 0.025 investigates with one version, not with two."""
    skills, base, cand = suite(30, 5, seed=8)
    for drop in np.linspace(-0.03, 0.03, 61):
        moved = np.clip(cand - drop, 0, 1)
        one = run(base, moved, n_judge_versions=1)
        mean = row(one, "mean_drop")
        if mean.verdict == "investigate" and 0.025 < (mean.p_value or 0) < 0.05:
            assert row(run(base, moved, n_judge_versions=2), "mean_drop").verdict == "ok"
            return
    pytest.fail("no drop landed between 0.025 and 0.05")


def test_reports_that_do_not_share_one_budget_give_no_decision() -> None:
    _, base, cand = suite(20, 5)
    alone = [run(base, cand, n_judge_versions=1), run(base, cand, n_judge_versions=1)]
    decision = decide(alone)
    assert decision.decision == "none"
    assert any(r.finding == "error_budget" for r in decision.reasons)
    shared = [run(base, cand, n_judge_versions=2), run(base, cand, n_judge_versions=2)]
    assert decide(shared).decision != "none"


def test_weighted_holm_rejects_in_order_of_p_over_weight_against_the_remaining_weight() -> None:
    p = np.array([[0.004, 0.03, 0.2]])
    w = np.array([[0.1, 0.5, 0.4]])
    # 0.004/0.1 = 0.04 <= 0.05/1 -> reject; then 0.03/0.5 = 0.06 <= 0.05/0.9? no -> stop
    assert weighted_holm(p, w, 0.05).tolist() == [[True, False, False]]
    assert Budget(n_judge_versions=2).report_alpha == pytest.approx(0.025)


def test_the_fast_first_holm_step_agrees_with_weighted_holm_over_every_blocking_hypothesis() -> None:
    """`evaluate` blocks through `holm_blocks`; it must equal weighted Holm over `holm_inputs`."""

    rng = np.random.default_rng(11)
    reps, m, k = 400, 15, 3
    skills = rng.uniform(0.3, 0.9, (reps, m))

    def moments(shift: np.ndarray) -> Moments:
        x = np.clip((skills + shift)[:, :, None] + 0.15 * rng.standard_normal((reps, m, k)), 0, 1)
        x = np.where(rng.random(x.shape) < 0.05, np.nan, x)
        return Moments.of(x, FLOOR)

    shift = np.where(rng.random((reps, m)) < 0.1, -rng.uniform(0, 0.8, (reps, m)), 0.0)
    base, cand = moments(np.zeros((reps, m))), moments(shift)
    budget = Budget(n_judge_versions=2)
    tests = scenario_tests(base, cand, FLOOR)
    p_beyond, _ = mean_rule_p(mean_test(tests, base, 0.0, 0, 0.95))
    conc = concentrated_test(tests)
    p, w = holm_inputs(tests, p_beyond, conc, budget)
    slow = weighted_holm(p, w, budget.report_alpha).any(axis=1)
    fast = holm_blocks(tests, p_beyond, conc, budget)
    assert 0.1 < slow.mean() < 0.9  # both outcomes occur
    assert fast.tolist() == slow.tolist()
    assert evaluate(base, cand, FLOOR, budget).block.tolist() == slow.tolist()


def _moments(values: np.ndarray) -> Moments:
    """(1, m) moments of an (m, k) score array, one replication."""
    return Moments.of(values[None, :, :], FLOOR)


def test_the_own_variance_tail_family_contains_the_rule_and_moderates_only_the_non_outliers() -> None:
    """q = 1 (the rule): a scenario noisier than its posterior keeps its own variance on its own df.
    q < 1 (the trade-off curve of benchmarks/power_tradeoff.py): it keeps it only when its variance is an
    outlier of the prior at tail q; a mildly noisier scenario is moderated (more df), a wild one is not."""
    rng = np.random.default_rng(11)
    skills = rng.uniform(0.6, 0.9, 40)
    base, cand = draws(skills, 1, 5, sd=0.08), draws(skills, 2, 5, sd=0.08)
    base[0] = skills[0] + np.array([-0.1, 0.1, -0.1, 0.1, 0.0])  # mildly noisier than the rest
    cand[0] = skills[0] + np.array([0.1, -0.1, 0.1, -0.1, 0.0])
    base[1] = skills[1] + np.array([-0.5, 0.5, -0.5, 0.5, 0.0]).clip(-skills[1], 1 - skills[1])  # wild
    cand[1] = skills[1] + np.array([0.5, -0.5, 0.5, -0.5, 0.0]).clip(-skills[1], 1 - skills[1])
    b, c = _moments(base), _moments(cand)
    rule = scenario_tests(b, c, FLOOR)
    same = scenario_tests(b, c, FLOOR, own_variance_tail=1.0)
    np.testing.assert_array_equal(rule.p_drop, same.p_drop)
    np.testing.assert_array_equal(rule.df, same.df)
    own_df = 8.0  # 4 + 4: both builds' repeats, no prior
    assert rule.df[0, 0] == own_df and rule.df[0, 1] == own_df  # the rule: both keep their own variance
    tight = scenario_tests(b, c, FLOOR, own_variance_tail=0.05)
    assert tight.df[0, 0] > own_df  # moderated: not an outlier of the prior at 5%
    assert tight.se[0, 0] < rule.se[0, 0]
    assert tight.df[0, 1] == own_df and tight.se[0, 1] == rule.se[0, 1]  # an outlier keeps its own
    outcome = evaluate(b, c, FLOOR, Budget(), own_variance_tail=0.05)
    np.testing.assert_array_equal(outcome.tests.df, tight.df)


# --- the rules' boundaries and the band's terms, by hand (survivors of the rules' mutation run) -------


def test_weighted_holm_rejects_a_p_value_exactly_at_its_threshold() -> None:
    """Holm rejects at p_(j) <= alpha w_(j) / remaining weight: at equality too. 0.025 is exactly
    0.05 / 2 in binary, so the first step is at its threshold, and the second (0.05 <= 0.05 / 1) too."""
    p = np.array([[0.025, 0.05], [0.0251, 0.05]])
    w = np.ones((2, 2))
    assert weighted_holm(p, w, 0.05).tolist() == [[True, True], [False, False]]


def test_a_scenario_with_no_scored_repeat_has_no_mean_and_a_score_at_the_floor_is_not_below_it() -> None:
    """`Moments.of`: a scenario none of whose repeats scored has n 0 and NaN mean and variance (never a
    mean of 0, which would read as a collapse); a repeat scored exactly at the floor is not below it."""
    scores = np.array([[[np.nan, np.nan, np.nan], [FLOOR, 0.1, 0.9]]])
    moments = Moments.of(scores, FLOOR)
    assert moments.n.tolist() == [[0.0, 3.0]]
    assert math.isnan(moments.mean[0, 0]) and math.isnan(moments.var[0, 0])
    assert moments.below.tolist() == [[0.0, 1.0]]  # 0.1 only
    assert moments.below.dtype == float and moments.n.dtype == float


def test_the_band_counts_every_baseline_scenario_with_two_scored_repeats_by_hand() -> None:
    """The suite band of `mean_test` by hand, per row of a two-row (vectorised) input: the usable
    baseline scenarios are those with at least two scored repeats (a scenario with exactly two counts,
    one with one does not, and adds nothing), V = sum(2 s_i^2 / K_i) / n^2 + 2 tau^2, its
    Welch-Satterthwaite df with the rebuild's df, and the half-width t(0.975, df) sqrt(V)."""
    base_scores = np.array(
        [
            [[0.6, 0.8, np.nan], [0.5, 0.7, 0.9], [0.4, np.nan, np.nan]],  # K = 2, 3, 1
            [[0.2, 0.4, 0.9], [0.5, 0.5, 0.8], [0.3, 0.6, 0.6]],  # K = 3, 3, 3
        ]
    )
    base = Moments.of(base_scores, FLOOR)
    cand = Moments.of(base_scores - 0.05, FLOOR)
    tests = scenario_tests(base, cand, FLOOR)
    between, between_df, level = 0.0004, 3, 0.95
    result = mean_test(tests, base, between, between_df, level)
    for row in range(2):
        usable = [i for i in range(3) if np.sum(np.isfinite(base_scores[row, i])) >= 2]
        terms = []
        for i in usable:
            x = base_scores[row, i][np.isfinite(base_scores[row, i])]
            terms.append((2.0 * np.var(x, ddof=1) / len(x), len(x)))
        n = len(usable)
        v = sum(u for u, _ in terms) / n**2 + 2.0 * between
        denominator = sum((u / n**2) ** 2 / (k - 1) for u, k in terms) + (2.0 * between) ** 2 / between_df
        df = v**2 / denominator
        assert result.band[row] == pytest.approx(stats.t.ppf(0.5 + level / 2, df) * math.sqrt(v), rel=1e-12)
        assert result.band_df[row] == pytest.approx(df, rel=1e-12)
    assert len([i for i in range(3) if np.sum(np.isfinite(base_scores[0, i])) >= 2]) == 2  # the K = 2 one counts


def test_the_mean_rule_reads_a_constant_drop_as_certain_and_an_untested_mean_as_no_evidence() -> None:
    """`mean_rule_p`: when every scenario moved by the same amount there is no spread and no t test;
    a constant drop is then certain (p 0) and beyond the band when it exceeds it, a constant gain is
    no drop (p 1). A mean that could not be tested (one usable scenario: NaN p) is no evidence of a
    drop: p 1, never 0."""
    rng = np.random.default_rng(5)
    base_scores = np.clip(0.6 + 0.03 * rng.standard_normal((3, 4, 3)), 0, 1)
    shift = np.array([-0.1, 0.1, -0.1])[:, None, None]
    cand_scores = base_scores + shift
    cand_scores[2, 1:] = np.nan  # the third row: one scenario left to compare
    base, cand = Moments.of(base_scores, FLOOR), Moments.of(cand_scores, FLOOR)
    test = mean_test(scenario_tests(base, cand, FLOOR), base, 0.0, 0, 0.95)
    assert test.constant.tolist() == [True, True, False]
    assert test.band[0] < 0.1  # the drop is beyond the band
    p_beyond, p_drop = mean_rule_p(test)
    assert p_beyond.tolist() == [0.0, 1.0, 1.0] and p_drop.tolist() == [0.0, 1.0, 1.0]


def test_holm_shares_each_scenario_weight_over_the_tested_scenarios_only() -> None:
    """`holm_inputs`: the drops' and floor tests' shares of the blocking alpha are split evenly over
    the scenarios that could be tested; an untested one (NaN p) gets weight 0 (it would otherwise
    dilute the others' thresholds); one tested scenario gets the whole share. The concentrated test
    gets its share from MIN_SCENARIOS (5) compared scenarios on."""
    rng = np.random.default_rng(2)
    x = np.clip(0.6 + 0.1 * rng.standard_normal((2, 5, 3)), 0, 1)
    tests = scenario_tests(Moments.of(x, FLOOR), Moments.of(x - 0.05, FLOOR), FLOOR)
    nan = np.nan
    tests = dataclasses.replace(
        tests,
        p_drop=np.array([[0.01, nan, 0.2, 0.3, 0.4], [nan, nan, nan, nan, 0.5]]),
        collapse=np.zeros((2, 5), dtype=bool),
    )
    conc = Concentrated(np.zeros(2), np.array([0.5, 0.5]), np.array([5, 4]), np.zeros((2, 5)))
    budget = Budget()
    p, w = holm_inputs(tests, np.array([0.5, 0.5]), conc, budget)
    assert w[:, 0].tolist() == [budget.w_mean] * 2 and w[:, 1].tolist() == [budget.w_concentrated, 0.0]
    quarter = [budget.w_drop / 4, 0.0, budget.w_drop / 4, budget.w_drop / 4, budget.w_drop / 4]
    assert w[0, 2:7].tolist() == pytest.approx(quarter) and w[1, 2:7].tolist() == [0, 0, 0, 0, budget.w_drop]
    assert w[0, 7:12].tolist() == pytest.approx([v / 2 for v in quarter])  # w_floor = w_drop / 2
    assert w[1, 7:12].tolist() == [0, 0, 0, 0, budget.w_floor] and w[:, 12:].sum() == 0.0


def test_the_looks_may_give_all_of_alpha_to_either_look_but_no_more() -> None:
    """The spending shares are >= 0 and sum to 1: (0, 1) and (1, 0) are valid splits (one look never
    rejects); a negative share or a sum above 1 spends more than the budget and is refused."""
    interim, topped = Moments.of(np.full((1, 1, 2), 0.5), FLOOR), np.zeros((1, 1), dtype=bool)
    for shares in [(0.0, 1.0), (1.0, 0.0)]:
        assert Looks(interim, topped, shares).shares == shares
    for shares in [(-0.01, 1.01), (0.5, 0.51)]:
        with pytest.raises(ValueError, match="alpha shares"):
            Looks(interim, topped, shares)
        with pytest.raises(ValueError, match="alpha shares"):
            Looks(interim, topped, (0.5, 0.5), shares)  # a scenario's own tests: the same budget
    assert Looks(interim, topped, (0.5, 0.5)).scenario_shares == (0.0, 1.0)  # nothing at the first look


def test_the_re_test_without_blocked_scenarios_keeps_both_looks() -> None:
    """`concentrated_without` on a two-look outcome: the concentrated test once more without the
    excluded scenarios AT BOTH LOOKS, the second centred on the first look's median unless every
    scenario was topped up, the looks combined where the row had a second look (not in a row that
    topped nothing up); never the one-look test of the final data."""
    rng = np.random.default_rng(17)
    rows, m, k = 3, 12, 5
    base = Moments.of(np.clip(0.6 + 0.15 * rng.standard_normal((rows, m, k)), 0, 1), FLOOR)
    drop = np.zeros((rows, m))
    drop[:, :3] = -0.3
    cand_scores = np.clip(0.6 + drop[:, :, None] + 0.15 * rng.standard_normal((rows, m, k)), 0, 1)
    topped = np.zeros((rows, m), dtype=bool)
    topped[0, :4] = True  # some topped up
    topped[1, :] = True  # every scenario topped up: the second look is the fixed design's
    attempted = np.ones((rows, m, k), dtype=bool)
    attempted[:, :, 3:] = topped[:, :, None]
    interim = Moments.of(cand_scores[:, :, :3], FLOOR)
    looks = Looks(interim, topped, (0.2, 0.8))
    cand = Moments.of(cand_scores, FLOOR, attempted)
    outcome = evaluate(base, cand, FLOOR, Budget(), looks=looks)
    assert outcome.first is not None
    exclude = np.zeros((rows, m), dtype=bool)
    exclude[:, 0] = True  # the scenario blocked on its own

    got = concentrated_without(outcome, exclude)
    full = np.array([False, True, False])
    centre = dataclasses.replace(
        outcome.first, difference=np.where(full[:, None], outcome.tests.difference, outcome.first.difference)
    )
    one = concentrated_test(outcome.first, exclude)
    two = concentrated_test(outcome.tests, exclude, centre_from=centre)
    expected = combine_looks(one.p, two.p, np.array([True, True, False]), looks.shares)
    assert np.allclose(got.p, expected, equal_nan=True) and np.allclose(got.statistic, two.statistic)
    assert not np.allclose(got.p, concentrated_test(outcome.tests, exclude).p)
    assert not np.allclose(got.p, concentrated_without(outcome, np.zeros((rows, m), dtype=bool)).p)


def test_the_concentrated_test_leaves_out_excluded_and_untestable_scenarios_alike() -> None:
    """A scenario whose difference could not be computed (NaN) and a scenario `exclude` names are
    both left out of the concentrated test: the result is the test over the other scenarios alone."""
    rng = np.random.default_rng(8)
    x = np.clip(0.6 + 0.15 * rng.standard_normal((1, 9, 5)), 0, 1)
    y = np.clip(x - np.where(np.arange(9) < 2, 0.3, 0.0)[None, :, None] + 0.05 * rng.standard_normal(x.shape), 0, 1)
    tests = scenario_tests(Moments.of(x, FLOOR), Moments.of(y, FLOOR), FLOOR)
    tests = dataclasses.replace(tests, difference=np.where(np.arange(9) == 3, np.nan, tests.difference))
    exclude = np.zeros((1, 9), dtype=bool)
    exclude[0, 0] = True
    keep = [i for i in range(9) if i not in (0, 3)]
    alone = dataclasses.replace(
        tests,
        **{f: getattr(tests, f)[:, keep] for f in ("difference", "se", "df", "p_drop", "p_floor", "collapse")},
    )
    got, expected = concentrated_test(tests, exclude), concentrated_test(alone)
    assert got.count.tolist() == [7] and np.isfinite(got.p).all()
    assert got.p == pytest.approx(expected.p) and got.statistic == pytest.approx(expected.statistic)


def test_the_chi_bar_squared_tail_is_its_binomial_mixture() -> None:
    """`chi_bar_sf(s, m)` = P(sum of m min(Z, 0)^2 >= s) = sum_k C(m, k) 2^-m P(chi2_k >= s), with chi2_0
    the point 0 (it counts only for s <= 0), against that sum term by term, for small suites (every
    term) and a large one (the function keeps the binomial terms within 8 standard deviations: what it
    leaves out is below 1e-14); no scenario at all is no evidence (1)."""
    sizes = [0, 1, 2, 3, 5, 8, 200]
    values = [0.0, 0.5, 1.0, 4.0, 12.0, 100.0]
    s = np.array([v for _ in sizes for v in values])
    m = np.array([n for n in sizes for _ in values])
    got = chi_bar_sf(s, m)
    for value, size, p in zip(s, m, got, strict=True):
        if size == 0:
            assert p == 1.0
            continue
        n = int(size)
        exact = (value <= 0) * 0.5**n + sum(math.comb(n, k) * 0.5**n * stats.chi2.sf(value, k) for k in range(1, n + 1))
        assert p == pytest.approx(exact, rel=1e-11, abs=1e-300), (value, n)


def test_the_suite_mean_test_by_hand_over_the_scenarios_it_can_compare() -> None:
    """`mean_test` per row, by hand: the mean, standard error and one-sided t p of the per-scenario
    differences over the scenarios that have one (a NaN difference is left out, not read as 0 or 1);
    two scenarios are enough for a t test (1 df); one is not (NaN p); a row whose differences are all
    equal is `constant` (no p), whatever the other rows hold. The drops are clear enough for p to be in
    the lower tail, where the t cdf is exact (`t_to_normal`)."""
    nan = np.nan
    d = np.array(
        [
            [-0.10, nan, -0.12, -0.11],  # three compared scenarios
            [-0.20, -0.25, nan, nan],  # two
            [-0.07, -0.07, -0.07, -0.07],  # constant
            [0.10, nan, nan, nan],  # one
            [-0.05, nan, -0.05, nan],  # two, equal: constant
        ]
    )
    rng = np.random.default_rng(3)
    x = np.clip(0.6 + 0.1 * rng.standard_normal((5, 4, 3)), 0, 1)
    base = Moments.of(x, FLOOR)
    tests = dataclasses.replace(scenario_tests(base, Moments.of(x, FLOOR), FLOOR), difference=d)
    result = mean_test(tests, base, 0.0, 0, 0.95)
    assert result.n.tolist() == [3, 2, 4, 1, 2]
    assert result.constant.tolist() == [False, False, True, False, True]
    for row in (0, 1):
        values = d[row][np.isfinite(d[row])]
        mean, se = values.mean(), values.std(ddof=1) / math.sqrt(len(values))
        assert result.mean[row] == pytest.approx(mean) and result.se[row] == pytest.approx(se)
        assert result.p_drop[row] < 0.1
        assert result.p_drop[row] == pytest.approx(stats.t.cdf(mean / se, len(values) - 1), rel=1e-9)
    assert result.mean[2] == pytest.approx(-0.07) and math.isnan(result.p_drop[2])
    assert result.mean[3] == pytest.approx(0.10) and math.isnan(result.p_drop[3]) and math.isnan(result.p_beyond[3])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.data())
def test_the_fast_blocking_rule_equals_weighted_holm_at_every_edge(data: st.DataObject) -> None:
    """`holm_blocks` is weighted Holm over `holm_inputs` without building them: equal on the edges
    random suites rarely reach, drawn here per row (two rows at once): scenarios that could not be
    tested (NaN p), a single tested scenario, floor tests missing, collapses, a concentrated test
    with fewer or more than MIN_SCENARIOS compared scenarios or no p, no mean p, and p-values from a
    grid that puts ratios at or beside their thresholds."""
    rows, m = 2, data.draw(st.integers(1, 6))
    grid = st.sampled_from([np.nan, 0.0, 0.001, 0.0025, 0.004, 0.005, 0.01, 0.0125, 0.02, 0.05, 0.1, 0.5, 1.0])

    def array(shape: tuple[int, ...]) -> np.ndarray:
        return np.array(data.draw(st.lists(grid, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))).reshape(shape)

    x = np.full((rows, m, 2), 0.5)
    tests = dataclasses.replace(
        scenario_tests(Moments.of(x, FLOOR), Moments.of(x, FLOOR), FLOOR),
        p_drop=array((rows, m)),
        p_floor=array((rows, m)),
        collapse=np.array(data.draw(st.lists(st.booleans(), min_size=rows * m, max_size=rows * m))).reshape(rows, m),
    )
    counts = np.array(data.draw(st.lists(st.integers(0, 7), min_size=rows, max_size=rows)))
    conc = Concentrated(np.zeros(rows), array((rows,)), counts, np.zeros((rows, m)))
    budget = Budget(n_judge_versions=data.draw(st.integers(1, 2)))
    p_beyond = array((rows,))
    slow = weighted_holm(*holm_inputs(tests, p_beyond, conc, budget), budget.report_alpha).any(axis=1)
    assert holm_blocks(tests, p_beyond, conc, budget).tolist() == slow.tolist()


def test_the_fast_blocking_rule_equals_weighted_holm_at_exact_ties_over_many_draws() -> None:
    """The grid's p-values put many hypotheses exactly at alpha w / total, where the two paths sum the
    same weights in different orders: 60,000 rows drawn at once, every one decided alike."""
    grid = np.array([np.nan, 0.0, 0.001, 0.0025, 0.004, 0.005, 0.01, 0.0125, 0.02, 0.05, 0.1, 0.5, 1.0])
    rng = np.random.default_rng(20261207)
    for _ in range(300):
        rows, m = 200, int(rng.integers(1, 7))
        x = np.full((rows, m, 2), 0.5)
        tests = dataclasses.replace(
            scenario_tests(Moments.of(x, FLOOR), Moments.of(x, FLOOR), FLOOR),
            p_drop=rng.choice(grid, (rows, m)),
            p_floor=rng.choice(grid, (rows, m)),
            collapse=rng.random((rows, m)) < 0.5,
        )
        conc = Concentrated(
            np.zeros(rows), rng.choice(grid, rows), rng.integers(0, 8, rows), np.zeros((rows, m))
        )
        budget = Budget(n_judge_versions=int(rng.integers(1, 3)))
        p_beyond = rng.choice(grid, rows)
        slow = weighted_holm(*holm_inputs(tests, p_beyond, conc, budget), budget.report_alpha).any(axis=1)
        assert holm_blocks(tests, p_beyond, conc, budget).tolist() == slow.tolist()


def test_weighted_holm_never_rejects_a_hypothesis_without_weight_or_p_even_alone() -> None:
    """A row where no hypothesis can be tested (every weight 0 or every p NaN) rejects nothing: the
    remaining weight is 0 there, and alpha / 0 must not let an untestable hypothesis through."""
    p = np.array([[0.0, 0.01], [np.nan, np.nan], [0.0, np.nan]])
    w = np.array([[0.0, 0.0], [0.5, 0.5], [0.0, 0.0]])
    assert weighted_holm(p, w, 0.05).tolist() == [[False, False]] * 3


COLLAPSE_EDGES = [
    # (baseline repeats, candidate repeats, fell below the floor where the baseline did not)
    ([0.5] * 5, [FLOOR] * 5, False),  # a mean exactly at the floor is not below it
    ([0.5] * 5, [0.1, 0.1, 0.1, 0.9, 0.9], True),  # most repeats (3 of 5) below, mean above the floor
    ([0.5] * 6, [0.1, 0.1, 0.1, 0.9, 0.9, 0.9], False),  # half the repeats below is not most
    ([0.5] * 3, [0.1, 0.1, 0.9], False),  # most repeats below, but fewer than 3 of them
    ([FLOOR] * 4, [0.0] * 4, True),  # a baseline mean exactly at the floor is above it
    ([0.1, 0.1, 0.9, 0.9], [0.0] * 4, True),  # a baseline with half its repeats below is above it
    ([0.1, 0.1, 0.1, 0.9, 0.9], [0.0] * 5, False),  # a baseline with most repeats below is not
]


@pytest.mark.parametrize(("base_row", "cand_row", "collapsed"), COLLAPSE_EDGES)
def test_the_collapse_rule_at_each_of_its_edges(
    base_row: list[float], cand_row: list[float], collapsed: bool
) -> None:
    """The rule: "fell below the floor" is the candidate's mean below it, or most of its repeats and at least 3;
    "where the baseline did not": the baseline's mean at or above it and at most half its repeats below.
    Four steady scenarios beside the one under test give the moderated t its prior."""
    k = len(base_row)
    steady = np.linspace(0.6, 0.8, 4)[:, None] + np.linspace(0.0, 0.04, k)
    base = np.vstack([[base_row], steady])[None]
    cand = np.vstack([[cand_row], steady])[None]
    tests = scenario_tests(Moments.of(base, FLOOR), Moments.of(cand, FLOOR), FLOOR)
    assert tests.collapse[0].tolist() == [collapsed, False, False, False, False]


def test_the_floor_p_is_1_unless_the_candidate_has_more_repeats_below_and_always_1_without_a_floor() -> None:
    """Fisher's one-sided p where the candidate has more repeats below the floor than the baseline, and
    exactly 1 where it has as many (2 of 5 each) or fewer; with no floor every testable p is 1."""
    steady = np.linspace(0.6, 0.8, 3)[:, None] + np.linspace(0.0, 0.04, 5)
    base = np.vstack([[0.1, 0.1, 0.5, 0.5, 0.5], [0.5] * 5, steady])[None]
    cand = np.vstack([[0.1, 0.1, 0.6, 0.6, 0.6], [0.1, 0.1, 0.1, 0.5, 0.5], steady])[None]
    tests = scenario_tests(Moments.of(base, FLOOR), Moments.of(cand, FLOOR), FLOOR)
    more_below = stats.fisher_exact([[3, 2], [0, 5]], alternative="greater").pvalue
    assert tests.p_floor[0].tolist() == pytest.approx([1.0, more_below, 1.0, 1.0, 1.0])
    assert tests.p_floor[0, 0] == 1.0
    unfloored = scenario_tests(Moments.of(base, None), Moments.of(cand, None), None)
    assert unfloored.p_floor[0].tolist() == [1.0] * 5
    assert not unfloored.collapse.any()


def prior_by_hand(var: list[float], df: list[float]) -> tuple[float, float]:
    """Smyth's (2004) method-of-moments prior of one row, written out: variances above 1e-12 with at
    least 1 degree of freedom; d0 from trigamma(d0/2) = Var(e) - mean(trigamma(d/2)) given 3 of them
    and a positive excess (inf past 1e4 or without); s0² = exp(mean(e) + digamma(d0/2) - log(d0/2))."""
    from scipy import optimize, special

    kept = [(v, d) for v, d in zip(var, df, strict=True) if math.isfinite(v) and d >= 1 and v > 1e-12]
    if not kept:
        return math.inf, math.nan
    e = [math.log(v) - special.digamma(d / 2) + math.log(d / 2) for v, d in kept]
    d0 = math.inf
    if len(kept) >= 3:
        excess = float(np.var(e, ddof=1)) - float(np.mean([special.polygamma(1, d / 2) for _v, d in kept]))
        if excess > 1e-6:
            d0 = 2 * optimize.brentq(lambda x: special.polygamma(1, x) - excess, 1e-9, 1e9, xtol=1e-12)
            d0 = math.inf if d0 > 1e4 else d0
    correction = special.digamma(d0 / 2) - math.log(d0 / 2) if math.isfinite(d0) else 0.0
    return d0, math.exp(float(np.mean(e)) + correction)


PRIOR_ROWS = [
    # (pooled variances, their degrees of freedom): one replication each
    ([0.010, 0.020, 0.080, 0.015, 0.030, 0.001], [4, 4, 8, 1, 2, 6]),  # spread: a finite d0; df 1 counts
    ([0.010, 0.050, 0.002, 0.0, math.nan, 0.04], [4, 3, 3, 4, 4, 0]),  # exactly 3 usable (0, NaN, df 0 not)
    ([0.020, 0.0, 1e-12, math.nan, 0.0, 0.0], [4, 4, 4, 4, 4, 4]),  # 1 usable: no d0, s0² its own
    ([0.020, 0.021, 0.019, 0.020, 0.022, 0.018], [4, 4, 4, 4, 4, 4]),  # no excess spread: d0 inf
]


@pytest.mark.parametrize("shift", [0.0, 0.3, 9000.0], ids=["whole-df", "fractional-df", "df-past-the-table"])
def test_the_variance_prior_by_hand_per_replication_whatever_the_degrees_of_freedom(shift: float) -> None:
    """`moderated_prior` against the estimator written out, row by row, on rows that reach each of its
    branches; whole, fractional and very large degrees of freedom (the last two cannot use the
    half-integer lookup table) give the same estimator."""
    var = np.array([v for v, _d in PRIOR_ROWS])
    df = np.array([[d + shift if d > 0 else 0.0 for d in ds] for _v, ds in PRIOR_ROWS])
    prior = moderated_prior(var, df)
    expected = [prior_by_hand(list(v), list(d)) for v, d in zip(var, df, strict=True)]
    assert prior.d0.tolist() == pytest.approx([d0 for d0, _s in expected], rel=1e-6)
    assert prior.s0_sq.tolist() == pytest.approx([s for _d, s in expected], rel=1e-9, nan_ok=True)
    if shift == 0.0:
        assert math.isfinite(prior.d0[0]) and math.isfinite(prior.d0[1])
        assert prior.d0[2] == math.inf and prior.d0[3] == math.inf


@pytest.mark.parametrize("binary_test", ["fisher", "barnard", "moderated"])
def test_pass_fail_scenarios_get_the_exact_test_asked_for_and_graded_ones_keep_the_moderated_t(
    binary_test: str,
) -> None:
    """On a pass/fail suite, `scenario_tests` gives the binary scenarios Fisher's or Barnard's one-sided
    exact p (candidate passes less often) as asked, or the moderated t with `binary_test="moderated"`;
    a graded scenario beside them keeps the moderated t whichever is asked."""
    base = np.array([[[1, 1, 1, 1, 1], [1, 0, 1, 1, 0], [0, 1, 0, 1, 1], [0.55, 0.6, 0.62, 0.58, 0.6]]], float)
    cand = np.array([[[0, 0, 1, 0, 0], [1, 1, 0, 1, 0], [0, 1, 1, 1, 0], [0.50, 0.52, 0.55, 0.49, 0.51]]], float)
    asked = scenario_tests(Moments.of(base, FLOOR), Moments.of(cand, FLOOR), FLOOR, binary_test=binary_test)  # type: ignore[arg-type]
    moderated = scenario_tests(Moments.of(base, FLOOR), Moments.of(cand, FLOOR), FLOOR, binary_test="moderated")
    exact = {"fisher": stats.fisher_exact, "barnard": stats.barnard_exact}
    if binary_test == "moderated":
        expected = moderated.p_drop[0, 0]
    else:
        expected = exact[binary_test]([[5, 1], [0, 4]], alternative="greater").pvalue
    assert asked.p_drop[0, 0] == pytest.approx(expected, rel=1e-9)
    assert asked.p_drop[0, 1] == (1.0 if binary_test != "moderated" else moderated.p_drop[0, 1])  # 3/5 -> 3/5
    assert asked.p_drop[0, 3] == pytest.approx(moderated.p_drop[0, 3], rel=1e-12)  # graded: the moderated t
    fisher = stats.fisher_exact([[5, 1], [0, 4]], alternative="greater").pvalue
    barnard = stats.barnard_exact([[5, 1], [0, 4]], alternative="greater").pvalue
    assert len({round(fisher, 9), round(barnard, 9), round(float(moderated.p_drop[0, 0]), 9)}) == 3


@pytest.mark.parametrize("spread", ["heterogeneous", "homogeneous"])
@pytest.mark.parametrize("tail", [0.1, 0.25, 0.9])
def test_the_own_variance_tail_by_hand_under_a_finite_and_an_infinite_prior(spread: str, tail: float) -> None:
    """Which scenarios keep their own variance at tail q < 1, written out: those noisier than their
    posterior whose pooled variance's upper tail under the prior is below q: P(F(d, d0) >= s²/s0²) for
    a finite d0, P(chi²(d) >= d s²/s0²) for an infinite one. A scenario keeping its own variance is
    tested on its own d degrees of freedom, any other on d + d0."""
    rng = np.random.default_rng(5 if spread == "heterogeneous" else 6)
    n, k = 30, 4
    sds = rng.uniform(0.02, 0.3, n) if spread == "heterogeneous" else np.full(n, 0.1)
    base = 0.5 + sds[:, None] * rng.standard_normal((n, k))
    cand = 0.5 + sds[:, None] * rng.standard_normal((n, k))
    b, c = Moments.of(base[None], FLOOR), Moments.of(cand[None], FLOOR)
    tests = scenario_tests(b, c, FLOOR, own_variance_tail=tail)
    d = (b.n - 1) + (c.n - 1)
    pooled = (b.var * (b.n - 1) + c.var * (c.n - 1)) / d
    prior = moderated_prior(pooled, d)
    d0, s0 = float(prior.d0[0]), float(prior.s0_sq[0])
    assert math.isfinite(d0) == (spread == "heterogeneous")
    post = (d0 * s0 + d * pooled) / (d0 + d) if math.isfinite(d0) else np.full_like(pooled, s0)
    upper = stats.f.sf(pooled / s0, d, d0) if math.isfinite(d0) else stats.chi2.sf(d * pooled / s0, d)
    own = (pooled > post) & (upper < tail)
    assert own.sum() > 0
    if tail < 0.5:
        assert own.sum() < (pooled > post).sum()  # the tail keeps some noisier scenarios, not all
    else:
        assert ((pooled <= post) & (upper < tail)).any()  # a quieter scenario inside the tail stays moderated
    np.testing.assert_array_equal(tests.df, np.where(own, d, d + d0))
    np.testing.assert_allclose(tests.se, np.sqrt(np.where(own, pooled, post) * (2 / k)), rtol=1e-12)


def test_a_scenario_with_one_scored_repeat_per_build_is_tested_on_the_prior_alone() -> None:
    """A scenario is testable with one scored repeat in a build: with one in each it has no degrees of
    freedom of its own (d = 0), and under a homogeneous suite's infinite prior it is tested on the
    prior's variance (df inf), as is one with a single baseline repeat; two and one repeats give one
    degree of freedom, whose variance counts."""
    rng = np.random.default_rng(6)
    base = 0.5 + 0.1 * rng.standard_normal((30, 4))
    cand = 0.5 + 0.1 * rng.standard_normal((30, 4))
    base[0, 1:] = np.nan  # one scored baseline repeat
    base[1, 1:] = cand[1, 1:] = np.nan  # one scored repeat in each build
    base[2, :2], base[2, 2:], cand[2, 1:] = [0.4, 0.6], np.nan, np.nan  # d = 1, and noisier than the prior
    cand[0] -= 0.3
    tests = scenario_tests(Moments.of(base[None], FLOOR), Moments.of(cand[None], FLOOR), FLOOR)
    assert tests.prior.d0[0] == math.inf
    assert tests.df[0, 2] == 1  # its one degree of freedom pools its own variance, which it keeps
    assert tests.se[0, 2] == pytest.approx(math.sqrt(0.02 * (1 / 2 + 1)), rel=1e-12)
    assert np.isfinite(tests.p_drop[0, :2]).all() and tests.p_drop[0, 0] < 0.05
    assert tests.df[0, 1] == math.inf and tests.df[0, 0] == math.inf  # both on the prior's variance
    assert tests.se[0, 0] == pytest.approx(math.sqrt(tests.prior.s0_sq[0] * (1 + 1 / 4)), rel=1e-12)


@pytest.mark.parametrize(("count", "blocks"), [(4, False), (5, True), (6, True)])
def test_the_concentrated_test_counts_from_exactly_min_scenarios_compared(count: int, blocks: bool) -> None:
    """The concentrated-drop hypothesis carries its share of alpha from MIN_SCENARIOS (5) compared
    scenarios on, in the decision and in the findings alike: its p alone (every other p untestable)
    blocks at 5 and 6 scenarios and cannot at 4."""
    x = np.full((1, count, 2), 0.5)
    tests = dataclasses.replace(
        scenario_tests(Moments.of(x, FLOOR), Moments.of(x, FLOOR), FLOOR),
        p_drop=np.full((1, count), np.nan),
        p_floor=np.full((1, count), np.nan),
        collapse=np.zeros((1, count), dtype=bool),
    )
    conc = Concentrated(np.zeros(1), np.array([1e-6]), np.array([count]), np.zeros((1, count)))
    p_beyond, budget = np.array([np.nan]), Budget()
    assert holm_blocks(tests, p_beyond, conc, budget).tolist() == [blocks]
    assert weighted_holm(*holm_inputs(tests, p_beyond, conc, budget), budget.report_alpha).any() == blocks
