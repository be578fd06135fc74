"""Release statistics over the warehouse: noise bands, capability reports, release decisions.

Each function is one materialization's work on top of a `Track` (the Dagster assets and the CLI both
call these). Verdicts of one judge version only are ever compared: a baseline without verdicts under
the candidate's judge version is refused with the fix, never silently compared under another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from eval_assets.bridge import bridge_refusal
from eval_assets.capability.baselines import (
    band_for,
    baseline_for,
    build_reliability,
    registered_manifests,
    run_design,
    verdict_frame,
)
from eval_assets.capability.track import Summary, Track, TrackError
from eval_assets.config import BuildManifest
from eval_assets.evidence import CheckedDecision, DecisionDamaged, capture, check_decision, evidence_builds_of
from eval_assets.evidence import decision_versions as versions_to_decide
from eval_assets.human_scores import agreement_markdown
from eval_assets.judging import policy_digest
from eval_assets.present import (
    board_markdown,
    check_description,
    png_data_uri,
    png_uri,
    reason_counts,
    reasons_markdown,
    recorded_reasons,
)
from eval_assets.report_html import render, write_html
from eval_assets.safe_write import write_file
from eval_assets.stats import (
    CapabilityReport,
    CheckOutcome,
    CheckSuiteEvidence,
    CrossJudgeVersionError,
    Evidence,
    NoiseBand,
    Reason,
    ReleaseDecision,
    Reliability,
    compare,
    decide,
    plot_report,
    reliability_markdown,
    shown_figure,
    summary_markdown,
)
from eval_assets.suite import suite_evidence
from eval_assets.tracing import traced
from eval_assets.warehouse import WarehouseError


def judged_versions(track: Track, build: str) -> list[str]:
    frame = track.warehouse.query(
        "SELECT DISTINCT judge_version FROM judge_verdicts WHERE build = ? ORDER BY 1", [build]
    )
    return [str(v) for v in frame["judge_version"]]


def _require_verdicts(track: Track, build: str, judge_version: str) -> pd.DataFrame:
    frame = verdict_frame(track, build, judge_version)
    if frame.empty:
        raise TrackError(
            f"build {build!r} has no verdicts under {judge_version} yet: materialize judge_verdicts "
            f"[{build}|{judge_version}] first"
        )
    return frame


def materialize_noise_bands(track: Track, build: str, judge_version: str, run_id: str) -> Summary:
    """The build's own noise band under one judge version (docs/methods.md: noise band); writes `noise_bands`."""
    track.build(build)  # an unknown build is refused before anything is read
    track.judge(judge_version)
    band = band_for(track, build, judge_version, _require_verdicts(track, build, judge_version))
    table = noise_band_rows(band, build, judge_version)
    path = track.warehouse.write_partition(
        "noise_bands", {"build": build, "judge_version": judge_version}, table, run_id
    )
    suite = table[table["scope"] == "suite"].iloc[0]
    return Summary(
        {
            "suite_half_width": _num(suite["half_width"]),
            "suite_mean": _num(suite["mean"]),
            "within_var": _num(suite["within_var"]),
            "between_var": _num(suite["between_var"]),
            "between_build_var": _num(band.between_build_var),
            "rebuild_used": bool(band.between_build_df),
            "optimal_repeats": _num(band.optimal_repeats()),
            "scenarios": int((table["scope"] == "scenario").sum()),
            "partition_file": str(path),
        }
    )


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), 6)


@dataclass(frozen=True)
class ReportRun:
    report: CapabilityReport
    baseline: str | None
    band: NoiseBand | None


