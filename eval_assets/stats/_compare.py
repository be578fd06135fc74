"""Capability reports: a candidate build against its baseline under ONE judge version (METHODS §3).

Signals, each a finding row: policy failures (any increase blocks), per-scenario floor drops (see
`_floor`), the mean drop against the baseline's noise band (see `_mean`), exclusions per build with
a sensitivity check, and the 10th percentile of the per-scenario differences (reported, not gated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from ._bootstrap import Interval, mean_interval, quantile_interval
from ._evidence import Reason, Severity
from ._findings import (
    EXCLUSIONS,
    FINDING_COLUMNS,
    FLOOR_DROP,
    MEAN_DROP,
    P10,
    POLICY_FAILURES,
    Finding,
    Verdict,
    figure,
    fmt,
)
from ._floor import PAIRED_COLUMNS, FloorDrops, floor_drops, floor_findings
from ._frame import judge_versions, scenario_table, validate_verdicts
from ._mean import MeanDropTest, mean_drop_test
from ._noise import NoiseBand, band_from_table

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
_ADVICE = {
    "lone_flag": "top up these scenarios to {repeats} repeats and re-run the report",
    "drop_within_noise": "top up repeats (more repeats narrow the noise band) and re-run the report",
    "no_band": "run at least 2 repeats per scenario so the baseline has a noise band",
}


class CrossJudgeVersionError(ValueError):
    """Verdicts of two judge versions were about to be compared. They never are (METHODS §4)."""

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

    `decided_nothing` holds the reason when the scores could not be compared (no baseline, no
    scored verdicts, every repeat excluded, fewer than two scenarios in common); such a report still
    carries the policy-failure finding, which blocks on any increase. `scenarios` has one row per
    scenario in both builds (`SCENARIO_PLOT_COLUMNS`), empty when nothing was compared.
    `repeats_to_confirm` is the repeat count at which one scenario alone could reach significance
    after Benjamini-Hochberg with an exact test (7 at 200 scenarios), None when nothing was tested.
    """

    candidate_build: str | None
    baseline_build: str | None
    judge_version: str | None
    floor: float | None
    alpha: float
    q: float
    band_half_width: float | None
    repeats_to_confirm: int | None
    decided_nothing: str | None
    findings: tuple[Finding, ...]
    scenarios: pd.DataFrame

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

    def rows(self) -> list[dict[str, object]]:
        """The findings as `capability_reports` rows (keys `FINDING_COLUMNS`)."""
        return [f.as_row() for f in self.findings]

    def to_frame(self) -> pd.DataFrame:
        """The findings as a DataFrame with columns `FINDING_COLUMNS` (missing figures NaN)."""
        return pd.DataFrame(self.rows(), columns=list(FINDING_COLUMNS))

    def reasons(self) -> tuple[Reason, ...]:
        """Block/investigate findings grouped by signal and rule, each naming its scenarios."""
        reasons = (
            [Reason("none", self.source, "report", self.decided_nothing)] if self.decided_nothing else []
        )
        groups: dict[tuple[str, str, str], list[Finding]] = {}
        for finding in self.findings:
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
        advice = (
            _ADVICE[first.rule].format(repeats=self.repeats_to_confirm) if first.rule in _ADVICE else None
        )
        if not ids:
            return Reason(
                severity, self.source, first.finding, f"{first.finding}: {first.detail}", (), advice
            )
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        label = _RULE_LABELS.get(first.rule, first.finding)
        return Reason(
            severity, self.source, first.finding, f"{label} in {len(ids)} scenario(s): {shown}", ids, advice
        )


_RULE_LABELS = {
    "floor_crossing": "repeat below the rubric floor where the baseline had none",
    "bh": "significant per-scenario drop after Benjamini-Hochberg",
    "lone_flag": "lone per-scenario flag (one BH discovery at too few repeats to confirm)",
}


