"""Capability reports: a candidate build against its baseline under ONE judge version (docs/methods.md).

Findings, each a row of the report:

- `policy_failures`: any policy failure in the candidate, over attempts that produced output, blocks,
  whatever the baseline did and whatever the scores (design rule: no score outranks a policy failure);
- `evidence`: too few scenarios, too many thin scenarios or too many unscored verdicts is
  `investigate` ("insufficient evidence: ..."), never allow;
- `floor_drop` (one row per scenario): the moderated-t drop, the Fisher floor test and the collapse
  rule, blocking under weighted Holm; Benjamini-Hochberg-only drops investigate;
- `concentrated_drop`: some scenarios fell more than the rest, whatever the mean did (blocks);
- `mean_drop`: beyond the noise band (with the band's own uncertainty) blocks, a significant drop
  inside it investigates;
- `exclusions` with a sensitivity check and `p10`: reported, not gated.

The rules themselves live in `_rules` (shared with the report's own A/A simulation, `_aa`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from ._aa import AA_REPLICATIONS, AA_SEED, aa_rates
from ._adaptive import AdaptiveDesign, plan_top_ups
from ._bootstrap import mean_interval, quantile_interval
from ._evidence import Reason, Severity
from ._findings import (
    CONCENTRATED,
    EVIDENCE,
    EXCLUSIONS,
    FLOOR_DROP,
    MEAN_DROP,
    P10,
    POLICY_FAILURES,
    Finding,
    FindingVerdict,
    figure,
    fmt,
)
from ._frame import judge_versions, scenario_table, validate_verdicts
from ._intervals import SuiteIntervals, suite_intervals
from ._noise import NoiseBand, band_from_table
from ._reliability import repeat_outcomes
from ._rules import (
    DRIVER_Z,
    MAX_THIN_SHARE,
    MAX_UNSCORED_SHARE,
    MIN_REPEATS,
    MIN_SCENARIOS,
    Budget,
    Concentrated,
    Looks,
    Moments,
    RuleOutcome,
    concentrated_without,
    evaluate,
    holm_inputs,
    weighted_holm,
)

ReportVerdict = Literal["block", "investigate", "ok", "none"]
SCENARIO_PLOT_COLUMNS = (
    "scenario_id",
    "baseline_mean",
    "candidate_mean",
    "difference",
    "half_width",
    "p_value",
    "q_value",
    "verdict",
)
_RULE_ORDER = ("collapse", "floor_test", "drop", "concentrated_driver", "bh")
_RULE_LABELS = {
    "collapse": "scenario fell below the rubric floor (mean or most repeats) where the baseline's did not (Holm)",
    "floor_test": "more repeats below the rubric floor than the baseline (Fisher exact, Holm)",
    "drop": "per-scenario drop (moderated t, Holm)",
    "concentrated_driver": "concentrated drop: these scenarios fell more than the rest (chi-bar-squared, Holm)",
    "bh": "per-scenario drop significant after Benjamini-Hochberg only",
}
_ADVICE = {
    "bh": "top up repeats for these scenarios and re-run the report",
    "drop_within_noise": "top up repeats (more repeats narrow the noise band) and re-run the report",
    "no_band": "run at least 2 repeats per scenario so the baseline has a noise band",
    "insufficient": "re-run the failed or excluded attempts, or add repeats/scenarios, then re-run the report",
}


class CrossJudgeVersionError(ValueError):
    """Verdicts of two judge versions were about to be compared. They never are (docs/methods.md: judge versions)."""

    @classmethod
    def for_versions(
        cls, baseline_build: str | None, wanted: str, found: Sequence[str]
    ) -> CrossJudgeVersionError:
        """The refusal message: names both versions and the two ways to fix it."""
        build = baseline_build or "the baseline"
        have = ", ".join(found) or "no judge version"
        return cls(
            f"{build} has no verdicts under judge version {wanted} (it has {have}); verdicts of different "
            f"judge versions are never compared. Re-judge {build}'s stored outputs with {wanted} (one "
            f"materialization of judge_verdicts for {build}), or run the bridge between the versions."
        )


@dataclass(frozen=True)
class CapabilityReport:
    """A candidate-vs-baseline report under one judge version; satisfies the `Evidence` protocol.

    `decided_nothing` holds the reason when the scores could not be compared (no baseline, no scored
    verdicts, every repeat excluded, fewer than two scenarios in common); such a report still carries
    the policy finding, which blocks on any candidate policy failure. `scenarios` has one row per
    scenario in both builds (`SCENARIO_PLOT_COLUMNS`). `n_judge_versions` is the number of judge
    versions the release's error budget was split over; `aa_block_rate` / `aa_flag_rate` are this
    procedure's simulated false-alarm rates on the baseline's suite shape (None when not simulated).
    """

    candidate_build: str | None
    baseline_build: str | None
    judge_version: str | None
    floor: float | None
    alpha: float
    q: float
    n_judge_versions: int
    band_half_width: float | None
    optimal_repeats: float | None
    aa_block_rate: float | None
    aa_flag_rate: float | None
    aa_replications: int
    aa_seed: int
    decided_nothing: str | None
    findings: tuple[Finding, ...]
    scenarios: pd.DataFrame
    candidate_intervals: SuiteIntervals | None = None
    baseline_intervals: SuiteIntervals | None = None
    # whether the noise band holds a registered rebuild's between-build variance (False: repeat noise
    # only, and an investigate reason names the rebuild that would settle it)
    rebuild_in_band: bool = True

    @property
    def source(self) -> str:
        """Who this evidence is: the judge version and the two builds."""
        judge = self.judge_version or "(unnamed judge version)"
        return f"judge {judge}, {self.candidate_build or 'candidate'} vs {self.baseline_build or 'baseline'}"

    @property
    def verdict(self) -> ReportVerdict:
        """block > none (decided nothing) > investigate > ok, over all findings."""
        verdicts = {f.verdict for f in self.findings}
        if "block" in verdicts:
            return "block"
        if self.decided_nothing is not None:
            return "none"
        return "investigate" if "investigate" in verdicts else "ok"

    def aa_text(self) -> str:
        """One line on this report's own simulated false-alarm rates."""
        if self.aa_block_rate is None or self.aa_flag_rate is None:
            return "false-alarm rate of this procedure on this suite: not simulated"
        return (
            f"false-alarm rate of this procedure on this suite (A/A simulation from the baseline, "
            f"{self.aa_replications} replications, seed {self.aa_seed}): block {self.aa_block_rate:.1%}, "
            f"flag {self.aa_flag_rate:.1%}"
        )

    def reasons(self) -> tuple[Reason, ...]:
        """Block/investigate findings grouped by signal and rule, each naming its scenarios."""
        reasons = (
            [Reason("none", self.source, "report", self.decided_nothing)] if self.decided_nothing else []
        )
        groups: dict[tuple[str, str, str], list[Finding]] = {}
        for finding in self.findings:
            if finding.finding == CONCENTRATED and finding.verdict == "block":
                continue  # named by its driver scenarios' group
            if finding.verdict in ("block", "investigate") or finding.rule == "sensitivity_flip":
                groups.setdefault((finding.finding, finding.verdict, finding.rule), []).append(finding)
        reasons += [self._reason(group) for group in groups.values()]
        return tuple(reasons)

    def _reason(self, group: list[Finding]) -> Reason:
        first = group[0]
        severity: Severity = "block" if first.verdict == "block" else "info"
        if first.verdict == "investigate":
            severity = "investigate"
        ids = tuple(f.scenario_id for f in group if f.scenario_id is not None)
        advice = _ADVICE.get(first.rule)
        if (
            severity == "investigate"
            and not self.rebuild_in_band
            and first.rule not in ("insufficient", "no_band")
        ):
            baseline = self.baseline_build or "<baseline>"
            rebuild = (
                f"register an unchanged rebuild of {baseline} (a manifest with `rebuild_of: {baseline}`: "
                f"`evaltrack build add FILE`, then `evaltrack run --build ID`) so the noise band holds the "
                f"run-to-run variance; nothing measures it yet"
            )
            advice = f"{rebuild}; or {advice}" if advice else rebuild
        if not ids:
            return Reason(severity, self.source, first.finding, first.detail, (), advice)
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        label = _RULE_LABELS.get(first.rule, first.finding)
        if first.rule == "concentrated_driver":
            summary = next((f for f in self.findings if f.finding == CONCENTRATED), None)
            label += f", p={fmt(summary.p_value if summary else None)}"
        return Reason(severity, self.source, first.finding, f"{label}: {shown}", ids, advice)


