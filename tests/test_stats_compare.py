"""Capability reports and release decisions: each rule of docs/methods.md, bad input, rendering."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

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
    Finding,
    Interval,
    NoiseBand,
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


# --- a report's figures by hand: labels, intervals, per-scenario rows, the band and level asked ------

HAND_BASE = np.array(
    [[0.9, 0.8, 0.7, 0.8], [0.5, 0.1, 0.6, 0.4], [0.3, 0.2, 0.1, 0.2], [0.6, 0.6, 0.7, 0.7], [0.8, 0.9, 0.9, 0.8]]
)
HAND_CAND = np.array(
    [[0.8, 0.7, 0.7, 0.8], [0.5, 0.4, 0.6, 0.4], [0.1, 0.1, 0.05, 0.2], [0.6, 0.7, 0.7, 0.7], [0.9, 0.9, 0.9, 0.8]]
)


def test_a_hand_computed_report_carries_its_labels_pass_rates_and_every_scenarios_figures() -> None:
    """Five scenarios of four repeats, floor 0.15: the baseline has one repeat below it in s001 and s002
    (pass rate (1 + 3/4 + 3/4 + 1 + 1) / 5 = 0.9), the candidate three in s002 (pass rate 0.85); s002's
    Fisher floor test is P(X >= 3), X ~ hypergeometric(8 repeats, 4 below, 4 drawn) = 17/70."""
    report = compare(
        frame_from(HAND_BASE), frame_from(HAND_CAND), FLOOR, judge_version="j-v1",
        baseline_build="b-base", candidate_build="b-cand", aa_replications=0,
    )  # fmt: skip
    assert (report.candidate_build, report.baseline_build, report.judge_version) == ("b-cand", "b-base", "j-v1")
    assert (report.floor, report.decided_nothing, report.aa_replications, report.aa_block_rate) == (FLOOR, None, 0, None)
    assert report.aa_text() == "false-alarm rate of this procedure on this suite: not simulated"
    optimal = noise_band(frame_from(HAND_BASE)).optimal_repeats()
    assert optimal is not None and report.optimal_repeats == pytest.approx(optimal)
    cand_i, base_i = report.candidate_intervals, report.baseline_intervals
    assert cand_i is not None and base_i is not None
    assert (cand_i.pass_rate, base_i.pass_rate) == (pytest.approx(0.85), pytest.approx(0.9))
    assert (cand_i.mean, base_i.mean) == (pytest.approx(HAND_CAND.mean()), pytest.approx(HAND_BASE.mean()))
    rows = [finding(report, "floor_drop", f"s00{i}") for i in range(5)]
    differences = HAND_CAND.mean(axis=1) - HAND_BASE.mean(axis=1)  # -0.05, 0.075, -0.0875, 0.025, 0.025
    assert [r.statistic for r in rows] == pytest.approx(differences.tolist())
    p = np.array([r.p_value for r in rows], dtype=float)
    assert [r.q_value for r in rows] == pytest.approx(stats.false_discovery_control(p, method="bh").tolist())
    assert "; Fisher floor p=0.243; fell below the floor 0.15" in rows[2].detail
    assert stats.hypergeom.sf(2, 8, 4, 4) == pytest.approx(17 / 70)
    assert all("Fisher floor p=1;" in r.detail or r.detail.endswith("Fisher floor p=1") for r in rows[:2])
    assert list(report.scenarios["verdict"]) == [r.verdict for r in rows]
    assert set(report.scenarios["verdict"]) <= {"ok", "investigate", "block"}


def test_without_a_floor_no_pass_rate_and_the_level_asked_sets_band_and_intervals() -> None:
    _, base, cand = pair(n=20)
    report = compare(frame_from(base), frame_from(cand), None, level=0.9, aa_replications=0)
    band = noise_band(frame_from(base), level=0.9)
    assert report.candidate_intervals is not None and report.baseline_intervals is not None
    assert (report.candidate_intervals.pass_rate, report.baseline_intervals.pass_rate) == (None, None)
    assert report.candidate_intervals.level == report.baseline_intervals.level == 0.9
    assert band.half_width is not None and report.band_half_width == pytest.approx(band.half_width)
    assert report.band_half_width != pytest.approx(noise_band(frame_from(base)).half_width)
    half_widths = band.scenarios.set_index("scenario_id")["half_width"]
    assert report.scenarios["half_width"].to_numpy() == pytest.approx(half_widths.loc[report.scenarios["scenario_id"]].to_numpy())
    assert ", 90% CI [" in finding(report, "mean_drop").detail


def rebuilt_band(base: np.ndarray, seed: int = 77) -> NoiseBand:
    """The baseline's band with a registered rebuild (its scores redrawn, seed `seed`): between-build variance."""
    rebuild = draws(np.clip(base.mean(axis=1) + 0.03, 0, 1), seed)
    return noise_band(frame_from(base), rebuild=frame_from(rebuild))