def compare(
    baseline: pd.DataFrame | None,
    candidate: pd.DataFrame,
    floor: float | None,
    band: NoiseBand | None = None,
    *,
    alpha: float = 0.05,
    q: float = 0.10,
    judge_version: str | None = None,
    baseline_build: str | None = None,
    candidate_build: str | None = None,
    n_resamples: int = 2000,
    level: float = 0.95,
    worst_score: float = 0.0,
    rng: np.random.Generator | int = 0,
) -> CapabilityReport:
    """Compare `candidate` with `baseline` verdicts of one judge version (METHODS §3).

    `band` is the baseline's noise band (computed from `baseline` when None). `floor` None means the
    rubric has no floor. `worst_score` is the fill for the exclusion sensitivity check. `rng` seeds
    the bootstrap intervals (default 0: the same inputs give the same report).

    Never raises for missing data: no baseline, no verdicts, nothing scored, every repeat excluded,
    or fewer than two scenarios in common give a report whose `decided_nothing` says why, with every
    figure that cannot be computed as None. Raises `CrossJudgeVersionError` when the frames (or
    `judge_version`) name different judge versions, and `VerdictFrameError` for malformed frames.
    """
    cand = validate_verdicts(candidate)
    base = None if baseline is None else validate_verdicts(baseline)
    settings = _Settings(floor, alpha, q, n_resamples, level, worst_score)
    labels = _Labels(
        candidate_build, baseline_build, _judge_version(judge_version, base, cand, baseline_build)
    )
    if base is None:
        return _nothing(labels, settings, "no baseline: decides nothing", [])
    base_s, cand_s = scenario_table(base), scenario_table(cand)
    policy = _policy_finding(base_s, cand_s)
    paired = _paired(base_s, cand_s)
    why = _why_nothing(base_s, cand_s, paired, labels)
    if why is not None:
        return _nothing(
            labels, settings, why, [policy, _exclusion_finding(base_s, cand_s, f"sensitivity not run: {why}")]
        )
    band = band if band is not None else band_from_table(base_s, level=level)
    half_width = band.half_width_over(paired.index)
    generator = np.random.default_rng(rng)
    drops = floor_drops(paired, floor=floor, alpha=alpha, q_level=q)
    mean_test = mean_drop_test(paired["candidate_mean"], paired["baseline_mean"], half_width, alpha=alpha)
    diff = (paired["candidate_mean"] - paired["baseline_mean"]).to_numpy()
    sensitivity, flips = _sensitivity(base_s, cand_s, band, mean_test, settings)
    findings = [
        policy,
        _mean_finding(
            mean_test, mean_interval(diff, n_resamples=n_resamples, level=level, rng=generator), level
        ),
        _exclusion_finding(base_s, cand_s, sensitivity, flips),
        _p10_finding(diff, settings, generator),
        *floor_findings(drops, paired, floor=floor, alpha=alpha, q_level=q),
    ]
    return CapabilityReport(
        candidate_build=labels.candidate,
        baseline_build=labels.baseline,
        judge_version=labels.judge_version,
        floor=floor,
        alpha=alpha,
        q=q,
        band_half_width=half_width,
        repeats_to_confirm=drops.repeats_needed,
        decided_nothing=None,
        findings=tuple(findings),
        scenarios=_scenario_frame(paired, drops, band),
    )


@dataclass(frozen=True)
class _Settings:
    floor: float | None
    alpha: float
    q: float
    n_resamples: int
    level: float
    worst_score: float


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


def _nothing(labels: _Labels, settings: _Settings, why: str, findings: list[Finding]) -> CapabilityReport:
    """A report that decided nothing: placeholders with None figures for every score-based signal."""
    placeholders = [
        Finding(name, None, None, None, None, "info", why) for name in (MEAN_DROP, P10, FLOOR_DROP)
    ]
    return CapabilityReport(
        candidate_build=labels.candidate,
        baseline_build=labels.baseline,
        judge_version=labels.judge_version,
        floor=settings.floor,
        alpha=settings.alpha,
        q=settings.q,
        band_half_width=None,
        repeats_to_confirm=None,
        decided_nothing=why,
        findings=tuple([*findings, *placeholders]),
        scenarios=pd.DataFrame(columns=list(SCENARIO_PLOT_COLUMNS)),
    )


def _why_nothing(base: pd.DataFrame, cand: pd.DataFrame, paired: pd.DataFrame, labels: _Labels) -> str | None:
    """Why the scores cannot be compared (None when they can)."""
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
    """Scenarios with a scored repeat in both builds, with both builds' moments (`PAIRED_COLUMNS`)."""
    moments = ["mean", "variance", "n_scored", "min_score"]
    names = ["mean", "var", "n", "min"]
    left = base.loc[base["n_scored"] > 0, moments].set_axis([f"baseline_{n}" for n in names], axis=1)
    right = cand.loc[cand["n_scored"] > 0, moments].set_axis([f"candidate_{n}" for n in names], axis=1)
    return left.join(right, how="inner").loc[:, list(PAIRED_COLUMNS)]


def _policy_finding(base: pd.DataFrame, cand: pd.DataFrame) -> Finding:
    """Any increase in the policy-failure count blocks; the rates (per attempt with an output) inform.

    When either build has no attempt with an output there is nothing to compare: no figures, 'info'.
    """
    counts = [int(t["policy_failures"].sum()) for t in (base, cand)]
    attempts = [int(t["n_attempts"].sum()) for t in (base, cand)]
    hit = [int(t["attempts_with_policy_failure"].sum()) for t in (base, cand)]
    rates = f"attempts with a failure: baseline {_rate(hit[0], attempts[0])}, candidate {_rate(hit[1], attempts[1])}"
    if not all(attempts):
        return Finding(POLICY_FAILURES, None, None, None, None, "info", f"cannot compare: {rates}")
    table = [[hit[1], attempts[1] - hit[1]], [hit[0], attempts[0] - hit[0]]]
    p = figure(stats.fisher_exact(table, alternative="greater").pvalue)
    increase = counts[1] > counts[0]
    detail = f"policy failures {counts[0]} -> {counts[1]}; {rates}; one-sided Fisher p={fmt(p)}"
    if increase:
        detail += "; any increase blocks: no score outranks a policy failure"
    verdict: Verdict = "block" if increase else "ok"
    return Finding(
        POLICY_FAILURES,
        None,
        float(counts[1] - counts[0]),
        p,
        None,
        verdict,
        detail,
        "increase" if increase else "",
    )