def build_report(
    track: Track,
    manifest: BuildManifest,
    judge_version: str,
    baseline: str | None,
    registered: Mapping[str, BuildManifest] | None = None,
) -> ReportRun:
    """Compare the candidate build (its resolved manifest) with baseline under ONE judge version.

    Raises CrossJudgeVersionError when the baseline has verdicts, but none under this version.
    A missing baseline, or one with no verdicts at all yet, gives a report that decides nothing.
    """
    candidate = manifest.id
    judge = track.judge(judge_version)
    rubric = track.project.rubric_for(judge)
    cand = _require_verdicts(track, candidate, judge_version)
    base = None
    if baseline is not None:
        if not track.build_path(baseline).exists():
            raise TrackError(f"baseline build {baseline!r} of {candidate!r} is not registered")
        base = verdict_frame(track, baseline, judge_version)
        if base.empty:
            others = judged_versions(track, baseline)
            if others:
                raise CrossJudgeVersionError.for_versions(baseline, judge_version, others)
    band = (
        band_for(track, baseline, judge_version, base, candidate, registered)
        if baseline and base is not None and not base.empty
        else None
    )
    report = compare(
        None if base is None or base.empty else base,
        cand,
        rubric.floor,
        band,
        n_judge_versions=max(1, len(decision_versions(track, manifest))),
        judge_version=judge_version,
        baseline_build=baseline,
        candidate_build=candidate,
        design=run_design(track, candidate),
    )
    if baseline is not None and (base is None or base.empty):
        # compared with no baseline frame, the report says "no baseline"; this build names one
        report = replace(
            report, decided_nothing=f"baseline {baseline} has no verdicts yet under {judge_version}"
        )
    return ReportRun(report, baseline, band)


def materialize_capability_report(track: Track, build: str, judge_version: str, run_id: str) -> Summary:
    """The report against the build's baseline; writes `capability_reports` and the report's plot
    (EVAL_HOME/reports/<build>/<judge version>.png). The summary's markdown is the report with the
    plot embedded; its files name the plot (`plot_file`)."""
    manifest = track.build(build)  # resolved once for this materialization
    baseline = baseline_for(track, manifest)
    run = build_report(track, manifest, judge_version, baseline, registered_manifests(track))
    sources = {sid: s.source for sid, s in track.project.scenarios.items()}
    floor = track.project.rubric_for(track.judge(judge_version)).floor
    figures = build_reliability(track, build, judge_version)
    rows = capability_report_rows(run, build, judge_version, sources, figures, floor)
    path = track.warehouse.write_partition(
        "capability_reports", {"build": build, "judge_version": judge_version}, rows, run_id
    )
    exemptions = exemptions_in_force(track, manifest, judge_version)
    markdown = summary_markdown(run.report)
    if figures:
        markdown += "\n" + reliability_markdown(figures)
    markdown += "\n" + agreement_markdown(track.warehouse, judge_version)
    if exemptions:
        markdown += (
            "\n**Provider-family exemptions in force**\n\n" + "\n".join(f"- {e}" for e in exemptions) + "\n"
        )
    verdicts = rows["verdict"].tolist() if "verdict" in rows else []
    reason_rows = [
        {"severity": r.severity, "source": r.source, "message": r.message, "advice": r.advice}
        for r in run.report.reasons()
    ]
    values = {
        "verdict": run.report.verdict,
        "baseline": baseline or "none",
        "decided_nothing": run.report.decided_nothing or "",
        "findings": len(run.report.findings),
        "pass_hat_k": {f.name: f.pass_hat_k for f in figures if f.scope == "suite"},
        "block_findings": verdicts.count("block"),
        "investigate_findings": verdicts.count("investigate"),
        "aa_block_rate": run.report.aa_block_rate,
        "aa_flag_rate": run.report.aa_flag_rate,
        "optimal_repeats": _num(run.report.optimal_repeats),
        "partition_file": str(path),
        "reason_rows": reason_rows,
    }
    png = plot_report(run.report)
    plot = track.home.reports(build) / f"{judge_version}.png"
    write_file(plot, png)
    return Summary(values, f"{markdown}\n\n{png_markdown(png)}\n", {"plot_file": plot})