def compare(
    baseline: pd.DataFrame | None,
    candidate: pd.DataFrame,
    floor: float | None,
    band: NoiseBand | None = None,
    *,
    alpha: float = 0.05,
    q: float = 0.05,
    n_judge_versions: int = 1,
    judge_version: str | None = None,
    baseline_build: str | None = None,
    candidate_build: str | None = None,
    n_resamples: int = 2000,
    level: float = 0.95,
    worst_score: float = 0.0,
    rng: np.random.Generator | int = 0,
    aa_replications: int = AA_REPLICATIONS,
    aa_seed: int = AA_SEED,
    design: AdaptiveDesign | None = None,
) -> CapabilityReport:
    """Compare `candidate` with `baseline` verdicts of one judge version (docs/methods.md).

    `alpha` (blocking) and `q` (investigate-only signals) are the RELEASE's budget, split evenly over
    `n_judge_versions` reports. `band` is the baseline's noise band (computed from `baseline` when
    None; pass one built with a registered rebuild to include run-to-run variance). `floor` None: the
    rubric has no floor. `rng` seeds the bootstrap intervals, `aa_seed` the A/A simulation
    (`aa_replications` 0 skips it). `design`: the candidate ran with adaptive repeats under this design
    (its first look = repeats numbered up to `design.start`; a scenario with a higher repeat number was
    topped up), so every p-value combines the two looks (`_rules.Looks`); None: one look.

    Never raises for missing data: no baseline, no verdicts, nothing scored, every repeat excluded or
    fewer than two scenarios in common give a report whose `decided_nothing` says why. Raises
    `CrossJudgeVersionError` when the frames (or `judge_version`) name different judge versions, and
    `VerdictFrameError` for malformed frames.
    """
    budget = Budget(alpha_block=alpha, alpha_flag=q, n_judge_versions=n_judge_versions)
    settings = _Settings(floor, budget, n_resamples, level, worst_score, aa_replications, aa_seed)
    cand = validate_verdicts(candidate)
    base = None if baseline is None else validate_verdicts(baseline)
    labels = _Labels(
        candidate_build, baseline_build, _judge_version(judge_version, base, cand, baseline_build)
    )
    cand_s = scenario_table(cand, floor)
    base_s = None if base is None else scenario_table(base, floor)
    policy = _policy_finding(base_s, cand_s)
    if base_s is None:
        return _nothing(
            labels,
            settings,
            "no baseline: decides nothing",
            [policy],
            (build_intervals(cand_s, floor, level, cand), None),
        )
    paired = _paired(base_s, cand_s)
    why = _why_nothing(base_s, cand_s, paired, labels)
    if why is not None:
        findings = [policy, _exclusion_finding(base_s, cand_s, f"sensitivity not run: {why}")]
        intervals = (build_intervals(cand_s, floor, level, cand), build_intervals(base_s, floor, level, base))
        return _nothing(labels, settings, why, findings, intervals)
    band = band if band is not None else band_from_table(base_s, level=level)
    between, between_df = band.between_build_var, band.between_build_df
    base_m, cand_m = _moments(base_s, paired.index), _moments(cand_s, paired.index)
    looks = None if design is None else _looks(cand, paired.index, floor, design, budget)
    outcome = evaluate(
        base_m, cand_m, floor, budget, between=between, between_df=between_df, level=level, looks=looks
    )
    p, w = holm_inputs(outcome.tests, outcome.p_beyond, outcome.concentrated, budget)
    rejected = weighted_holm(p, w, budget.report_alpha)[0]
    m = len(paired)
    concentrated = _beyond_blocked(outcome, rejected, m, budget)
    per = _per_scenario(outcome, rejected, m, budget, concentrated)
    generator = np.random.default_rng(rng)
    diff = outcome.tests.difference[0]
    sensitivity, flips = _sensitivity(
        base_s, cand_s, paired.index, outcome, settings, between, between_df, looks
    )
    aa = aa_rates(
        base_s.loc[paired.index],
        floor,
        budget,
        between=between,
        between_df=between_df,
        replications=aa_replications,
        seed=aa_seed,
        design=design,
    )
    findings = [
        policy,
        _evidence_finding(outcome, base_s, cand_s),
        _mean_finding(outcome, bool(rejected[0]), budget, band, diff, settings, generator),
        _concentrated_finding(concentrated, bool(rejected[1]), per, budget),
        _exclusion_finding(base_s, cand_s, sensitivity, flips),
        _p10_finding(diff, settings, generator),
        *_scenario_findings(per, paired, floor),
    ]
    return CapabilityReport(
        candidate_build=labels.candidate,
        baseline_build=labels.baseline,
        judge_version=labels.judge_version,
        floor=floor,
        alpha=alpha,
        q=q,
        n_judge_versions=n_judge_versions,
        band_half_width=figure(outcome.mean.band[0]),
        optimal_repeats=band.optimal_repeats(),
        aa_block_rate=None if aa is None else aa.block,
        aa_flag_rate=None if aa is None else aa.flag,
        aa_replications=0 if aa is None else aa.replications,
        aa_seed=aa_seed,
        decided_nothing=None,
        findings=tuple(findings),
        scenarios=_scenario_frame(paired, per, band),
        candidate_intervals=build_intervals(cand_s, floor, level, cand),
        baseline_intervals=build_intervals(base_s, floor, level, base),
        rebuild_in_band=bool(between_df),
    )