def _rate(hits: int, attempts: int) -> str:
    if attempts == 0:
        return "n/a (no attempts with an output)"
    low, high = clopper_pearson(hits, attempts)
    return f"{hits}/{attempts} = {hits / attempts:.2%} [exact 95% CI {low:.2%}, {high:.2%}]"


def clopper_pearson(hits: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a rate: what `binomtest(...).proportion_ci('exact')` returns,
    from the beta quantiles directly (binomtest finds them by root-finding, ~5 ms a call)."""
    tail = (1.0 - level) / 2.0
    low = 0.0 if hits == 0 else float(stats.beta.ppf(tail, hits, trials - hits + 1))
    high = 1.0 if hits == trials else float(stats.beta.ppf(1.0 - tail, hits + 1, trials - hits))
    return low, high


def _mean_finding(test: MeanDropTest, interval: Interval | None, level: float) -> Finding:
    ci = "n/a" if interval is None else f"[{fmt(interval.low)}, {fmt(interval.high)}] ({interval.method})"
    detail = (
        f"mean per-scenario difference {fmt(test.mean)} over {test.n} scenarios, {level:.0%} CI {ci}; "
        f"baseline noise band +/-{fmt(test.band)}; paired t one-sided p={fmt(test.p_drop)}, "
        f"p(drop beyond band)={fmt(test.p_beyond)}; {test.note}"
    )
    return Finding(MEAN_DROP, None, test.mean, test.p_drop, None, test.verdict, detail, test.rule)


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


def _sensitivity(
    base: pd.DataFrame, cand: pd.DataFrame, band: NoiseBand, original: MeanDropTest, settings: _Settings
) -> tuple[str, bool]:
    """Refill the candidate's excluded repeats (worst score, then baseline mean); does the verdict flip?"""
    rows = base.loc[base["n_scored"] > 0].join(cand, how="inner", lsuffix="_b")
    rows = rows.loc[rows["n_excluded"] > 0]
    if rows.empty:
        return "no candidate exclusions in compared scenarios: sensitivity check not needed", False
    total = int(rows["n_excluded"].sum())
    outcomes = []
    for label, fill in (("the worst score", settings.worst_score), ("the baseline mean", rows["mean_b"])):
        filled = _refilled(base, cand, rows, fill)
        half_width = band.half_width_over(filled.index)
        test = mean_drop_test(filled["candidate"], filled["baseline"], half_width, alpha=settings.alpha)
        outcomes.append((label, test.verdict))
    flips = [label for label, verdict in outcomes if verdict != original.verdict]
    text = "; ".join(f"filled with {label}: {verdict}" for label, verdict in outcomes)
    verdict_note = (
        f"the mean-drop verdict FLIPS from {original.verdict} when filled with {' and '.join(flips)}"
        if flips
        else f"the mean-drop verdict ({original.verdict}) holds"
    )
    return f"sensitivity ({total} excluded candidate repeats) — {text}; {verdict_note}", bool(flips)


def _refilled(
    base: pd.DataFrame, cand: pd.DataFrame, excluded: pd.DataFrame, fill: float | pd.Series
) -> pd.DataFrame:
    """Per-scenario (baseline, candidate) means after filling the candidate's excluded repeats."""
    scored_base = base.loc[base["n_scored"] > 0, "mean"]
    cand_in = cand.loc[cand.index.isin(scored_base.index)]
    fill_values = pd.Series(fill, index=excluded.index).reindex(cand_in.index).fillna(0.0)
    n = cand_in["n_scored"] + cand_in["n_excluded"]
    means = (cand_in["score_sum"] + cand_in["n_excluded"] * fill_values) / n.where(n > 0)
    frame = pd.DataFrame({"baseline": scored_base.reindex(cand_in.index), "candidate": means})
    return frame.dropna()


def _scenario_frame(paired: pd.DataFrame, drops: FloorDrops, band: NoiseBand) -> pd.DataFrame:
    half_widths = band.scenarios.set_index("scenario_id")["half_width"].reindex(paired.index)
    return pd.DataFrame(
        {
            "scenario_id": paired.index.to_numpy(dtype=object),
            "baseline_mean": paired["baseline_mean"].to_numpy(),
            "candidate_mean": paired["candidate_mean"].to_numpy(),
            "difference": drops.table["difference"].to_numpy(),
            "half_width": half_widths.to_numpy(),
            "p_value": drops.table["p_value"].to_numpy(),
            "q_value": drops.table["q_value"].to_numpy(),
            "verdict": drops.table["verdict"].to_numpy(dtype=object),
        }
    ).loc[:, list(SCENARIO_PLOT_COLUMNS)]