def exemptions_in_force(track: Track, manifest: BuildManifest, judge_version: str) -> list[str]:
    """Scenarios judged by a judge of the subject's own provider family, with their recorded reason."""
    judge = track.judge(judge_version)
    if judge.family != manifest.subject.family:
        return []
    return [f"{s.id}: {s.family_exemption}" for s in track.project.scenarios_judged_by(judge) if s.family_exemption]


@dataclass(frozen=True)
class _Refused:
    """A judge version whose report could not be made: no decision can rest on it."""

    source: str
    why: str

    @property
    def decided_nothing(self) -> str:
        return self.why

    def reasons(self) -> tuple[Reason, ...]:
        return (Reason("none", self.source, "report", self.why),)


def _policy_fallback(track: Track, build: str) -> list[Evidence]:
    """When a report cannot compute, the candidate's policy failures (over attempts with output) still block."""
    frame = track.warehouse.query(
        "SELECT scenario_id, count(*) AS attempts FROM scenario_runs "
        "WHERE build = ? AND output IS NOT NULL AND policy_failures > 0 GROUP BY 1 ORDER BY 1",
        [build],
    )
    if frame.empty:
        return []
    named = ", ".join(f"{r.scenario_id} ({int(r.attempts)} attempts)" for r in frame.itertuples())
    outcome = CheckOutcome("policy_failures", False, f"policy failures in attempts with output: {named}")
    return [CheckSuiteEvidence("policy", (outcome,))]


def _policy_in_force(track: Track, manifest: BuildManifest) -> list[Evidence]:
    """Attempts with output not checked under the policy now in force (their recorded digest differs:
    a policy edited since, and a re-check that could not be made because a redaction or a cut
    touched the stored text) block, named: a check under another policy is never reused silently."""
    digests = {s.id: policy_digest(s) for s in track.scenarios_for(manifest)}
    frame = track.warehouse.query(
        "SELECT scenario_id, repeat, policy_digest FROM scenario_runs "
        "WHERE build = ? AND output IS NOT NULL ORDER BY 1, 2",
        [manifest.id],
    )
    stale = [
        f"{r.scenario_id}#{int(r.repeat)}"
        for r in frame.itertuples()
        if not isinstance(r.policy_digest, str) or digests.get(str(r.scenario_id)) != r.policy_digest
    ]
    if not stale:
        return []
    shown = ", ".join(stale[:20]) + (f" and {len(stale) - 20} more" if len(stale) > 20 else "")
    outcome = CheckOutcome(
        "policy_in_force",
        False,
        f"{len(stale)} attempts with output were not checked under the policy in force (checked under "
        f"another, and their stored text cannot be re-checked): {shown}; pay them again "
        f"(`evaltrack run --build {manifest.id} --fresh`)",
    )
    return [CheckSuiteEvidence("policy", (outcome,))]


def decision_versions(track: Track, manifest: BuildManifest) -> list[str]:
    """Judge versions whose reports a release decision combines: the build's active versions."""
    return versions_to_decide(track.project, manifest)


EvidenceFailure = Callable[[str], str | None]
"""Judge version -> why its evidence is missing (its latest materialization failed, or none was
made), as the orchestrator knows it; None when nothing is known to be wrong."""