def test_a_band_with_a_registered_rebuild_is_the_one_used_and_the_mean_finding_names_it() -> None:
    _, base, cand = pair(n=30)
    band = rebuilt_band(base)
    assert band.between_build_var > 0 and band.between_build_df >= 1 and band.half_width is not None
    report = compare(frame_from(base), frame_from(cand), FLOOR, band, aa_replications=0)
    assert report.band_half_width == pytest.approx(band.half_width)
    assert report.band_half_width != pytest.approx(noise_band(frame_from(base)).half_width)
    detail = finding(report, "mean_drop").detail
    assert f"between-build variance {band.between_build_var:.3g} from a registered rebuild" in detail


def test_every_re_evaluation_and_the_aa_simulation_use_the_reports_own_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report's rules, the sensitivity check's two refills (worst score, baseline mean) and the A/A
    simulation all run with the report's floor, band (between-build variance and its df), level, looks
    of the adaptive design and A/A seed: a refill or a simulation under other settings answers another
    question than the report's. The refills run over one scenario more than the report (s003, which
    the candidate lost entirely: every repeat excluded), so their first look is the report's with s003
    put in its place with no repeats and not topped up."""
    # the spies replace the names `compare` calls, in its own module's namespace (reached through the
    # public function: the import gate keeps tests to the package's face)
    namespace = compare.__globals__
    calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {"evaluate": [], "aa_rates": []}

    def spy(name: str, real: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls[name].append((args, kwargs))
            return real(*args, **kwargs)

        return record

    monkeypatch.setitem(namespace, "evaluate", spy("evaluate", namespace["evaluate"]))
    monkeypatch.setitem(namespace, "aa_rates", spy("aa_rates", namespace["aa_rates"]))
    _, base, cand = pair(n=12, seed=4)
    band = rebuilt_band(base)
    candidate = _one_based(exclude(frame_from(cand), ["s003"]))
    candidate = candidate[(candidate["repeat"] <= 3) | candidate["scenario_id"].isin(["s000", "s001"])].copy()
    hit = (candidate["scenario_id"] == "s005") & (candidate["repeat"] == 2)
    candidate.loc[hit, "status"], candidate.loc[hit, "score"] = "excluded", math.nan
    design = AdaptiveDesign()
    report = compare(
        _one_based(frame_from(base)), candidate, FLOOR, band, level=0.9, aa_replications=5, aa_seed=11,
        design=design,
    )  # fmt: skip
    assert "s003" not in set(report.scenarios["scenario_id"]) and len(report.scenarios) == 11
    assert len(calls["evaluate"]) == 3  # the report's, then the two refills
    settings = {"between": band.between_build_var, "between_df": band.between_build_df, "level": 0.9}
    for args, kwargs in calls["evaluate"]:
        assert args[2] == FLOOR and {k: kwargs[k] for k in settings} == settings
        assert kwargs["looks"] is not None and kwargs["looks"].shares == design.shares(0.05 * 0.05)
    first = calls["evaluate"][0][1]["looks"]
    assert first.topped[0].tolist() == [True, True] + [False] * 9
    assert first.interim.n[0].tolist() == [3.0] * 4 + [2.0] + [3.0] * 6  # s005 lost its repeat 2
    present = [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]  # the refills' positions of the report's scenarios
    for _, kwargs in calls["evaluate"][1:]:
        looks = kwargs["looks"]
        assert looks.topped.dtype == bool and looks.topped[0].tolist() == first.topped[0].tolist()[:3] + [False] + first.topped[0].tolist()[3:]
        for field in ("n", "mean", "var", "below"):
            got = np.asarray(getattr(looks.interim, field), dtype=float)
            assert np.array_equal(got[0, present], getattr(first.interim, field)[0], equal_nan=True), field
        absent = [float(getattr(looks.interim, f)[0, 3]) for f in ("n", "mean", "var", "below")]
        assert absent[0] == 0.0 and math.isnan(absent[1]) and math.isnan(absent[2]) and absent[3] == 0.0
    (args, kwargs), = calls["aa_rates"]
    assert args[1] == FLOOR and (kwargs["between"], kwargs["between_df"]) == (settings["between"], settings["between_df"])
    assert (kwargs["replications"], kwargs["seed"], kwargs["design"]) == (5, 11, design)


# --- the policy finding and the reasons: every scenario named, at most ten, the rest counted -------------


def policy_detail(failing: list[str], outputs: int, baseline: str) -> str:
    shown = [f"{sid} (candidate 1 of 5 attempts with output, {baseline})" for sid in failing]
    more = f"; and {len(shown) - 10} more" if len(shown) > 10 else ""
    return (
        f"policy failures in the candidate in {len(failing)} scenario(s), {len(failing)} of {outputs} attempts "
        f"with output (baseline 0 of {outputs}): {'; '.join(shown[:10])}{more}; any policy failure blocks, "
        "whatever the baseline did and whatever the scores"
    )


@pytest.mark.parametrize("failing", [10, 11])
def test_the_policy_finding_names_ten_scenarios_and_counts_the_rest(failing: int) -> None:
    _, base, cand = pair(n=12)
    candidate = frame_from(cand)
    candidate.loc[candidate["repeat"] == 0, "policy_failures"] = [1] * failing + [0] * (12 - failing)
    policy = finding(compare(frame_from(base), candidate, FLOOR, aa_replications=0), "policy_failures")
    ids = [f"s{i:03d}" for i in range(failing)]
    assert (policy.verdict, policy.rule, policy.statistic) == ("block", "any", float(failing))
    assert policy.detail == policy_detail(ids, 60, "baseline 0 of 5")


def test_a_policy_failure_where_the_baseline_has_no_such_scenario_or_no_baseline_says_n_a() -> None:
    _, base, cand = pair(n=6)
    candidate = frame_from(cand, [f"s{i:03d}" for i in range(5)] + ["new"])
    candidate.loc[candidate["scenario_id"] == "new", "policy_failures"] = [1, 0, 0, 0, 0]
    policy = finding(compare(frame_from(base), candidate, FLOOR, aa_replications=0), "policy_failures")
    assert policy.detail == policy_detail(["new"], 30, "baseline n/a")
    alone = finding(compare(None, candidate, FLOOR), "policy_failures")
    assert alone.verdict == "block"
    assert alone.detail == policy_detail(["new"], 30, "baseline n/a").replace("(baseline 0 of 30)", "(no baseline)")


def test_a_policy_check_without_failures_counts_zero_and_without_output_says_no_check_ran() -> None:
    _, base, cand = pair(n=10)
    clean = finding(compare(frame_from(base), frame_from(cand), FLOOR, aa_replications=0), "policy_failures")
    assert (clean.verdict, clean.statistic, clean.rule) == ("ok", 0.0, "")
    assert clean.detail == (
        "no policy failure in the candidate: 0 of 50 attempts with output (baseline 0 of 50 attempts with "
        "output had one)"
    )
    candidate = exclude(frame_from(cand), [f"s{i:03d}" for i in range(10)]).assign(has_output=False)
    silent = finding(compare(frame_from(base), candidate, FLOOR), "policy_failures")
    assert (silent.verdict, silent.statistic) == ("info", None)
    assert silent.detail == "the candidate has no attempt with output: no policy check ran"


@pytest.mark.parametrize("named", [10, 11])
def test_a_reason_names_ten_scenarios_and_counts_the_rest(named: int) -> None:
    _, base, cand = pair(n=12)
    report = compare(frame_from(base), frame_from(cand), FLOOR, aa_replications=0)
    blocks = tuple(
        Finding("floor_drop", f"s{i:03d}", -0.5, 1e-9, 1e-9, "block", "collapsed", "collapse") for i in range(named)
    )
    reasons = replace(report, findings=blocks).reasons()
    assert len(reasons) == 1 and reasons[0].scenario_ids == tuple(f"s{i:03d}" for i in range(named))
    shown = ", ".join(f"s{i:03d}" for i in range(10)) + (" and 1 more" if named == 11 else "")
    label = "scenario fell below the rubric floor (mean or most repeats) where the baseline's did not (Holm)"
    assert reasons[0].message == f"{label}: {shown}"


# --- judge versions: which build, which version -----------------------------------------------------------


@pytest.mark.parametrize("role", ["candidate", "baseline"])
def test_a_build_mixing_judge_versions_is_named_in_the_refusal(role: str) -> None:
    _, base, cand = pair(n=10)
    frames = {"baseline": frame_from(base), "candidate": frame_from(cand)}
    frames[role] = frames[role].assign(judge_version=["v1", "v2"] * 25)
    with pytest.raises(CrossJudgeVersionError) as refusal:
        compare(frames["baseline"], frames["candidate"], FLOOR)
    assert str(refusal.value) == f"the {role}'s verdicts span judge versions v1, v2; a report compares one only"


def test_a_candidate_under_another_judge_version_than_asked_is_refused_naming_both() -> None:
    _, base, cand = pair(n=10)
    with pytest.raises(CrossJudgeVersionError) as refusal:
        compare(frame_from(base), frame_from(cand).assign(judge_version="v2"), FLOOR, judge_version="v1")
    assert str(refusal.value) == "the candidate's verdicts are under judge version v2, not v1"


def test_the_judge_version_is_the_baselines_when_only_the_baseline_names_one() -> None:
    _, base, cand = pair(n=10)
    report = compare(frame_from(base).assign(judge_version="v1"), frame_from(cand), FLOOR, aa_replications=0)
    assert report.judge_version == "v1" and report.source.startswith("judge v1, ")


# --- a report that decided nothing: the exact reason, the exclusions row, each build's intervals --------


WHY_NOTHING = {
    # case: (baseline and candidate from the A/A pair, with build names?, the reason)
    "baseline without verdicts, named": (
        lambda b, c: (pd.DataFrame(), c), True, "no verdicts for the baseline b1: decides nothing"
    ),
    "baseline without verdicts, unnamed": (
        lambda b, c: (pd.DataFrame(), c), False, "no verdicts for the baseline: decides nothing"
    ),
    "candidate excluded, named": (
        lambda b, c: (b, exclude(c, list(c["scenario_id"]))), True,
        "every repeat of the candidate b2 was excluded: decides nothing",
    ),
    "one scenario": (
        lambda b, c: (b.head(5), c.head(5)), False,
        "1 scenario(s) with scored repeats in both builds: no inference over scenarios is possible (need at "
        "least 2): decides nothing",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(WHY_NOTHING))
def test_a_report_that_decided_nothing_says_exactly_why_and_does_not_run_the_sensitivity(case: str) -> None:
    make, named, why = WHY_NOTHING[case]
    _, base, cand = pair(n=10)
    baseline, candidate = make(frame_from(base), frame_from(cand))
    names = {"baseline_build": "b1", "candidate_build": "b2"} if named else {}
    report = compare(baseline, candidate, FLOOR, **names)  # type: ignore[arg-type]
    assert report.decided_nothing == why
    excl = finding(report, "exclusions")
    assert excl.detail.endswith(f"; sensitivity not run: {why}") and excl.rule == ""
    assert [r.severity for r in report.reasons()] == ["none"]
    if case.startswith("baseline without verdicts"):
        assert report.baseline_intervals is None and report.candidate_intervals is not None
        assert excl.detail.startswith(
            "excluded repeats: baseline 0/0 (n/a), candidate 0/50 (0.0%); two-sided Fisher p=n/a for a change in rate"
        )


def test_two_scenarios_in_common_are_enough_to_decide() -> None:
    report = compare(frame_from(HAND_BASE[:2]), frame_from(HAND_CAND[:2]), FLOOR, aa_replications=0)
    assert report.decided_nothing is None and len(report.scenarios) == 2
    assert finding(report, "evidence").detail.startswith("insufficient evidence: 2 scenarios compared (need 5)")


def test_a_report_without_a_baseline_carries_the_candidates_own_intervals() -> None:
    """One scenario of four repeats, one of them below the floor: pass rate 3/4, mean 0.55."""
    report = compare(None, frame_from(np.array([[0.1, 0.6, 0.7, 0.8]])), FLOOR)
    assert report.decided_nothing == "no baseline: decides nothing" and report.baseline_intervals is None
    intervals = report.candidate_intervals
    assert intervals is not None and intervals.n_scenarios == 1
    assert (intervals.mean, intervals.pass_rate, intervals.k) == (pytest.approx(0.55), pytest.approx(0.75), 4)


def test_the_pass_rates_of_a_report_that_decided_nothing_count_each_builds_repeats_below_the_floor() -> None:
    base = frame_from(np.array([[0.9, 0.8, 0.9], [0.2, 0.3, 0.2], [0.5, 0.5, 0.6]]))
    cand = frame_from(np.array([[0.4, 0.5, 0.4], [0.6, 0.7, 0.6]]), ["s000", "other"])
    report = compare(base, cand, 0.25)  # one scenario in common: decides nothing
    assert report.decided_nothing is not None
    assert report.candidate_intervals is not None and report.baseline_intervals is not None
    assert report.candidate_intervals.pass_rate == pytest.approx(1.0)  # no candidate repeat below 0.25
    assert report.baseline_intervals.pass_rate == pytest.approx((1 + 1 / 3 + 1) / 3)  # s001: 0.2, 0.2 below


# --- which scenarios are compared, and the exclusions row ----------------------------------------------


def test_a_scenario_the_baseline_never_scored_is_not_compared() -> None:
    _, base, cand = pair(n=10)
    baseline = all_failed(frame_from(base)).where(lambda f: f["scenario_id"] == "s004", frame_from(base))
    report = compare(baseline, frame_from(cand), FLOOR, aa_replications=0)
    assert "s004" not in set(report.scenarios["scenario_id"]) and len(report.scenarios) == 9
    assert finding(report, "evidence").statistic == 9.0


def test_exclusions_in_both_builds_are_compared_with_fisher_by_hand() -> None:
    """Baseline 5 of 50 excluded (10%), candidate 15 of 50 (30%): change +0.2, two-sided Fisher exact on
    [[15, 35], [5, 45]]."""
    _, base, cand = pair(n=10)
    report = compare(
        exclude(frame_from(base), ["s009"]), exclude(frame_from(cand), ["s000", "s001", "s002"]), FLOOR,
        aa_replications=0,
    )  # fmt: skip
    excl = finding(report, "exclusions")
    assert excl.statistic == pytest.approx(0.2)
    assert excl.p_value == pytest.approx(stats.fisher_exact([[15, 35], [5, 45]]).pvalue)
    assert excl.detail.startswith("excluded repeats: baseline 5/50 (10.0%), candidate 15/50 (30.0%);")


# --- the sensitivity check: over the scenarios the baseline scored, and what it says when nothing flips ----


def test_the_sensitivity_counts_the_exclusions_of_scenarios_the_baseline_scored_and_says_when_it_holds() -> None:
    """The baseline scored nothing in s000 and once in s001; the candidate lost two repeats in s000 and
    one each in s001 and s002: the check refills the 2 of s001 and s002 (s000 cannot be compared). The
    baseline's one-repeat s001 makes the evidence thin (investigate) whatever the refill, a worst score of
    0.75 (near the scores) blocks nothing: the verdict holds."""
    _, base, cand = pair(n=10)
    baseline = frame_from(base)
    baseline.loc[baseline["scenario_id"] == "s000", ["status", "score"]] = ["failed", math.nan]
    baseline.loc[(baseline["scenario_id"] == "s001") & (baseline["repeat"] > 0), ["status", "score"]] = [
        "failed",
        math.nan,
    ]
    candidate = frame_from(cand)
    lost = ((candidate["scenario_id"] == "s000") & (candidate["repeat"] < 2)) | (
        candidate["scenario_id"].isin(["s001", "s002"]) & (candidate["repeat"] == 0)
    )
    candidate.loc[lost, ["status", "score"]] = ["excluded", math.nan]
    report = compare(baseline, candidate, FLOOR, worst_score=0.75, aa_replications=0)
    assert report.verdict == "investigate"
    excl = finding(report, "exclusions")
    assert excl.detail.endswith(
        "; sensitivity (2 excluded candidate repeats) — filled with the worst score: investigate; filled with "
        "the baseline mean: investigate; the score verdict (investigate) holds"
    )
    assert excl.rule == ""


# --- the mean and concentrated findings ------------------------------------------------------------------


def test_a_mean_drop_without_a_band_investigates_and_asks_for_repeats() -> None:
    """One repeat per scenario: the baseline has no noise band; a significant drop investigates under
    the rule `no_band`, whose advice is to run at least two repeats."""
    _, base, cand = pair(n=30)
    report = compare(frame_from(base[:, :1]), frame_from(np.clip(cand[:, :1] - 0.05, 0, 1)), None, aa_replications=0)
    mean = finding(report, "mean_drop")
    assert (mean.verdict, mean.rule) == ("investigate", "no_band") and "noise band +/-n/a" in mean.detail
    advice = [r.advice for r in report.reasons() if r.finding == "mean_drop"]
    assert advice == ["run at least 2 repeats per scenario so the baseline has a noise band"]


def test_identical_differences_have_no_p_values_and_the_detail_says_so() -> None:
    _, base, _ = pair(n=20)
    detail = finding(compare(frame_from(base), frame_from(base - 0.3), None, aa_replications=0), "mean_drop").detail
    assert (
        "paired t one-sided p=n/a; p(drop beyond band, band uncertainty included)=n/a; every scenario moved alike "
        "(zero spread): compared to the band directly; blocks under weighted Holm"
    ) in detail


@pytest.mark.parametrize(("drop", "over"), [(0.15, 30), (0.3, 29)])
def test_the_concentrated_test_is_rerun_without_a_scenario_blocked_alone_only_when_it_rejected(
    drop: float, over: int
) -> None:
    """s003 falls alone and blocks on its own drop. At 0.15 the concentrated test over all 30 scenarios
    does not reject and is reported as it is; at 0.3 it rejects because of s003 alone, so it is run
    again over the other 29, where it no longer holds (s003 is already named)."""
    _, base, cand = pair(n=30)
    cand[3] = np.clip(cand[3] - drop, 0, 1)
    report = compare(frame_from(base), frame_from(cand), FLOOR, aa_replications=0)
    assert finding(report, "floor_drop", "s003").verdict == "block"
    conc = finding(report, "concentrated_drop")
    assert conc.verdict == "ok" and conc.statistic is not None
    assert f"median-centred differences = {conc.statistic:.3g} over {over} scenarios" in conc.detail


def test_a_scenario_not_topped_up_cannot_block_on_its_first_look_and_a_topped_up_one_uses_all_its_repeats() -> None:
    """Adaptive repeats (start 3 of 5): a scenario's own tests spend no alpha at the first look. s004 was
    not topped up and all three of its first-look repeats fell below the floor, against none of the
    baseline's five (Fisher p 1 / C(8, 3) = 0.018 on its own): its drop and floor p are 1, none of its
    own rules blocks it (a plan would have topped it up; the suite's concentrated test, which spends its
    share at the first look, still names it). s001 was topped up and dropped by 0.4 in all five repeats:
    its p is its five repeats' own, undivided, exactly as a one-look comparison of the same repeats gives
    it, and it blocks on its drop. s005 has no first-look repeat at all (its two verdicts are the
    top-up's): no first look to combine, and it is still compared."""
    design = AdaptiveDesign()
    _, base, cand = pair(n=12, seed=4)
    cand[4, :3] = 0.1
    cand[1] -= 0.4
    candidate = _one_based(frame_from(cand))
    topped = candidate["scenario_id"].isin(["s000", "s001", "s005"])
    keep = ((candidate["repeat"] <= 3) | topped) & ((candidate["scenario_id"] != "s005") | (candidate["repeat"] > 3))
    report = compare(_one_based(frame_from(base)), candidate[keep], FLOOR, design=design, aa_replications=0)
    s004 = finding(report, "floor_drop", "s004")
    assert "moderated t one-sided p=1," in s004.detail and "Fisher floor p=1;" in s004.detail
    assert s004.rule not in ("drop", "floor", "collapse")
    one_look = compare(_one_based(frame_from(base)), candidate[keep], FLOOR, aa_replications=0)
    s001 = finding(report, "floor_drop", "s001")
    assert s001.p_value == finding(one_look, "floor_drop", "s001").p_value < 1e-4
    assert s001.verdict == "block" and s001.rule == "drop"
    assert "s005" in set(report.scenarios["scenario_id"])


def test_the_sensitivity_names_both_fills_when_both_flip_the_verdict() -> None:
    """Seven of 30 scenarios dropped by 0.08 and lost four of their five repeats: with one scored repeat
    each they make the evidence thin (investigate). Filled with the worst score they block; filled with
    the baseline's mean the drop and the thinness are gone (ok): the verdict flips both ways."""
    _, base, cand = pair(n=30, seed=3)
    dropped = [1, 4, 8, 12, 16, 20, 24]
    cand[dropped] -= 0.08
    candidate = frame_from(cand)
    lost = candidate["scenario_id"].isin([f"s{i:03d}" for i in dropped]) & (candidate["repeat"] >= 1)
    candidate.loc[lost, ["status", "score"]] = ["excluded", math.nan]
    report = compare(frame_from(base), candidate, None, aa_replications=0)
    assert report.verdict == "investigate" and finding(report, "evidence").rule == "insufficient"
    excl = finding(report, "exclusions")
    assert excl.detail.endswith(
        "— filled with the worst score: block; filled with the baseline mean: ok; the score verdict FLIPS from "
        "investigate when filled with the worst score and the baseline mean"
    )
    assert excl.rule == "sensitivity_flip"


def test_a_scenario_blocked_by_the_floor_test_alone_is_left_out_of_the_concentrated_retest() -> None:
    """20 repeats a scenario (skills seed 8, draws seeds 1 and 2). s003: the baseline scores 0.5 twenty
    times, the candidate 0.1 twelve times and 1.0 eight (mean 0.46: no significant drop), so only the
    Fisher floor test blocks it: P(X >= 12), X ~ hypergeometric(40, 12, 20) = C(20, 12) / C(40, 12).
    s010 and s011 drop by 0.3 and block on their drops; the concentrated test rejects, and is run again
    without all three scenarios blocked on their own: over 27 scenarios."""
    skills = np.random.default_rng(8).uniform(0.6, 0.9, 30)
    base, cand = draws(skills, 1, k=20), draws(skills, 2, k=20)
    base[3], cand[3] = 0.5, [0.1] * 12 + [1.0] * 8
    cand[[10, 11]] -= 0.3
    report = compare(frame_from(base), frame_from(cand), FLOOR, aa_replications=0)
    s003 = finding(report, "floor_drop", "s003")
    assert (s003.verdict, s003.rule) == ("block", "floor_test")
    assert f"Fisher floor p={math.comb(20, 12) / math.comb(40, 12):.3g};" in s003.detail
    assert [finding(report, "floor_drop", sid).rule for sid in ("s010", "s011")] == ["drop", "drop"]
    assert " over 27 scenarios, " in finding(report, "concentrated_drop").detail


def test_a_scenario_lost_with_its_only_attempt_is_refilled_by_the_sensitivity_check() -> None:
    """The candidate ran s000 once and that attempt was excluded: the report cannot compare s000 (ok), but
    the sensitivity check refills it as one repeat: at the worst score (0) the report would block, at the
    baseline's mean nothing moves."""
    _, base, cand = pair(n=20)
    candidate = frame_from(cand)
    candidate = candidate[(candidate["scenario_id"] != "s000") | (candidate["repeat"] == 0)].copy()
    candidate.loc[candidate["scenario_id"] == "s000", ["status", "score"]] = ["excluded", math.nan]
    report = compare(frame_from(base), candidate, FLOOR, aa_replications=0)
    assert report.verdict == "ok" and "s000" not in set(report.scenarios["scenario_id"])
    assert finding(report, "exclusions").detail.endswith(
        "sensitivity (1 excluded candidate repeats) — filled with the worst score: block; filled with the "
        "baseline mean: ok; the score verdict FLIPS from ok when filled with the worst score"
    )


def test_a_scenario_the_moderated_t_cannot_test_has_no_p_or_q_and_bh_runs_over_the_others() -> None:
    """Twenty scenarios of two repeats whose spreads range over three orders of magnitude (seed 1): the
    variance prior has less than one degree of freedom, so s000, one repeat in each build, has nothing
    to test with. It gets no p and no q; the other scenarios' q are Benjamini-Hochberg over their 19 p."""
    rng = np.random.default_rng(1)
    sds, means = np.exp(rng.uniform(-7, -0.5, 20)), rng.uniform(0.3, 0.7, 20)
    base, cand = (np.clip(means[:, None] + sds[:, None] * rng.standard_normal((20, 2)), 0, 1) for _ in range(2))
    frames = [frame_from(x) for x in (base, cand)]
    baseline, candidate = (f[(f["scenario_id"] != "s000") | (f["repeat"] == 0)] for f in frames)
    report = compare(baseline, candidate, None, aa_replications=0)
    s000 = finding(report, "floor_drop", "s000")
    assert (s000.p_value, s000.q_value, s000.verdict) == (None, None, "ok")
    rows = report.scenarios.set_index("scenario_id")
    assert rows["q_value"].isna().tolist() == [True] + [False] * 19
    tested = rows["p_value"].to_numpy(dtype=float)[1:]
    assert rows["q_value"].to_numpy(dtype=float)[1:] == pytest.approx(stats.false_discovery_control(tested))


def test_an_investigate_without_a_registered_rebuild_names_the_rebuild_that_would_settle_it() -> None:
    """No rebuild of the baseline is registered (its band is repeat noise only): every investigate
    reason's advice says to register an unchanged rebuild of the baseline, by name and command; with a
    rebuild's between-build variance in the band, no reason says so."""
    skills, base, _ = pair(n=60)
    investigated = []
    for drop in np.linspace(0.002, 0.04, 20):
        report = compare(
            frame_from(base),
            frame_from(draws(skills - drop, 3)),
            FLOOR,
            baseline_build="agent-base",
            candidate_build="c",
        )
        reasons = [r for r in report.reasons() if r.severity == "investigate"]
        investigated += reasons
        for r in reasons:
            assert r.advice is not None and "register an unchanged rebuild of agent-base" in r.advice, r
            assert "rebuild_of: agent-base" in r.advice and "evaltrack build add" in r.advice
    assert investigated, "no drop in the sweep was investigated"
    band = noise_band(frame_from(base), rebuild=frame_from(draws(skills, 9)))
    assert band.between_build_df
    for drop in np.linspace(0.002, 0.04, 20):
        report = compare(
            frame_from(base), frame_from(draws(skills - drop, 3)), FLOOR, band, baseline_build="agent-base"
        )
        assert all("register an unchanged rebuild" not in (r.advice or "") for r in report.reasons())
