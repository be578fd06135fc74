"""Capability reports and release decisions: each rule of docs/methods.md, bad input, rendering."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import image
from scipy import stats
from shared import frame_from

from eval_assets.release import CAPABILITY_REPORT_COLUMNS, finding_rows
from eval_assets.stats import (
    AdaptiveDesign,
    CapabilityReport,
    CheckOutcome,
    CheckSuiteEvidence,
    CrossJudgeVersionError,
    Interval,
    compare,
    decide,
    exact_separation_p,
    exit_code,
    mean_interval,
    noise_band,
    plot_report,
    summary_markdown,
)

FLOOR = 0.15
SCORE_FINDINGS = ("mean_drop", "p10", "floor_drop")


def draws(skills: np.ndarray, seed: int, k: int = 5, sd: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(skills[:, None] + sd * rng.standard_normal((len(skills), k)), 0.0, 1.0)


def pair(n: int = 200, k: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Skills in [0.6, 0.9] and two independent draws at sd 0.05 (an A/A pair)."""
    skills = np.random.default_rng(seed).uniform(0.6, 0.9, n)
    return skills, draws(skills, seed + 1, k), draws(skills, seed + 2, k)


def finding(report: CapabilityReport, name: str, scenario_id: str | None = None):  # noqa: ANN201
    return next(f for f in report.findings if f.finding == name and f.scenario_id == scenario_id)


# --- per-scenario test -----------------------------------------------------------------------------


def test_a_scenario_drop_at_three_repeats_blocks_with_borrowed_variances() -> None:
    """Welch on 3 vs 3 repeats cannot reach a corrected threshold; the moderated t can."""
    skills, base, cand = pair(k=3)
    cand[7] = draws(skills[7:8] - 0.3, 99, k=3)[0]
    report = compare(frame_from(base), frame_from(cand), floor=None)
    row = finding(report, "floor_drop", "s007")
    assert row.verdict == "block" and row.rule == "drop"
    assert row.p_value is not None and row.p_value < 0.05 * 0.15 / 200
    block = next(r for r in decide([report]).reasons if r.severity == "block")
    assert block.scenario_ids == ("s007",)


def test_constant_repeats_give_p_one_or_the_exact_separation_bound_never_zero() -> None:
    base = np.tile([[0.9], [0.5], [0.5]], (1, 5))
    cand = np.tile([[0.5], [0.5], [0.9]], (1, 5))
    report = compare(frame_from(base), frame_from(cand), floor=None)
    p = [finding(report, "floor_drop", f"s{i:03d}").p_value for i in range(3)]
    assert p == [pytest.approx(1 / 252), 1.0, 1.0]
    assert exact_separation_p(5, 5) == pytest.approx(1 / math.comb(10, 5))


def test_q_values_are_benjamini_hochberg_over_the_tested_scenarios() -> None:
    _, base, cand = pair(n=30)
    report = compare(frame_from(base), frame_from(cand), FLOOR)
    rows = report.scenarios
    assert np.allclose(rows["q_value"], stats.false_discovery_control(rows["p_value"], method="bh"))


# --- policy failures -------------------------------------------------------------------------------


def test_any_candidate_policy_failure_blocks_even_when_scores_improve() -> None:
    _, base, cand = pair()
    candidate = frame_from(np.clip(cand + 0.05, 0, 1)).assign(policy_failures=0)
    candidate.loc[3, "policy_failures"] = 2
    report = compare(frame_from(base), candidate, FLOOR)
    policy = finding(report, "policy_failures")
    assert policy.verdict == "block" and policy.statistic == 2.0
    assert decide([report]).decision == "block"


def test_policy_failures_of_failed_verdicts_count_and_rates_use_attempts_with_output() -> None:
    _, base, cand = pair(n=20)
    candidate = frame_from(cand)
    candidate.loc[0, ["status", "score", "policy_failures"]] = ["failed", math.nan, 1]
    candidate.loc[1, ["status", "score"]] = ["excluded", math.nan]
    report = compare(frame_from(base), candidate, FLOOR)
    policy = finding(report, "policy_failures")
    assert policy.verdict == "block"
    assert "1 of 99 attempts with output (baseline 0 of 100)" in policy.detail
    assert "s000 (candidate 1 of 4 attempts with output, baseline 0 of 5)" in policy.detail