def make_decision(
    track: Track,
    manifest: BuildManifest,
    extra: Sequence[Evidence] = (),
    evidence_failure: EvidenceFailure = lambda _jv: None,
    baseline: str | None = None,
) -> tuple[ReleaseDecision, str | None]:
    """Combine every active judge version's report (and `extra` evidence, e.g. the deterministic suite).

    `manifest` is the build resolved once for this decision; the other registered builds (for the
    noise bands' rebuilds) are resolved once here too. A version `evidence_failure` names is evidence
    missing: no decision rests on it, and the reason says why (never an older report of it).
    `baseline`: the baseline already chosen for this decision (else chosen here)."""
    build = manifest.id
    baseline = baseline or baseline_for(track, manifest)
    versions = decision_versions(track, manifest)
    registered = registered_manifests(track)
    evidence: list[Evidence] = []
    for jv in versions:
        failure = evidence_failure(jv)
        if failure is not None:
            evidence.append(_Refused(jv, failure))
            continue
        refusal = bridge_refusal(track.warehouse, track.judge(jv))
        if refusal is not None:  # a bridging version is not used until its offset is published
            evidence.append(_Refused(jv, refusal))
            continue
        try:
            evidence.append(build_report(track, manifest, jv, baseline, registered).report)
        except (CrossJudgeVersionError, TrackError) as exc:
            evidence.append(_Refused(jv, str(exc)))
        except Exception as exc:  # fail closed: a report that cannot compute never allows  # noqa: BLE001
            evidence.append(_Refused(jv, f"the report could not be computed: {type(exc).__name__}: {exc}"))
            evidence.extend(_policy_fallback(track, build))
    evidence.extend(_policy_in_force(track, manifest))
    evidence.extend(extra)
    decision = decide(evidence)
    exemptions = [e for jv in versions for e in exemptions_in_force(track, manifest, jv)]
    if exemptions:  # every decision lists the provider-family exemptions in force
        notes = tuple(Reason("info", "provider family", "exemption", e) for e in exemptions)
        decision = ReleaseDecision(decision.decision, decision.reasons + notes)
    return decision, baseline


def evidence_builds(track: Track, manifest: BuildManifest, baseline: str | None) -> list[str]:
    """The builds whose partitions a decision of `manifest` may read (`evidence.evidence_builds_of`)."""
    return evidence_builds_of(manifest.id, baseline, registered_manifests(track))


@traced(
    "eval.decision", lambda a: {"eval.build": a["build"]}, lambda s: {"eval.decision": str(s["decision"])}
)
def write_release_decision(
    track: Track,
    build: str,
    run_id: str,
    extra: Callable[[], Sequence[Evidence]] = lambda: (),
    evidence_failure: EvidenceFailure = lambda _jv: None,
) -> Summary:
    """Decide and write `release_decisions` (one row, with the evidence it read: `eval_assets.evidence`)
    and `release_decision_reasons` (one per reason). The evidence is captured before anything is read,
    so an input rewritten while deciding leaves the decision stale, never current; `extra` (e.g. the
    deterministic suite's evidence) is read after the capture too."""
    manifest = track.build(build)  # resolved once for this decision
    baseline = baseline_for(track, manifest)
    versions = decision_versions(track, manifest)
    builds = evidence_builds(track, manifest, baseline)
    inputs = capture(track.warehouse, track.home, builds, versions, track.project.root, decided=build)
    decision, baseline = make_decision(track, manifest, extra(), evidence_failure, baseline)
    row = release_decision_row(build, decision, versions, baseline, inputs)
    track.warehouse.write_partition("release_decisions", {"build": build}, [row], run_id)
    reasons = release_decision_reason_rows(build, decision)
    track.warehouse.write_partition("release_decision_reasons", {"build": build}, reasons, run_id)
    return Summary(
        {
            "decision": decision.decision,
            "exit_code": decision.exit_code,
            "baseline": baseline or "none",
            "judge_versions": versions,
            "reasons": [r.text() for r in decision.reasons],
        }
    )


# --- the rows of the release tables (one builder per table) ----------------------------------------


NOISE_BAND_COLUMNS: Final = (
    "scope",
    "scenario_id",
    "mean",
    "half_width",
    "low",
    "high",
    "n_repeats",
    "within_var",
    "between_var",
)
"""The band's own columns of a `noise_bands` row (the builder adds `build` and `judge_version`)."""
CAPABILITY_REPORT_COLUMNS: Final = (
    "finding",
    "scenario_id",
    "statistic",
    "p_value",
    "q_value",
    "verdict",
    "detail",
)
"""A finding's columns of a `capability_reports` row (the builder adds the report's own columns)."""