@dataclass(frozen=True)
class _Settings:
    floor: float | None
    budget: Budget
    n_resamples: int
    level: float
    worst_score: float
    aa_replications: int
    aa_seed: int


@dataclass(frozen=True)
class _Labels:
    candidate: str | None
    baseline: str | None
    judge_version: str | None


def _judge_version(
    given: str | None, base: pd.DataFrame | None, cand: pd.DataFrame, baseline_build: str | None
) -> str | None:
    """The one judge version both frames are under; raises `CrossJudgeVersionError` otherwise."""
    cand_versions = judge_versions(cand)
    base_versions = () if base is None else judge_versions(base)
    for role, versions in (("candidate", cand_versions), ("baseline", base_versions)):
        if len(versions) > 1:
            raise CrossJudgeVersionError(
                f"the {role}'s verdicts span judge versions {', '.join(versions)}; a report compares one only"
            )
    wanted = given or (cand_versions[0] if cand_versions else None)
    if cand_versions and cand_versions[0] != wanted:
        raise CrossJudgeVersionError(
            f"the candidate's verdicts are under judge version {cand_versions[0]}, not {wanted}"
        )
    if base_versions and wanted is not None and base_versions[0] != wanted:
        raise CrossJudgeVersionError.for_versions(baseline_build, wanted, base_versions)
    return wanted or (base_versions[0] if base_versions else None)