# --- mean drop -------------------------------------------------------------------------------------


def test_a_uniform_drop_well_beyond_the_band_blocks_and_a_small_one_does_not() -> None:
    skills, base, _ = pair()
    far = compare(frame_from(base), frame_from(draws(skills - 0.05, 3)), FLOOR)
    assert finding(far, "mean_drop").verdict == "block" and finding(far, "mean_drop").rule == "beyond_band"
    near = compare(frame_from(base), frame_from(draws(skills - 0.004, 3)), FLOOR)
    assert finding(near, "mean_drop").verdict in ("investigate", "ok")


def test_identical_differences_are_judged_against_the_band_without_p_values() -> None:
    _, base, _ = pair(n=20)
    report = compare(frame_from(base), frame_from(base - 0.3), None)
    mean = finding(report, "mean_drop")
    assert (mean.verdict, mean.p_value) == ("block", None) and "zero spread" in mean.detail
    same = compare(frame_from(base), frame_from(base.copy()), None)
    assert (finding(same, "mean_drop").verdict, finding(same, "mean_drop").p_value) == ("ok", None)


def test_mean_finding_carries_a_bca_interval_and_the_band() -> None:
    skills, base, _ = pair()
    report = compare(frame_from(base), frame_from(draws(skills - 0.05, 3)), FLOOR)
    mean = finding(report, "mean_drop")
    assert mean.verdict == "block" and mean.statistic is not None and mean.statistic < 0
    assert "(BCa)" in mean.detail and "noise band" in mean.detail


@pytest.mark.parametrize("scipy_max_n", [0, 1_000])
def test_identical_differences_give_a_point_interval_without_resampling(scipy_max_n: int) -> None:
    rng = np.random.default_rng(0)
    interval = mean_interval(np.full(50, 0.2), n_resamples=200, level=0.95, rng=rng, scipy_max_n=scipy_max_n)
    assert interval == Interval(0.2, 0.2, "degenerate (every value equal)")


def test_degenerate_bca_falls_back_to_the_percentile_interval_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = stats.bootstrap

    def bca_fails(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)
        if kwargs["method"] == "BCa":
            result.confidence_interval = stats._common.ConfidenceInterval(math.nan, math.nan)
        return result

    monkeypatch.setattr(stats, "bootstrap", bca_fails)  # scipy.stats, which the bootstrap calls
    values = np.random.default_rng(1).normal(size=100)
    interval = mean_interval(values, n_resamples=500, level=0.95, rng=np.random.default_rng(2))
    assert interval is not None and interval.method == "percentile (BCa degenerate)"
    assert interval.low < values.mean() < interval.high


def test_vectorised_bca_for_large_suites_agrees_with_scipy() -> None:
    values = np.random.default_rng(1).exponential(size=3000)
    kwargs = {"n_resamples": 4000, "level": 0.95}
    scipy_ci = mean_interval(values, rng=np.random.default_rng(2), **kwargs)
    fast_ci = mean_interval(values, rng=np.random.default_rng(3), scipy_max_n=0, **kwargs)
    assert scipy_ci is not None and fast_ci is not None and fast_ci.method == "BCa (vectorised)"
    width = scipy_ci.high - scipy_ci.low
    assert abs(fast_ci.low - scipy_ci.low) < 0.05 * width
    assert abs(fast_ci.high - scipy_ci.high) < 0.05 * width


# --- p10 and exclusions ----------------------------------------------------------------------------


def test_the_10th_percentile_is_reported_not_gated() -> None:
    skills, base, cand = pair()
    report = compare(frame_from(base), frame_from(cand), FLOOR)
    p10 = finding(report, "p10")
    d = report.scenarios["candidate_mean"] - report.scenarios["baseline_mean"]
    assert p10.verdict == "info" and p10.statistic == pytest.approx(stats.quantile(d.to_numpy(), 0.1))
    assert "CI [" in p10.detail


