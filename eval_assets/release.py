"""Release statistics over the warehouse: noise bands, capability reports, release decisions.

Each function is one materialization's work on top of a `Track` (the Dagster assets and the CLI both
call these). Verdicts of one judge version only are ever compared: a baseline without verdicts under
the candidate's judge version is refused with the fix, never silently compared under another.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from eval_assets.bridge import bridge_refusal
from eval_assets.capability.track import Summary, Track, TrackError
from eval_assets.config import BuildManifest
from eval_assets.present import (
    board_markdown,
    check_description,
    png_data_uri,
    reason_counts,
    reasons_markdown,
    recorded_reasons,
)
from eval_assets.report_html import render, write_html
from eval_assets.stats import (
    CapabilityReport,
    CheckOutcome,
    CheckSuiteEvidence,
    CrossJudgeVersionError,
    Evidence,
    NoiseBand,
    Reason,
    ReleaseDecision,
    compare,
    decide,
    noise_band,
    plot_report,
    summary_markdown,
)
from eval_assets.suite import suite_evidence
from eval_assets.tracing import traced

VERDICT_COLUMNS = "v.scenario_id, v.repeat, v.status, v.score, v.policy_failures"


def verdict_frame(track: Track, build: str, judge_version: str) -> pd.DataFrame:
    """Current verdicts of one build under one judge version (empty frame when there are none).

    `has_output` says whether the subject attempt behind each verdict produced an output (from
    `scenario_runs`; NULL when the run row is missing): policy failures and the evidence figures are
    counted over those attempts (`eval_assets.stats.release_invariant`).
    """
    return track.warehouse.query(
        f"SELECT {VERDICT_COLUMNS}, CASE WHEN r.scenario_id IS NULL THEN NULL "
        "ELSE r.output IS NOT NULL END AS has_output "
        "FROM judge_verdicts v LEFT JOIN scenario_runs r "
        "ON r.build = v.build AND r.scenario_id = v.scenario_id AND r.repeat = v.repeat "
        "WHERE v.build = ? AND v.judge_version = ? ORDER BY v.scenario_id, v.repeat",
        [build, judge_version],
    )


def registered_manifests(track: Track) -> dict[str, BuildManifest]:
    """Every registered build's manifest, resolved once (for one materialization); an unreadable
    manifest is left out: it is not a rebuild anyone can use."""
    out = {}
    for other in track.registered_builds():
        try:
            out[other] = track.build(other)
        except Exception:  # an unreadable manifest is not a rebuild anyone can use  # noqa: BLE001
            continue
    return out


def rebuild_of(
    track: Track,
    build: str,
    judge_version: str,
    excluding: str | None = None,
    registered: Mapping[str, BuildManifest] | None = None,
) -> tuple[str, pd.DataFrame] | None:
    """A registered unchanged rebuild of `build` (manifest `rebuild_of: build`) with verdicts under
    `judge_version`: (its id, its verdicts), the first by id; None when there is none.
    `registered`: the manifests already resolved for this materialization (else resolved here)."""
    manifests = registered if registered is not None else registered_manifests(track)
    for other, manifest in sorted(manifests.items()):
        if other in (build, excluding):  # never the candidate itself: it would be its own noise reference
            continue
        if manifest.rebuild_of == build:
            frame = verdict_frame(track, other, judge_version)
            if not frame.empty:
                return other, frame
    return None


def band_for(
    track: Track,
    build: str,
    judge_version: str,
    frame: pd.DataFrame,
    excluding: str | None = None,
    registered: Mapping[str, BuildManifest] | None = None,
) -> NoiseBand:
    """The build's noise band, with the run-to-run variance of a registered unchanged rebuild if any
    (other than `excluding`, the candidate being compared)."""
    rebuild = rebuild_of(track, build, judge_version, excluding, registered)
    return noise_band(frame, rebuild=None if rebuild is None else rebuild[1])


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


def run_noise_bands(track: Track, build: str, judge_version: str, run_id: str) -> Summary:
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


def newest_allowed_build(track: Track, *, excluding: str) -> str | None:
    """The newest build whose recorded decision was `allow` (by when the decision was written)."""
    frame = track.warehouse.query(
        "SELECT build FROM release_decisions WHERE decision = 'allow' AND build <> ? "
        "ORDER BY written_at DESC LIMIT 1",
        [excluding],
    )
    return None if frame.empty else str(frame["build"].iloc[0])


def baseline_for(track: Track, manifest: BuildManifest) -> str | None:
    """The manifest's baseline, else the newest build whose decision was allow, else None."""
    return manifest.baseline or newest_allowed_build(track, excluding=manifest.id)


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
    )
    if baseline is not None and (base is None or base.empty):
        report = _note(report, f"baseline {baseline} has no verdicts yet")
    return ReportRun(report, baseline, band)