def build_intervals(
    table: pd.DataFrame | None, floor: float | None, level: float, frame: pd.DataFrame | None = None
) -> SuiteIntervals | None:
    """A build's suite mean, pass rate and pass^k with their intervals, from its `scenario_table`
    (a repeat passes when scored and not below the floor; no floor: no pass rate) and, for pass^k, its
    verdict `frame`'s repeat outcomes (`repeat_outcomes`: the one definition, excluded scenarios left out)."""
    if table is None or len(table) == 0:
        return None
    n = table["n_scored"].to_numpy(dtype=float)
    passes = None if floor is None else n - table["n_below_floor"].to_numpy(dtype=float)
    if floor is None or frame is None:
        return suite_intervals(table["mean"].to_numpy(dtype=float), passes, n, level)
    outcomes = repeat_outcomes(frame, floor).reindex(table.index)
    kept = ~outcomes["excluded"].fillna(True).to_numpy(dtype=bool)
    return suite_intervals(
        table["mean"].to_numpy(dtype=float),
        np.where(kept, outcomes["passed"].fillna(0).to_numpy(dtype=float), 0.0),
        n,
        level,
        failed=np.where(kept, outcomes["failed"].fillna(0).to_numpy(dtype=float), 0.0),
        unknown=np.where(kept, outcomes["unknown"].fillna(0).to_numpy(dtype=float), 0.0),
    )


def _nothing(
    labels: _Labels,
    settings: _Settings,
    why: str,
    findings: list[Finding],
    intervals: tuple[SuiteIntervals | None, SuiteIntervals | None] = (None, None),
) -> CapabilityReport:
    """A report that decided nothing: placeholders with None figures for every score-based signal."""
    placeholders = [
        Finding(name, None, None, None, None, "info", why) for name in (MEAN_DROP, P10, FLOOR_DROP)
    ]
    return CapabilityReport(
        candidate_build=labels.candidate,
        baseline_build=labels.baseline,
        judge_version=labels.judge_version,
        floor=settings.floor,
        alpha=settings.budget.alpha_block,
        q=settings.budget.alpha_flag,
        n_judge_versions=settings.budget.n_judge_versions,
        band_half_width=None,
        optimal_repeats=None,
        aa_block_rate=None,
        aa_flag_rate=None,
        aa_replications=0,
        aa_seed=settings.aa_seed,
        decided_nothing=why,
        findings=tuple([*findings, *placeholders]),
        scenarios=pd.DataFrame(columns=list(SCENARIO_PLOT_COLUMNS)),
        candidate_intervals=intervals[0],
        baseline_intervals=intervals[1],
    )


def _why_nothing(base: pd.DataFrame, cand: pd.DataFrame, paired: pd.DataFrame, labels: _Labels) -> str | None:
    """Why the scores cannot be compared at all (None when they can)."""
    for role, table in (("baseline", base), ("candidate", cand)):
        name = f"{role} {getattr(labels, role) or ''}".strip()
        if len(table) == 0:
            return f"no verdicts for the {name}: decides nothing"
        if int(table["n_attempts"].sum()) == 0:
            return f"every repeat of the {name} was excluded: decides nothing"
        if int(table["n_scored"].sum()) == 0:
            return f"the {name} has no scored verdicts: decides nothing"
    if len(paired) < 2:
        return (
            f"{len(paired)} scenario(s) with scored repeats in both builds: no inference over scenarios "
            "is possible (need at least 2): decides nothing"
        )
    return None


def _paired(base: pd.DataFrame, cand: pd.DataFrame) -> pd.DataFrame:
    """Scenarios with a scored repeat in both builds: both builds' means."""
    left = base.loc[base["n_scored"] > 0, ["mean"]].set_axis(["baseline_mean"], axis=1)
    right = cand.loc[cand["n_scored"] > 0, ["mean"]].set_axis(["candidate_mean"], axis=1)
    return left.join(right, how="inner")


def _moments(table: pd.DataFrame, ids: pd.Index, refill: pd.DataFrame | None = None) -> Moments:
    """(1, m) moments of the scenarios `ids` from a scenario table (`refill`: replaced n and mean).

    `rows` are scaled so that the scored share over them is the build's over EVERY verdict row,
    unpaired scenarios included (a scenario lost by the candidate counts against its evidence).
    """
    rows = table.loc[ids]
    n = rows["n_scored"].to_numpy(dtype=float)
    mean = rows["mean"].to_numpy(dtype=float)
    if refill is not None:
        n, mean = refill["n"].to_numpy(dtype=float), refill["mean"].to_numpy(dtype=float)
    scored_all, rows_all = float(table["n_scored"].sum()), float(table["n_rows"].sum())
    paired_rows = rows["n_rows"].to_numpy(dtype=float)
    scale = (
        (float(n.sum()) * rows_all / scored_all) / paired_rows.sum()
        if scored_all and paired_rows.sum()
        else 1.0
    )
    return Moments(
        n=n[None, :],
        mean=mean[None, :],
        var=rows["variance"].to_numpy(dtype=float)[None, :],
        below=rows["n_below_floor"].to_numpy(dtype=float)[None, :],
        rows=(paired_rows * scale)[None, :],
    )