def exclude(frame: pd.DataFrame, scenario_ids: list[str]) -> pd.DataFrame:
    out = frame.copy()
    hit = out["scenario_id"].isin(scenario_ids)
    out.loc[hit, "status"], out.loc[hit, "score"] = "excluded", math.nan
    return out


def test_exclusion_rates_are_compared_with_fisher() -> None:
    _, base, cand = pair(n=40)
    report = compare(frame_from(base), exclude(frame_from(cand), ["s000", "s001"]), FLOOR)
    excl = finding(report, "exclusions")
    assert excl.verdict == "info" and excl.statistic == pytest.approx(10 / 200)
    assert excl.p_value == pytest.approx(stats.fisher_exact([[10, 190], [0, 200]]).pvalue)


def test_exclusion_sensitivity_says_when_worst_case_fill_flips_the_verdict() -> None:
    _, base, cand = pair()
    excluded = [f"s{i:03d}" for i in range(40)]
    report = compare(frame_from(base), exclude(frame_from(cand), excluded), FLOOR)
    excl = finding(report, "exclusions")
    assert finding(report, "mean_drop").verdict == "ok"
    assert "filled with the worst score: block" in excl.detail
    assert "FLIPS from ok" in excl.detail and excl.rule == "sensitivity_flip"
    assert any(r.finding == "exclusions" and r.severity == "info" for r in decide([report]).reasons)


def test_excluded_scenarios_are_missing_not_zero_in_the_mean() -> None:
    _, base, cand = pair()
    report = compare(frame_from(base), exclude(frame_from(cand), ["s000"]), FLOOR)
    assert "s000" not in set(report.scenarios["scenario_id"])
    assert finding(report, "mean_drop").verdict == "ok"


# --- bad input -------------------------------------------------------------------------------------


def no_scores(report: CapabilityReport) -> bool:
    rows = [f for f in report.findings if f.finding in SCORE_FINDINGS]
    return bool(rows) and all((f.statistic, f.p_value, f.q_value) == (None, None, None) for f in rows)


def all_failed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(status="failed", score=math.nan)