def noise_band_rows(band: NoiseBand, build: str, judge_version: str) -> pd.DataFrame:
    """The `noise_bands` rows of one build's band under one judge version: one 'suite' row, then one
    per scenario (`NOISE_BAND_COLUMNS`, then build and judge_version).

    `low`/`high` are -half_width/+half_width: the band for a difference between two re-runs, centred
    on 0. Missing figures are NaN (scenario_id is None on the suite row).
    """
    suite = {
        "scope": "suite",
        "scenario_id": None,
        "mean": band.suite_mean,
        "half_width": band.half_width,
        "low": None if band.half_width is None else -band.half_width,
        "high": band.half_width,
        "n_repeats": band.n_repeats,
        "within_var": band.within_var,
        "between_var": band.between_var,
    }
    per = band.scenarios
    rows = pd.DataFrame(
        {
            "scope": "scenario",
            "scenario_id": per["scenario_id"].to_numpy(dtype=object),
            "mean": per["mean"].to_numpy(),
            "half_width": per["half_width"].to_numpy(),
            "low": -per["half_width"].to_numpy(),
            "high": per["half_width"].to_numpy(),
            "n_repeats": per["n_repeats"].to_numpy(),
            "within_var": per["variance"].to_numpy(),
            "between_var": np.nan,
        }
    )
    head = pd.DataFrame([suite], columns=list(NOISE_BAND_COLUMNS))
    table = pd.concat([head.astype(rows.dtypes.to_dict()), rows], ignore_index=True)
    return table.loc[:, list(NOISE_BAND_COLUMNS)].assign(build=build, judge_version=judge_version)


def finding_rows(report: CapabilityReport) -> pd.DataFrame:
    """A report's findings as rows (`CAPABILITY_REPORT_COLUMNS`; a missing figure is None in the
    finding, NaN in a float column)."""
    return pd.DataFrame(
        [
            {
                "finding": f.finding,
                "scenario_id": f.scenario_id,
                "statistic": f.statistic,
                "p_value": f.p_value,
                "q_value": f.q_value,
                "verdict": f.verdict,
                "detail": f.detail,
            }
            for f in report.findings
        ],
        columns=list(CAPABILITY_REPORT_COLUMNS),
    )