def _policy_finding(base: pd.DataFrame | None, cand: pd.DataFrame) -> Finding:
    """Any candidate policy failure blocks, whatever the baseline did (docs/methods.md: policy failures).

    Counts are over attempts that produced output, per scenario, for both builds.
    """
    hit = cand.loc[cand["policy_failures"] > 0]
    outputs = int(cand["n_output"].sum())
    failing = int(cand["attempts_with_policy_failure"].sum())
    base_line = "no baseline"
    if base is not None:
        base_line = (
            f"baseline {int(base['attempts_with_policy_failure'].sum())} of {int(base['n_output'].sum())}"
        )
    if hit.empty:
        detail = (
            f"no policy failure in the candidate: 0 of {outputs} attempts with output ({base_line} "
            "attempts with output had one)"
        )
        verdict: FindingVerdict = "ok" if outputs else "info"
        if not outputs:
            detail = "the candidate has no attempt with output: no policy check ran"
        return Finding(POLICY_FAILURES, None, 0.0 if outputs else None, None, None, verdict, detail)
    parts = []
    for sid, row in hit.iterrows():
        theirs = "baseline n/a"
        if base is not None and sid in base.index:
            b = base.loc[sid]
            theirs = f"baseline {int(b['attempts_with_policy_failure'])} of {int(b['n_output'])}"
        parts.append(
            f"{sid} (candidate {int(row['attempts_with_policy_failure'])} of {int(row['n_output'])} "
            f"attempts with output, {theirs})"
        )
    shown = "; ".join(parts[:10]) + (f"; and {len(parts) - 10} more" if len(parts) > 10 else "")
    detail = (
        f"policy failures in the candidate in {len(hit)} scenario(s), {failing} of {outputs} attempts with "
        f"output ({base_line}): {shown}; any policy failure blocks, whatever the baseline did and "
        "whatever the scores"
    )
    return Finding(
        POLICY_FAILURES, None, float(hit["policy_failures"].sum()), None, None, "block", detail, "any"
    )


def _evidence_finding(outcome: RuleOutcome, base: pd.DataFrame, cand: pd.DataFrame) -> Finding:
    """Investigate when the rules found the evidence insufficient (`Sufficiency.insufficient`, the rule
    the A/A simulation counts too), naming each limit passed and the build it was passed in."""
    ev = outcome.evidence
    n = int(ev.n_scenarios[0])
    problems = []
    if n < MIN_SCENARIOS:
        problems.append(f"{n} scenarios compared (need {MIN_SCENARIOS})")
    if ev.thin_share[0] > MAX_THIN_SHARE:
        base_thin, cand_thin = ev.thin_share_base[0], ev.thin_share_cand[0]
        thin = " and the ".join(
            r for r, share in (("baseline", base_thin), ("candidate", cand_thin)) if share > 0
        )
        problems.append(
            f"{ev.thin_share[0]:.0%} of compared scenarios have fewer than {MIN_REPEATS} scored repeats in a "
            f"build, thin in the {thin} (baseline {base_thin:.0%}, candidate {cand_thin:.0%}; "
            f"limit {MAX_THIN_SHARE:.0%})"
        )
    for role, table, share in (
        ("baseline", base, ev.unscored_share_base[0]),
        ("candidate", cand, ev.unscored_share_cand[0]),
    ):
        if share > MAX_UNSCORED_SHARE:
            problems.append(f"{role}: {_output_counts(table)} (limit {MAX_UNSCORED_SHARE:.0%} unscored)")
    figures = f"baseline: {_output_counts(base)}; candidate: {_output_counts(cand)}; {n} scenarios compared"
    if outcome.insufficient[0]:
        return Finding(
            EVIDENCE,
            None,
            float(n),
            None,
            None,
            "investigate",
            "insufficient evidence: " + "; ".join(problems),
            "insufficient",
        )
    return Finding(EVIDENCE, None, float(n), None, None, "ok", f"sufficient evidence: {figures}")


def _output_counts(table: pd.DataFrame) -> str:
    rows, outputs, scored = (int(table[c].sum()) for c in ("n_rows", "n_output", "n_scored"))
    unscored = 1.0 - scored / rows if rows else 1.0
    return f"{outputs} of {rows} attempts produced output, {scored} scored ({unscored:.0%} unscored)"


@dataclass(frozen=True)
class _PerScenario:
    table: (
        pd.DataFrame
    )  # difference, p_value (moderated), q_value (BH), p_floor, collapse, verdict, rule, rules
    drivers: np.ndarray  # bool: concentrated-drop drivers (centred normal score below DRIVER_Z)