def _note(report: CapabilityReport, reason: str) -> CapabilityReport:
    return replace(report, decided_nothing=report.decided_nothing or reason)


def run_capability_report(track: Track, build: str, judge_version: str, run_id: str) -> Summary:
    """The report against the build's baseline; writes `capability_reports` and the report's plot
    (EVAL_HOME/reports/<build>/<judge version>.png). The summary's markdown is the report with the
    plot embedded; its files name the plot (`plot_file`)."""
    manifest = track.build(build)  # resolved once for this materialization
    baseline = baseline_for(track, manifest)
    run = build_report(track, manifest, judge_version, baseline, registered_manifests(track))
    sources = {sid: s.source for sid, s in track.project.scenarios.items()}
    rows = capability_report_rows(run, build, judge_version, sources)
    path = track.warehouse.write_partition(
        "capability_reports", {"build": build, "judge_version": judge_version}, rows, run_id
    )
    exemptions = exemptions_in_force(track, manifest, judge_version)
    markdown = summary_markdown(run.report)
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
        "findings": len(rows),
        "block_findings": verdicts.count("block"),
        "investigate_findings": verdicts.count("investigate"),
        "aa_block_rate": run.report.aa_block_rate,
        "aa_flag_rate": run.report.aa_flag_rate,
        "optimal_repeats": _num(run.report.optimal_repeats),
        "partition_file": str(path),
        "reason_rows": reason_rows,
    }
    png = plot_report(run.report)
    plot = track.home.root / "reports" / build / f"{judge_version}.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    plot.write_bytes(png)
    return Summary(values, f"{markdown}\n\n{png_markdown(png)}\n", {"plot_file": plot})


def exemptions_in_force(track: Track, manifest: BuildManifest, judge_version: str) -> list[str]:
    """Scenarios judged by a judge of the subject's own provider family, with their recorded reason."""
    judge = track.judge(judge_version)
    if judge.family != manifest.subject.family:
        return []
    return [f"{s.id}: {s.family_exemption}" for s in track.project.scenarios_for(judge) if s.family_exemption]


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


def decision_versions(track: Track, manifest: BuildManifest) -> list[str]:
    """Judge versions whose reports a release decision combines: the build's active versions."""
    return [j.version_id for j in track.judges_for(manifest) if j.status == "active"]


EvidenceFailure = Callable[[str], str | None]
"""Judge version -> why its evidence is missing (its latest materialization failed, or none was
made), as the orchestrator knows it; None when nothing is known to be wrong."""


def make_decision(
    track: Track,
    manifest: BuildManifest,
    extra: Sequence[Evidence] = (),
    evidence_failure: EvidenceFailure = lambda _jv: None,
) -> tuple[ReleaseDecision, str | None]:
    """Combine every active judge version's report (and `extra` evidence, e.g. the deterministic suite).

    `manifest` is the build resolved once for this decision; the other registered builds (for the
    noise bands' rebuilds) are resolved once here too. A version `evidence_failure` names is evidence
    missing: no decision rests on it, and the reason says why (never an older report of it)."""
    build = manifest.id
    baseline = baseline_for(track, manifest)
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
    evidence.extend(extra)
    decision = decide(evidence)
    exemptions = [e for jv in versions for e in exemptions_in_force(track, manifest, jv)]
    if exemptions:  # every decision lists the provider-family exemptions in force
        notes = tuple(Reason("info", "provider family", "exemption", e) for e in exemptions)
        decision = ReleaseDecision(decision.decision, decision.reasons + notes)
    return decision, baseline


@traced(
    "eval.decision", lambda a: {"eval.build": a["build"]}, lambda s: {"eval.decision": str(s["decision"])}
)
def run_release_decision(
    track: Track,
    build: str,
    run_id: str,
    extra: Sequence[Evidence] = (),
    evidence_failure: EvidenceFailure = lambda _jv: None,
) -> Summary:
    """Decide and write `release_decisions` (one row) and `release_decision_reasons` (one per reason)."""
    manifest = track.build(build)  # resolved once for this decision
    decision, baseline = make_decision(track, manifest, extra, evidence_failure)
    versions = decision_versions(track, manifest)
    row = release_decision_row(build, decision, versions, baseline)
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


def noise_band_rows(band: NoiseBand, build: str, judge_version: str) -> pd.DataFrame:
    """The `noise_bands` rows of one build's band under one judge version (suite row and one per scenario)."""
    return band.table().assign(build=build, judge_version=judge_version)