def capability_report_rows(
    run: ReportRun,
    build: str,
    judge_version: str,
    sources: Mapping[str, str],
    figures: Sequence[Reliability] = (),
    floor: float = 0.0,
) -> pd.DataFrame:
    """The `capability_reports` rows of one report: a row per finding, with the report's baseline and
    simulated A/A rates, and where each scenario came from (`sources[scenario_id]`: authored or
    trajectory; None for a suite-wide finding or a scenario no longer in the project), then the
    candidate's reliability `figures` (`reliability_rows`, passes judged against `floor`)."""

    def stamped(frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` with the report's build, judge version, baseline, A/A rates and each row's source."""
        out = frame.assign(
            build=build,
            judge_version=judge_version,
            baseline=run.baseline,
            aa_flag_rate=run.report.aa_flag_rate,
            aa_block_rate=run.report.aa_block_rate,
        )
        out["source"] = [sources.get(sid) if isinstance(sid, str) else None for sid in out["scenario_id"]]
        return out

    rows = stamped(finding_rows(run.report))
    if figures:
        extra = stamped(pd.DataFrame(reliability_rows(figures, floor)))
        rows = pd.concat([rows, extra[rows.columns]], ignore_index=True) if len(rows) else extra
    return rows


def reliability_rows(figures: Sequence[Reliability], floor: float) -> list[dict[str, Any]]:
    """Two `info` rows per scenario and per suite: `pass_at_k` and `pass_hat_k` (docs/methods.md,
    "Reliability over repeats"); a suite's rows have no scenario_id and name the suite in `detail`."""
    out = []
    for f in figures:
        where = f"scenario {f.name}" if f.scope == "scenario" else f"suite {f.name}"
        counted = (
            f"{f.passed} of {f.of} repeats at or above the floor {floor:g}"
            if f.scope == "scenario"
            else f"{f.of} scenarios, {f.passed} solved in all repeats"
        )
        for finding, value in (("pass_at_k", f.pass_at_k), ("pass_hat_k", f.pass_hat_k)):
            out.append(
                {
                    "finding": finding,
                    "scenario_id": f.name if f.scope == "scenario" else None,
                    "statistic": value,
                    "p_value": None,
                    "q_value": None,
                    "verdict": "info",
                    "detail": f"{where}: k={f.k}, {counted}"
                    + ("; unknown: a judge could not score a repeat" if value is None else ""),
                }
            )
    return out


def release_decision_row(
    build: str, decision: ReleaseDecision, versions: Sequence[str], baseline: str | None, evidence: str
) -> dict[str, Any]:
    """The one `release_decisions` row of a decision (reasons one per line, judge versions comma-joined,
    the evidence record of `eval_assets.evidence.capture`)."""
    return {
        "build": build,
        "decision": decision.decision,
        "reasons": "\n".join(r.text() for r in decision.reasons),
        "judge_versions": ",".join(versions),
        "baseline": baseline,
        "evidence": evidence,
    }


def release_decision_reason_rows(build: str, decision: ReleaseDecision) -> list[dict[str, Any]]:
    """The `release_decision_reasons` rows of a decision, one per reason, ranked from 1 (most severe
    first): decision, severity, source, finding, scenario_ids (comma-joined), message, advice."""
    return [
        {
            "decision": decision.decision,
            "severity": r.severity,
            "source": r.source,
            "finding": r.finding,
            "scenario_ids": ",".join(r.scenario_ids),
            "message": r.message,
            "advice": r.advice,
            "build": build,
            "rank": i,
        }
        for i, r in enumerate(decision.reasons, start=1)
    ]


def materialize_release_decision(
    track: Track,
    build: str,
    run_id: str,
    report_link: Callable[[str], str | None] = lambda _jv: None,
    evidence_failure: EvidenceFailure = lambda _jv: None,
) -> Summary:
    """The release decision of a build with its deterministic suite as evidence (what the
    `release_decision` asset records). Values: the decision's figures and `reason_rows` (the
    structured reasons this run wrote, most severe first); markdown: the reasons with links
    (`report_link(judge_version)`) and the plots of each judge version's report.
    `evidence_failure`: the judge versions whose evidence failed or is missing (`make_decision`)."""
    summary = write_release_decision(
        track, build, run_id, lambda: [suite_evidence(track, build)], evidence_failure
    )
    rows = recorded_reasons(track.warehouse, build, run_id)
    plots = track.home.reports(build)
    markdown = reasons_markdown(
        build,
        str(summary["decision"]),
        rows,
        report_link=report_link,
        plot=lambda jv: png_data_uri(plots / f"{jv}.png"),
    )
    page = write_build_report(track, build, track.home.reports(build) / "report.html")
    return Summary({**summary.values, "reason_rows": rows}, markdown, {"html_report": page})


def write_build_report(track: Track, build: str, path: Path) -> Path:
    """The build's self-contained HTML report (eval_assets.report_html) written to `path`, atomically:
    its recorded decision (a stale one as none, saying why) and reasons, its reports and transcripts."""
    row, rows = decision_and_reasons(track, build)
    return write_html(render(track, build, row, rows), path)


def decision_and_reasons(track: Track, build: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The build's recorded decision, checked against its evidence (`checked_decision`), and its
    reasons: the recorded ones; for a stale decision `none` with one reason per change; for a damaged
    one `none` with the damage (`damaged: True`); (None, []) when none is recorded."""
    try:
        checked = checked_decision(track, build)
    except (DecisionDamaged, WarehouseError) as exc:
        why = f"the decision of {build} cannot be verified: {exc}"
        return {"decision": "none", "baseline": None, "damaged": True}, [
            {"severity": "none", "source": "evidence", "message": why}
        ]
    if checked is None:
        return None, []
    row = {
        "decision": checked.decision,
        "baseline": checked.row.get("baseline"),
        "stale": bool(checked.stale),
    }
    if checked.stale:
        recorded = checked.row["decision"]
        return row, [
            {
                "severity": "none",
                "source": "release",
                "message": f"the recorded decision ({recorded}) is stale: {why}; materialize release_decision again",
            }
            for why in checked.stale
        ]
    return row, [dict(r) for r in checked.reasons]


def checked_decision(track: Track, build: str) -> CheckedDecision | None:
    """The build's recorded decision, verified against its evidence (`eval_assets.evidence.check`):
    None when none was recorded; stale (deciding nothing) when an input changed after it. Raises
    DecisionDamaged when the decision or an input is damaged, or a manifest it rests on is gone."""
    return check_decision(track.project, track.home, track.warehouse, build)


def png_markdown(png: bytes) -> str:
    return f"![capability report]({png_uri(png)})"


# --- what the UI shows per build and over all builds ------------------------------------------------


def materialize_release_approval(track: Track, build: str) -> Summary:
    """Whether `build` may ship, from its recorded decision (a stale one reads as none): values
    `approved` (True only for allow), `decision`, `baseline` and `why` (the check description
    naming every reason of the worst severity). No recorded decision: approved False, decision none."""
    row, rows = decision_and_reasons(track, build)
    if row is None:
        why = f"{build}: no decision — release_decision of {build} is not materialized"
        return Summary({"approved": False, "decision": "none", "baseline": "none", "why": why})
    decision = str(row["decision"])
    head = "no decision" if decision == "none" else decision
    return Summary(
        {
            "approved": decision == "allow",
            "decision": decision,
            "baseline": row.get("baseline") or "none",
            "why": check_description(build, head, rows),
        }
    )


def board_reliability(track: Track, build: str) -> str:
    """The build's suites' pass@k and pass^k per judge version with verdicts (`build_reliability`, the
    one definition), as the board shows them: `helpfulness-v1: coding 100% / 67%; ...`, "" when none."""
    versions = track.warehouse.query(
        "SELECT DISTINCT judge_version FROM judge_verdicts WHERE build = ? ORDER BY 1", [build]
    )["judge_version"]
    parts = []
    for jv in (str(v) for v in versions if str(v) in track.project.judges):
        suites = [f for f in build_reliability(track, build, jv) if f.scope == "suite"]
        if suites:
            shown = ", ".join(
                f"{f.name} {shown_figure(f.pass_at_k)} / {shown_figure(f.pass_hat_k)}" for f in suites
            )
            parts.append(f"{jv}: {shown}")
    return "; ".join(parts)


def materialize_release_board(
    track: Track, partition_link: Callable[[str], str | None] = lambda _b: None
) -> Summary:
    """Every registered build (registration order) with its recorded decision, baseline and reason
    counts; markdown: the board table, each build linked to its partition (`partition_link(build)`).
    Values: `builds`, `allowed` (the builds that may ship), `blocked`."""
    boards = []
    for build in track.builds.by_registration():
        row, reasons = decision_and_reasons(track, build)
        boards.append(
            {
                "build": build,
                "decision": None if row is None else str(row["decision"]),
                "baseline": None if row is None else row.get("baseline"),
                **reason_counts(reasons),
                "reliability": board_reliability(track, build),
            }
        )
    values = {
        "builds": len(boards),
        "allowed": [b["build"] for b in boards if b["decision"] == "allow"],
        "blocked": [b["build"] for b in boards if b["decision"] == "block"],
    }
    return Summary(values, board_markdown(boards, partition_link=partition_link))