def _beyond_blocked(outcome: RuleOutcome, rejected: np.ndarray, m: int, budget: Budget) -> Concentrated:
    """The concentrated-drop test once more without the scenarios blocked on their own: one collapsed
    scenario alone makes S large, and is already named; the concentrated drop is reported (and its
    drivers named) only when it still holds without them (dropping a rejection keeps FWER control)."""
    alone = rejected[2 : 2 + m] | rejected[2 + m : 2 + 2 * m] | rejected[2 + 2 * m :]
    if not (rejected[1] and alone.any()):
        return outcome.concentrated
    again = concentrated_without(outcome, alone[None, :])
    if not again.p[0] <= budget.report_alpha * budget.w_concentrated:
        rejected[1] = False
    return again


def _per_scenario(
    outcome: RuleOutcome, rejected: np.ndarray, m: int, budget: Budget, concentrated: Concentrated
) -> _PerScenario:
    tests = outcome.tests
    p = tests.p_drop[0]
    tested = np.isfinite(p)
    q = np.full(m, np.nan)
    if tested.any():
        q[tested] = stats.false_discovery_control(p[tested], method="bh")
    drop, floor_test, collapse = rejected[2 : 2 + m], rejected[2 + m : 2 + 2 * m], rejected[2 + 2 * m :]
    conc_block = bool(rejected[1])
    drivers = np.nan_to_num(concentrated.u[0], nan=0.0) < DRIVER_Z
    bh = tested & (q <= budget.report_flag)
    flags = {
        "collapse": collapse,
        "floor_test": floor_test,
        "drop": drop,
        "concentrated_driver": drivers & conc_block,
        "bh": bh,
    }
    rules = [",".join(r for r in _RULE_ORDER if flags[r][i]) for i in range(m)]
    primary = [r.split(",")[0] if r else "" for r in rules]
    verdict = ["investigate" if r == "bh" else "block" if r else "ok" for r in primary]
    table = pd.DataFrame(
        {
            "difference": tests.difference[0],
            "p_value": p,
            "q_value": q,
            "p_floor": tests.p_floor[0],
            "collapse": tests.collapse[0],
            "verdict": verdict,
            "rule": primary,
            "rules": rules,
        }
    )
    return _PerScenario(table, drivers)


def _scenario_findings(per: _PerScenario, paired: pd.DataFrame, floor: float | None) -> list[Finding]:
    """One `floor_drop` finding per scenario (plain columns, no per-row pandas access: 10k+ rows)."""
    table = per.table
    columns = (
        paired.index.astype(str).tolist(),
        paired["baseline_mean"].tolist(),
        paired["candidate_mean"].tolist(),
        table["difference"].tolist(),
        table["p_value"].tolist(),
        table["q_value"].tolist(),
        table["p_floor"].tolist(),
        table["collapse"].tolist(),
        table["verdict"].tolist(),
        table["rule"].tolist(),
        table["rules"].tolist(),
    )
    fell = f"; fell below the floor {fmt(floor)} (mean or most repeats) where the baseline did not"
    out = []
    for sid, before, after, difference, p, q, p_floor, collapse, verdict_, rule, rules in zip(
        *columns, strict=True
    ):
        detail = f"mean {fmt(before)} -> {fmt(after)}; moderated t one-sided p={fmt(p)}, BH q={fmt(q)}"
        if floor is not None:
            detail += f"; Fisher floor p={fmt(p_floor)}"
            if collapse:
                detail += fell
        if rules:
            detail += f"; flagged by: {rules.replace(',', ', ')}"
        verdict: FindingVerdict = (
            "block" if verdict_ == "block" else "investigate" if verdict_ == "investigate" else "ok"
        )
        out.append(
            Finding(FLOOR_DROP, sid, figure(difference), figure(p), figure(q), verdict, detail, str(rule))
        )
    return out


def _mean_finding(
    outcome: RuleOutcome,
    blocked: bool,
    budget: Budget,
    band: NoiseBand,
    diff: np.ndarray,
    settings: _Settings,
    rng: np.random.Generator,
) -> Finding:
    test = outcome.mean
    mean, half = figure(test.mean[0]), figure(test.band[0])
    interval = mean_interval(diff, n_resamples=settings.n_resamples, level=settings.level, rng=rng)
    ci = "n/a" if interval is None else f"[{fmt(interval.low)}, {fmt(interval.high)}] ({interval.method})"
    rebuild = (
        f"between-build variance {fmt(band.between_build_var)} from a registered rebuild"
        if band.between_build_df
        else "no registered rebuild: repeat noise only"
    )
    p_drop = None if test.constant[0] else figure(test.p_drop[0])
    p_beyond = None if test.constant[0] else figure(test.p_beyond[0])
    if blocked:
        verdict: FindingVerdict = "block"
        rule = "beyond_band"
    elif outcome.flag_mean[0]:
        verdict, rule = "investigate", "drop_within_noise" if half is not None else "no_band"
    else:
        verdict, rule = "ok", ""
    constant = (
        "; every scenario moved alike (zero spread): compared to the band directly"
        if test.constant[0]
        else ""
    )
    detail = (
        f"mean per-scenario difference {fmt(mean)} over {int(test.n[0])} scenarios, {settings.level:.0%} CI {ci}; "
        f"noise band +/-{fmt(half)} (t quantile, Welch-Satterthwaite df {fmt(test.band_df[0])}; {rebuild}); "
        f"paired t one-sided p={fmt(p_drop)}; p(drop beyond band, band uncertainty included)={fmt(p_beyond)}"
        f"{constant}; blocks under weighted Holm at alpha {fmt(budget.report_alpha)} x {budget.w_mean:g}, "
        f"investigates at p < {fmt(budget.report_flag)}"
    )
    return Finding(MEAN_DROP, None, mean, p_drop, None, verdict, detail, rule)