BAD_INPUTS = {
    "no baseline": (lambda b, c: (None, c), "no baseline"),
    "baseline without verdicts": (lambda b, c: (pd.DataFrame(), c), "no verdicts for the baseline"),
    "candidate without verdicts": (lambda b, c: (b, pd.DataFrame()), "no verdicts for the candidate"),
    "every candidate repeat excluded": (lambda b, c: (b, exclude(c, list(c["scenario_id"]))), "every repeat"),
    "nothing scored": (lambda b, c: (b, all_failed(c)), "no scored verdicts"),
    "one scenario": (lambda b, c: (b.head(5), c.head(5)), "need at least 2"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_a_report_that_decided_nothing_with_no_fabricated_figures(case: str) -> None:
    make, message = BAD_INPUTS[case]
    _, base, cand = pair(n=10)
    baseline, candidate = make(frame_from(base), frame_from(cand))
    report = compare(
        baseline, candidate, FLOOR, judge_version="j-v1", baseline_build="b1", candidate_build="b2"
    )
    assert report.decided_nothing is not None and message in report.decided_nothing
    assert report.verdict == "none" and no_scores(report)
    assert not any(
        isinstance(v, float) and math.isnan(v)
        for f in report.findings
        for v in (f.statistic, f.p_value, f.q_value)
    )
    decision = decide([report])
    assert (decision.decision, decision.exit_code) == ("none", 2)
    assert message in decision.reasons[0].message and "j-v1" in decision.reasons[0].source


def test_policy_check_without_attempts_with_output_has_no_figures() -> None:
    _, base, cand = pair(n=10)
    candidate = exclude(frame_from(cand), [f"s{i:03d}" for i in range(10)]).assign(has_output=False)
    report = compare(frame_from(base), candidate, FLOOR)
    policy = finding(report, "policy_failures")
    assert (policy.statistic, policy.p_value, policy.verdict) == (None, None, "info")


def test_a_report_that_decided_nothing_still_blocks_on_a_policy_failure() -> None:
    _, base, cand = pair(n=10)
    candidate = frame_from(cand).head(5).assign(policy_failures=[0, 0, 1, 0, 0])
    report = compare(frame_from(base).head(5), candidate, FLOOR)
    assert report.decided_nothing is not None
    assert report.verdict == "block" and decide([report]).decision == "block"


def test_comparing_across_judge_versions_is_refused_naming_both_and_the_fix() -> None:
    _, base, cand = pair(n=10)
    baseline = frame_from(base).assign(judge_version="helpfulness-v1")
    candidate = frame_from(cand).assign(judge_version="helpfulness-v2")
    with pytest.raises(CrossJudgeVersionError) as refusal:
        compare(baseline, candidate, FLOOR, baseline_build="agent-1")
    message = str(refusal.value)
    assert "helpfulness-v1" in message and "helpfulness-v2" in message
    assert "Re-judge agent-1's stored outputs with helpfulness-v2" in message and "bridge" in message


def test_a_frame_mixing_judge_versions_is_refused() -> None:
    _, base, cand = pair(n=10)
    candidate = frame_from(cand).assign(judge_version=["v1", "v2"] * 25)
    with pytest.raises(CrossJudgeVersionError, match="span judge versions v1, v2"):
        compare(frame_from(base), candidate, FLOOR)


# --- rendering -------------------------------------------------------------------------------------


def flagged_report() -> CapabilityReport:
    skills, base, cand = pair()
    cand[[3, 4]] = 0.02
    return compare(frame_from(base), frame_from(cand), FLOOR, judge_version="j-v1", candidate_build="b2")


def test_report_rows_have_the_view_columns_and_one_floor_row_per_scenario() -> None:
    report = flagged_report()
    table = finding_rows(report)
    assert tuple(table.columns) == CAPABILITY_REPORT_COLUMNS
    assert (table["finding"] == "floor_drop").sum() == 200
    assert table.loc[table["finding"] != "floor_drop", "scenario_id"].isna().all()


def test_summary_markdown_names_the_verdict_and_the_flagged_scenarios() -> None:
    text = summary_markdown(flagged_report())
    assert "**Verdict: block**" in text and "`s003` block" in text and "`s004` block" in text
    assert "| mean_drop |" in text and "`s005`" not in text


def test_plot_is_a_png_wide_enough_for_200_scenarios() -> None:
    png = plot_report(flagged_report())
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    height, width, _ = image.imread(__import__("io").BytesIO(png)).shape
    assert width >= 1100 and height >= 700


def test_plot_of_a_report_that_decided_nothing_says_why() -> None:
    from PIL import Image

    report = compare(None, frame_from(pair(n=5)[1]), FLOOR)
    caption = Image.open(__import__("io").BytesIO(plot_report(report))).info["Description"]
    assert "no baseline: decides nothing" in caption


# --- release decision ------------------------------------------------------------------------------


def aa_report(judge: str, seed: int = 0, versions: int = 2) -> CapabilityReport:
    _, base, cand = pair(seed=seed)
    return compare(frame_from(base), frame_from(cand), FLOOR, judge_version=judge, n_judge_versions=versions)


def test_decision_blocks_when_any_judge_version_blocks_and_lists_block_reasons_first() -> None:
    calm = aa_report("j-v1")
    blocking = flagged_report()
    decision = decide([calm, blocking])
    assert decision.decision == "block" and decision.exit_code == 1
    severities = [r.severity for r in decision.reasons]
    assert severities == sorted(severities, key=["block", "investigate", "none", "info"].index)
    assert decision.reasons[0].scenario_ids == ("s003", "s004") and "j-v1" in decision.reasons[0].source


def test_decision_allows_when_every_report_is_ok() -> None:
    decision = decide([aa_report("j-v1"), aa_report("j-v2", seed=5)])
    assert decision.decision == "allow" and decision.exit_code == 0
    assert {r.severity for r in decision.reasons} == {"info"}


def test_a_failed_deterministic_check_blocks_like_any_other_evidence() -> None:
    suite = CheckSuiteEvidence("deterministic suite", (CheckOutcome("no-secrets", False, "leaked key"),))
    decision = decide([aa_report("j-v1"), suite])
    assert decision.decision == "block"
    assert decision.reasons[0].source == "deterministic suite" and "leaked key" in decision.reasons[0].message


def test_evidence_that_decided_nothing_withholds_allow_but_never_a_block() -> None:
    nothing = compare(None, frame_from(pair()[1]), FLOOR, judge_version="j-v2")
    decision = decide([aa_report("j-v1"), nothing])
    assert decision.decision == "none"  # fail closed: partial evidence never allows a release
    assert any(r.severity == "none" and "j-v2" in r.source for r in decision.reasons)
    failing = CheckSuiteEvidence("deterministic suite", (CheckOutcome("g1", False, "fail: boom"),))
    assert decide([nothing, failing]).decision == "block"


def test_no_evidence_or_only_empty_suites_is_no_decision() -> None:
    assert decide([]).decision == "none"
    assert decide([CheckSuiteEvidence("deterministic suite", ())]).exit_code == 2


def test_exit_codes_follow_release_status() -> None:
    assert [exit_code(d) for d in ("allow", "block", "none", "investigate")] == [0, 1, 2, 3]


def test_noise_band_passed_in_is_the_one_used() -> None:
    _, base, cand = pair()
    band = noise_band(frame_from(base))
    report = compare(frame_from(base), frame_from(cand), FLOOR, band)
    assert report.band_half_width == pytest.approx(band.half_width)


def test_the_same_inputs_give_the_same_report() -> None:
    _, base, cand = pair()
    first = compare(frame_from(base), frame_from(cand), FLOOR)
    again = compare(frame_from(base), frame_from(cand), FLOOR)
    assert first.findings == again.findings


# --- the evidence finding: exactly the limits the rule passed, at their boundaries ------------------


def failed_first(frame: pd.DataFrame, counts: dict[str, int]) -> pd.DataFrame:
    """`frame` with the first `count` repeats of each named scenario failed (no score)."""
    out = frame.copy()
    for sid, count in counts.items():
        hit = (out["scenario_id"] == sid) & (out["repeat"] < count)
        out.loc[hit, "status"], out.loc[hit, "score"] = "failed", math.nan
    return out


BASELINE_22_PERCENT = {"s001": 3, "s002": 3, "s003": 3, "s004": 2}  # 11 of 50 unscored, none thin
EVIDENCE_CASES = {
    # scenarios, baseline failed, candidate failed, the problems named (their opening words)
    "5 scenarios are enough": (5, {}, {"s000": 3, "s001": 3}, ["candidate: "]),
    "4 are not": (4, {}, {"s000": 3, "s001": 3}, ["4 scenarios compared (need 5)", "candidate: "]),
    "a thin share of exactly 10% is within": (10, BASELINE_22_PERCENT, {"s000": 4}, ["baseline: "]),
    "an unscored share of exactly 20% is within": (
        10,
        BASELINE_22_PERCENT,
        {"s000": 3, "s001": 3, "s002": 3, "s003": 1},
        ["baseline: "],
    ),
    "thin in both builds": (10, {"s001": 4}, {"s000": 4}, ["20% of compared scenarios have fewer than 2"]),
    "thin in the candidate": (10, {}, {"s000": 4, "s001": 4}, ["20% of compared scenarios have fewer than 2"]),
}


@pytest.mark.parametrize("case", list(EVIDENCE_CASES))
def test_the_insufficient_evidence_finding_names_exactly_the_limits_passed(case: str) -> None:
    """The rule counts a limit as passed strictly beyond it (fewer than 5 scenarios, more than 10% thin,
    more than 20% unscored in a build); the finding names each one passed, in that order, and no other."""
    n, base_failed, cand_failed, named = EVIDENCE_CASES[case]
    _, base, cand = pair(n=n)
    report = compare(failed_first(frame_from(base), base_failed), failed_first(frame_from(cand), cand_failed), None)
    found = finding(report, "evidence")
    assert (found.verdict, found.rule, found.statistic) == ("investigate", "insufficient", float(n))
    head, _, problems = found.detail.partition(": ")
    assert head == "insufficient evidence"
    listed = re.split(r"; (?![^()]*\))", problems)  # "; " between problems, not inside their parentheses
    assert len(listed) == len(named) and all(p.startswith(w) for p, w in zip(listed, named, strict=True))
    if case == "thin in both builds":
        assert listed[0].endswith("thin in the baseline and the candidate (baseline 10%, candidate 10%; limit 10%)")
    if case == "thin in the candidate":
        assert listed[0].endswith("thin in the candidate (baseline 0%, candidate 20%; limit 10%)")
    if named[-1] == "candidate: ":
        scored = n * 5 - 6
        assert listed[-1] == f"candidate: {n * 5} of {n * 5} attempts produced output, {scored} scored " + (
            f"({6 / (n * 5):.0%} unscored) (limit 20% unscored)"
        )


def test_sufficient_evidence_is_ok_and_states_both_builds_counts() -> None:
    _, base, cand = pair(n=10)
    found = finding(compare(frame_from(base), frame_from(cand), None), "evidence")
    assert (found.verdict, found.statistic) == ("ok", 10.0)
    counts = "50 of 50 attempts produced output, 50 scored (0% unscored)"
    assert found.detail == f"sufficient evidence: baseline: {counts}; candidate: {counts}; 10 scenarios compared"


def test_a_report_that_decided_nothing_keeps_its_labels_settings_and_each_builds_intervals() -> None:
    """Fewer than two scenarios in common: the report says why, carries who and what was compared and
    the release's budget as given, each build's own suite intervals (not swapped), no A/A simulation,
    and every score signal an `info` placeholder with the same reason and no figure."""
    base = frame_from(np.array([[0.9, 0.8, 0.9], [0.2, 0.3, 0.2], [0.5, 0.5, 0.6]]))
    cand = frame_from(np.array([[0.4, 0.5, 0.4], [0.6, 0.7, 0.6]]), ["s000", "other"])
    report = compare(
        base, cand, 0.5, alpha=0.02, q=0.1, n_judge_versions=2, judge_version="j-v1",
        baseline_build="b-base", candidate_build="b-cand", aa_seed=7,
    )  # fmt: skip
    assert report.decided_nothing is not None and report.decided_nothing.startswith("1 scenario(s)")
    assert (report.candidate_build, report.baseline_build, report.judge_version) == ("b-cand", "b-base", "j-v1")
    assert (report.floor, report.alpha, report.q, report.n_judge_versions) == (0.5, 0.02, 0.1, 2)
    assert (report.aa_block_rate, report.aa_flag_rate, report.aa_replications, report.aa_seed) == (None, None, 0, 7)
    assert report.candidate_intervals is not None and report.baseline_intervals is not None
    assert report.candidate_intervals.n_scenarios == 2 and report.baseline_intervals.n_scenarios == 3
    assert report.candidate_intervals.mean == pytest.approx(np.mean([0.4333333, 0.6333333]))
    placeholders = [f for f in report.findings if f.finding in SCORE_FINDINGS]
    assert [f.finding for f in placeholders] == ["mean_drop", "p10", "floor_drop"]
    assert all(
        (f.verdict, f.detail, f.statistic, f.p_value) == ("info", report.decided_nothing, None, None)
        for f in placeholders
    )
    assert report.verdict == "none" and report.reasons()[0].message == report.decided_nothing


# --- the words a release engineer reads: one reviewed snapshot ---------------------------------------

WORDING_SNAPSHOT = Path(__file__).parent / "snapshots" / "report_wording.json"


def _one_based(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(repeat=frame["repeat"] + 1)  # scenario_runs numbers repeats from 1


def _wording_cases() -> dict[str, CapabilityReport]:
    """Reports of every kind of reason: blocks naming more than ten scenarios, a concentrated drop, an
    investigate-only drop, insufficient evidence, a rebuild within noise, nothing decided, adaptive looks
    with excluded repeats (the sensitivity check over both looks), no A/A simulation."""
    cases: dict[str, CapabilityReport] = {}
    skills, base, cand = pair(n=30, seed=3)
    collapsed = cand.copy()
    collapsed[:12] = 0.02
    cases["twelve collapsed"] = compare(frame_from(base), frame_from(collapsed), FLOOR, aa_replications=40)
    concentrated = cand.copy()
    concentrated[[5, 9]] -= 0.2
    cases["two dropped"] = compare(frame_from(base), frame_from(concentrated), None, aa_replications=40)
    spread = cand.copy()
    spread[[1, 4, 8, 12, 16, 20, 24]] -= 0.08
    cases["seven dropped a little"] = compare(frame_from(base), frame_from(spread), None, aa_replications=0)
    many_excluded = exclude(frame_from(cand), [f"s{i:03d}" for i in range(12)])
    cases["a flip when excluded repeats are filled"] = compare(frame_from(base), many_excluded, FLOOR, aa_replications=0)
    shifted = np.clip(cand - 0.03, 0, 1)
    cases["uniform small drop"] = compare(frame_from(base), frame_from(shifted), FLOOR, aa_replications=0)
    cases["unchanged"] = compare(
        frame_from(base), frame_from(cand), FLOOR, judge_version="j-v1", baseline_build="b1",
        candidate_build="b2", aa_replications=40,
    )  # fmt: skip
    thin = failed_first(frame_from(cand), {"s000": 4, "s001": 4, "s002": 4, "s003": 4})
    cases["insufficient"] = compare(frame_from(base), thin, FLOOR, aa_replications=0)
    cases["no baseline"] = compare(None, frame_from(cand), FLOOR)
    topped = [f"s{i:03d}" for i in range(6)]
    first_look = _one_based(frame_from(concentrated))
    first_look = first_look[(first_look["repeat"] <= 3) | first_look["scenario_id"].isin(topped)].copy()
    hit = (first_look["scenario_id"] == "s001") & (first_look["repeat"] == 2)
    first_look.loc[hit, "status"], first_look.loc[hit, "score"] = "excluded", math.nan
    cases["adaptive with an exclusion"] = compare(
        _one_based(frame_from(base)), first_look, FLOOR, design=AdaptiveDesign(), aa_replications=0
    )
    return cases


def _wording(report: CapabilityReport) -> dict[str, object]:
    return {
        "verdict": report.verdict,
        "decided_nothing": report.decided_nothing,
        "aa": report.aa_text(),
        "reasons": [
            [r.severity, r.source, r.finding, r.message, list(r.scenario_ids), r.advice] for r in report.reasons()
        ],
        "findings": [
            [f.finding, f.scenario_id, f.verdict, f.rule, f.detail]
            for f in report.findings
            if f.scenario_id is None or f.verdict != "ok"
        ],
    }


def test_report_wording_matches_the_reviewed_snapshot() -> None:
    """What a release engineer reads (verdicts, reasons, advice, each finding's text, the A/A line) for
    one report of every kind is a reviewed diff of tests/snapshots/report_wording.json; write the new one
    with `EVALTRACK_UPDATE_SNAPSHOT=1 .venv/bin/pytest tests/test_stats_compare.py -k wording` and
    review it."""
    now = json.dumps({name: _wording(r) for name, r in _wording_cases().items()}, indent=1) + "\n"
    if os.environ.get("EVALTRACK_UPDATE_SNAPSHOT") == "1":
        WORDING_SNAPSHOT.write_text(now, encoding="utf-8")
    assert WORDING_SNAPSHOT.read_text(encoding="utf-8") == now, "report wording changed: review the snapshot"


def test_the_cross_judge_refusal_reads_whole_without_a_baseline_name_or_any_version() -> None:
    assert str(CrossJudgeVersionError.for_versions(None, "safety-v2", [])) == (
        "the baseline has no verdicts under judge version safety-v2 (it has no judge version); verdicts of "
        "different judge versions are never compared. Re-judge the baseline's stored outputs with safety-v2 "
        "(one materialization of judge_verdicts for the baseline), or run the bridge between the versions."
    )
    assert "(it has safety-v1, safety-v3)" in str(CrossJudgeVersionError.for_versions("b1", "v2", ["safety-v1", "safety-v3"]))