def capability_report_rows(
    run: ReportRun, build: str, judge_version: str, sources: Mapping[str, str]
) -> pd.DataFrame:
    """The `capability_reports` rows of one report: a row per finding, with the report's baseline and
    simulated A/A rates, and where each scenario came from (`sources[scenario_id]`: authored or
    trajectory; None for a suite-wide finding or a scenario no longer in the project)."""
    rows = pd.DataFrame(run.report.rows()).assign(
        build=build,
        judge_version=judge_version,
        baseline=run.baseline,
        aa_flag_rate=run.report.aa_flag_rate,
        aa_block_rate=run.report.aa_block_rate,
    )
    rows["source"] = [sources.get(sid) if isinstance(sid, str) else None for sid in rows["scenario_id"]]
    return rows


def release_decision_row(
    build: str, decision: ReleaseDecision, versions: Sequence[str], baseline: str | None
) -> dict[str, Any]:
    """The one `release_decisions` row of a decision (reasons one per line, judge versions comma-joined)."""
    return {
        "build": build,
        "decision": decision.decision,
        "reasons": "\n".join(r.text() for r in decision.reasons),
        "judge_versions": ",".join(versions),
        "baseline": baseline,
    }


def release_decision_reason_rows(build: str, decision: ReleaseDecision) -> list[dict[str, Any]]:
    """The `release_decision_reasons` rows of a decision, ranked from 1 (most severe first)."""
    return [dict(r, build=build, rank=i) for i, r in enumerate(decision.rows(), start=1)]


def decide_release(
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
    summary = run_release_decision(track, build, run_id, [suite_evidence(track, build)], evidence_failure)
    rows = recorded_reasons(track.warehouse, build, run_id)
    plots = track.home.root / "reports" / build
    markdown = reasons_markdown(
        build,
        str(summary["decision"]),
        rows,
        report_link=report_link,
        plot=lambda jv: png_data_uri(plots / f"{jv}.png"),
    )
    page = write_build_report(track, build, track.home.root / "reports" / build / "report.html")
    return Summary({**summary.values, "reason_rows": rows}, markdown, {"html_report": page})


def write_build_report(track: Track, build: str, path: Path) -> Path:
    """The build's self-contained HTML report (eval_assets.report_html) written to `path`, atomically:
    its recorded decision (a stale one as none, saying why) and reasons, its reports and transcripts."""
    row, rows = decision_and_reasons(track, build)
    return write_html(render(track, build, row, rows), path)


def decision_and_reasons(track: Track, build: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The build's recorded decision (`recorded_decision`) and its reasons: the recorded ones, or for
    a stale decision the one `none` reason saying why; (None, []) when none is recorded."""
    row = recorded_decision(track, build)
    if row is None:
        return None, []
    if row.get("stale"):
        return row, [{"severity": "none", "source": "release", "message": str(row["reasons"])}]
    return row, recorded_reasons(track.warehouse, build)


def recorded_decision(track: Track, build: str) -> dict[str, Any] | None:
    """The build's recorded decision; `none` (stale) when its subject runs, or the verdicts of a judge
    version it was decided on, were rewritten after it (e.g. a re-run whose later steps failed): a
    decision never outlives the evidence it was made on."""
    frame = track.warehouse.query(
        "SELECT decision, reasons, baseline, judge_versions, written_at FROM release_decisions WHERE build = ?",
        [build],
    )
    if frame.empty:
        return None
    row = {k: frame[k].iloc[0] for k in ("decision", "reasons", "baseline")}
    listed = frame["judge_versions"].iloc[0]  # VARCHAR[] in the view (the Parquet file holds "a,b")
    versions = [str(v) for v in (listed.split(",") if isinstance(listed, str) else list(listed)) if v]
    newer = track.warehouse.query(
        "SELECT 'scenario_runs' AS dataset, max(written_at) AS at FROM scenario_runs WHERE build = ? "
        "UNION ALL SELECT 'judge_verdicts', max(written_at) FROM judge_verdicts "
        "WHERE build = ? AND list_contains(?, judge_version)",
        [build, build, versions],
    )
    decided_at = frame["written_at"].iloc[0]
    stale = [str(r.dataset) for r in newer.itertuples() if pd.notna(r.at) and r.at > decided_at]
    if stale:
        row["decision"] = "none"
        row["stale"] = True
        row["reasons"] = (
            f"[none] release: the recorded decision ({frame['decision'].iloc[0]}) is stale: "
            f"{' and '.join(stale)} of {build} were written after it; materialize release_decision again"
        )
    return row


def png_markdown(png: bytes) -> str:
    return f"![capability report](data:image/png;base64,{base64.b64encode(png).decode()})"


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# --- what the UI shows per build and over all builds ------------------------------------------------


def release_approval(track: Track, build: str) -> Summary:
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


def release_board(track: Track, partition_link: Callable[[str], str | None] = lambda _b: None) -> Summary:
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
            }
        )
    values = {
        "builds": len(boards),
        "allowed": [b["build"] for b in boards if b["decision"] == "allow"],
        "blocked": [b["build"] for b in boards if b["decision"] == "block"],
    }
    return Summary(values, board_markdown(boards, partition_link=partition_link))