def _concentrated_finding(conc: Concentrated, blocked: bool, per: _PerScenario, budget: Budget) -> Finding:
    statistic, p = figure(conc.statistic[0]), figure(conc.p[0])
    count = int(per.drivers.sum())
    detail = (
        f"S = sum of squared negative normal scores of median-centred differences = {fmt(statistic)} over "
        f"{int(conc.count[0])} scenarios, chi-bar-squared p={fmt(p)}; {count} scenario(s) with centred z "
        f"below {DRIVER_Z:.3g}; blocks under weighted Holm at alpha {fmt(budget.report_alpha)} x "
        f"{budget.w_concentrated:g}"
    )
    verdict: FindingVerdict = "block" if blocked else "ok"
    return Finding(CONCENTRATED, None, statistic, p, None, verdict, detail, "concentrated" if blocked else "")


def _p10_finding(diff: np.ndarray, settings: _Settings, rng: np.random.Generator) -> Finding:
    value = figure(float(stats.quantile(diff, 0.1)))
    interval = quantile_interval(diff, 0.1, n_resamples=settings.n_resamples, level=settings.level, rng=rng)
    ci = "n/a" if interval is None else f"[{fmt(interval.low)}, {fmt(interval.high)}]"
    detail = (
        f"10th percentile of per-scenario differences {fmt(value)}, {settings.level:.0%} cluster-bootstrap CI "
        f"{ci}; reported, not gated"
    )
    return Finding(P10, None, value, None, None, "info", detail)


def _exclusion_finding(
    base: pd.DataFrame, cand: pd.DataFrame, sensitivity: str, flips: bool = False
) -> Finding:
    excluded = [int(t["n_excluded"].sum()) for t in (base, cand)]
    rows = [int(t["n_rows"].sum()) for t in (base, cand)]
    rates = [e / r if r else None for e, r in zip(excluded, rows, strict=True)]
    p = None
    if all(rows):
        table = [[excluded[1], rows[1] - excluded[1]], [excluded[0], rows[0] - excluded[0]]]
        p = figure(stats.fisher_exact(table).pvalue)
    change = None if rates[0] is None or rates[1] is None else rates[1] - rates[0]
    detail = (
        f"excluded repeats: baseline {excluded[0]}/{rows[0]} ({_percent(rates[0])}), candidate "
        f"{excluded[1]}/{rows[1]} ({_percent(rates[1])}); two-sided Fisher p={fmt(p)} for a change in rate; "
        f"{sensitivity}"
    )
    return Finding(EXCLUSIONS, None, change, p, None, "info", detail, "sensitivity_flip" if flips else "")


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _score_verdict(outcome: RuleOutcome) -> str:
    if outcome.block[0]:
        return "block"
    return "investigate" if outcome.flag[0] else "ok"


def _sensitivity(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    ids: pd.Index,
    original: RuleOutcome,
    settings: _Settings,
    between: float,
    between_df: int,
    looks: Looks | None = None,
) -> tuple[str, bool]:
    """Refill the candidate's excluded repeats (worst score, then baseline mean): do the score rules flip?

    Runs over every scenario the baseline scored and the candidate has rows for, a scenario the
    candidate lost entirely included.
    """
    original_ids = ids
    scored = base.index[base["n_scored"] > 0]
    ids = scored[scored.isin(cand.index)]
    rows = cand.loc[ids]
    excluded = rows["n_excluded"].to_numpy(dtype=float)
    if not excluded.any():
        return "no candidate exclusions in compared scenarios: sensitivity check not needed", False
    before = _score_verdict(original)
    outcomes = []
    base_m = _moments(base, ids)
    n = rows["n_scored"].to_numpy(dtype=float) + excluded
    for label, fill in (
        ("the worst score", settings.worst_score),
        ("the baseline mean", base.loc[ids, "mean"]),
    ):
        fill_values = np.broadcast_to(np.asarray(fill, dtype=float), excluded.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (rows["score_sum"].to_numpy(dtype=float) + excluded * fill_values) / n
        refill = pd.DataFrame({"n": n, "mean": np.where(n > 0, mean, np.nan)})
        outcome = evaluate(
            base_m,
            _moments(cand, ids, refill),
            settings.floor,
            settings.budget,
            between=between,
            between_df=between_df,
            level=settings.level,
            looks=None if looks is None else _reindexed(looks, original_ids, ids),
        )
        outcomes.append((label, _score_verdict(outcome)))
    flips = [label for label, verdict in outcomes if verdict != before]
    text = "; ".join(f"filled with {label}: {verdict}" for label, verdict in outcomes)
    note = (
        f"the score verdict FLIPS from {before} when filled with {' and '.join(flips)}"
        if flips
        else f"the score verdict ({before}) holds"
    )
    return f"sensitivity ({int(excluded.sum())} excluded candidate repeats) — {text}; {note}", bool(flips)


def _scenario_frame(paired: pd.DataFrame, per: _PerScenario, band: NoiseBand) -> pd.DataFrame:
    half_widths = band.scenarios.set_index("scenario_id")["half_width"].reindex(paired.index)
    return pd.DataFrame(
        {
            "scenario_id": paired.index.to_numpy(dtype=object),
            "baseline_mean": paired["baseline_mean"].to_numpy(),
            "candidate_mean": paired["candidate_mean"].to_numpy(),
            "difference": per.table["difference"].to_numpy(),
            "half_width": half_widths.to_numpy(),
            "p_value": per.table["p_value"].to_numpy(),
            "q_value": per.table["q_value"].to_numpy(),
            "verdict": per.table["verdict"].to_numpy(dtype=object),
        }
    ).loc[:, list(SCENARIO_PLOT_COLUMNS)]


def _interim_frame(cand: pd.DataFrame, design: AdaptiveDesign) -> pd.DataFrame:
    """The candidate's verdicts at the first look: its repeats numbered up to `design.start`."""
    return cand.loc[cand["repeat"] <= design.start]


def _topped(cand: pd.DataFrame, ids: pd.Index, design: AdaptiveDesign) -> np.ndarray:
    """(1, m) bool: the scenarios with a repeat past the first look's (topped up after it)."""
    later = set(cand.loc[cand["repeat"] > design.start, "scenario_id"])
    return np.asarray([[sid in later for sid in ids]], dtype=bool)


def _interim_moments(
    cand: pd.DataFrame, ids: pd.Index, floor: float | None, design: AdaptiveDesign
) -> Moments:
    """(1, m) moments of the candidate's first-look repeats over the scenarios `ids` (a scenario with
    no row at the first look: no repeats, n 0)."""
    table = scenario_table(_interim_frame(cand, design), floor).reindex(ids)
    counts = ["n_rows", "n_output", "n_attempts", "n_excluded", "n_scored", "n_below_floor"]
    table[counts] = table[counts].fillna(0)
    return _moments(table, ids)


def _looks(
    cand: pd.DataFrame, ids: pd.Index, floor: float | None, design: AdaptiveDesign, budget: Budget
) -> Looks:
    return design.looks(_interim_moments(cand, ids, floor, design), _topped(cand, ids, design), budget)


def _reindexed(looks: Looks, old: pd.Index, new: pd.Index) -> Looks:
    """`looks` over the scenarios `new` (a subset or reordering of `old`; absent ones: no repeats)."""
    at = old.get_indexer(new)
    found = at >= 0
    take = np.where(found, at, 0)

    def pick(values: np.ndarray, empty: float) -> np.ndarray:
        return np.where(found[None, :], values[:, take], empty)

    i = looks.interim
    interim = Moments(
        n=pick(i.n, 0.0),
        mean=pick(i.mean, np.nan),
        var=pick(i.var, np.nan),
        below=pick(i.below, 0.0),
        rows=pick(i.rows, 0.0),
    )
    return Looks(
        interim, np.asarray(pick(looks.topped, 0.0), dtype=bool), looks.shares, looks.scenario_shares
    )


@dataclass(frozen=True)
class FirstLook:
    """One judge version's first look at a candidate (adaptive repeats): the scenarios to top up."""

    top_up: tuple[str, ...]
    blocked: bool  # the report already blocks on the first look alone
    scenarios: int


def first_look(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    floor: float | None,
    design: AdaptiveDesign,
    *,
    alpha: float = 0.05,
    q: float = 0.05,
    n_judge_versions: int = 1,
    band: NoiseBand | None = None,
) -> FirstLook:
    """The scenarios of `candidate` (its first-look verdicts) to top up against `baseline`, under one
    judge version: `plan_top_ups` on the report's own moments, with the run-to-run variance of `band`
    (the baseline's noise band the report will use; None: from the baseline alone) as the report has it.
    A candidate scenario the baseline did not score cannot be compared at any count: it is not topped up."""
    budget = Budget(alpha_block=alpha, alpha_flag=q, n_judge_versions=n_judge_versions)
    base_s = scenario_table(validate_verdicts(baseline), floor)
    cand_s = scenario_table(validate_verdicts(_interim_frame(candidate, design)), floor)
    ids = cand_s.index
    base_s = base_s.reindex(ids)
    counts = ["n_rows", "n_output", "n_attempts", "n_excluded", "n_scored", "n_below_floor"]
    base_s[counts] = base_s[counts].fillna(0)
    between, between_df = (0.0, 0) if band is None else (band.between_build_var, band.between_build_df)
    plan = plan_top_ups(
        _moments(base_s, ids),
        _moments(cand_s, ids),
        floor,
        budget,
        design,
        between=between,
        between_df=between_df,
    )
    chosen = tuple(str(sid) for sid, more in zip(ids, plan.repeats[0], strict=True) if more > 0)
    return FirstLook(chosen, bool(plan.blocked[0]), len(ids))
