"""What the release assets hand to Dagster, read value by value: the approval of each build, the board,
a decision as its asset records it, and the rows a report and its reliability figures become.

Each test calls the function it reads in its own body (on a copy of the home where it writes): the
mutation run (scripts/mutation) maps a function to the tests that call it, and a call made by a shared
fixture is mapped to the first test that sets the fixture up only.

One home is decided once through the track, the way `evaltrack demo` decides it: the baseline (no
baseline of its own: none), its unchanged rebuild (allow), the regressed candidate (block), each with
a passing deterministic suite, and a fourth build registered and never run (no decision recorded).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from shared import changed_manifest, current_file, edit_in_place, record_one_gate_suite, slow_project_copy

from eval_assets import release
from eval_assets.capability.baselines import band_for, verdict_frame
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Summary, Track, TrackError
from eval_assets.config import Project, load_project
from eval_assets.home import EvalHome
from eval_assets.present import check_description, png_uri, recorded_reasons
from eval_assets.report_html import render
from eval_assets.stats import CapabilityReport, Finding, NoiseBand, Reliability, compare, decide

JUDGE = "helpfulness-v1"
BASE, REBUILD, CAND = "agent-2026-11-28-base", "agent-2026-11-29-rebuild", "agent-2026-11-30-cand"
UNDECIDED = "agent-2026-12-01-undecided"


def report_link(version: str) -> str:
    return f"/reports/{version}"


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory, project: Project) -> tuple[Path, dict[str, Summary]]:
    """The decided home and each build's `materialize_release_decision` summary (and, under
    `report:<build>`, its `materialize_capability_report` summary)."""
    tmp = tmp_path_factory.mktemp("decided")
    home = EvalHome(tmp / "home").ensure()
    track = Track(project, home)
    summaries = {}
    for name in ("baseline.yaml", "rebuild.yaml", "candidate.yaml"):
        build = track.register_build(changed_manifest(tmp, project, name, judges=[JUDGE])).id
        materialize_scenario_runs(track, build, f"runs-{build}")
        materialize_judge_verdicts(track, build, JUDGE, f"verdicts-{build}")
        summaries[f"bands:{build}"] = release.materialize_noise_bands(track, build, JUDGE, f"bands-{build}")
        summaries[f"report:{build}"] = release.materialize_capability_report(
            track, build, JUDGE, f"report-{build}"
        )
        record_one_gate_suite(track, build, failing=False, milestone=3, run_id=f"suite-{build}")
        summaries[build] = release.materialize_release_decision(
            track, build, f"decide-{build}", report_link=report_link
        )
    track.register_build(changed_manifest(tmp, project, "rebuild.yaml", id=UNDECIDED, judges=[JUDGE]))
    assert {b: str(s["decision"]) for b, s in summaries.items() if ":" not in b} == {
        BASE: "none",
        REBUILD: "allow",
        CAND: "block",
    }
    return home.root, summaries


def track_of(root: Path, project: Project) -> Track:
    return Track(project, EvalHome(root))


def copy_of(decided: tuple[Path, dict[str, Summary]], tmp_path: Path) -> Path:
    target = tmp_path / "home"
    shutil.copytree(decided[0], target, symlinks=True)
    return target


def test_only_the_allowed_build_is_approved_and_each_approval_names_its_decision_baseline_and_reasons(
    decided: tuple[Path, dict[str, Summary]], project: Project
) -> None:
    track = track_of(decided[0], project)
    reasons = {b: decided[1][b]["reason_rows"] for b in (BASE, REBUILD, CAND)}
    approvals = {b: release.materialize_release_approval(track, b).values for b in (BASE, REBUILD, CAND)}
    assert approvals[REBUILD] == {
        "approved": True,
        "decision": "allow",
        "baseline": BASE,
        "why": check_description(REBUILD, "allow", reasons[REBUILD]),
    }
    assert approvals[CAND] == {
        "approved": False,
        "decision": "block",
        "baseline": BASE,
        "why": check_description(CAND, "block", reasons[CAND]),
    }
    blocks = reason_count(reasons[CAND], "block")
    assert blocks >= 1 and approvals[CAND]["why"].startswith(f"{CAND}: block — {blocks} block: ")
    # the baseline decided nothing (it has no baseline): "no decision", and its missing baseline reads "none"
    assert approvals[BASE] == {
        "approved": False,
        "decision": "none",
        "baseline": "none",
        "why": check_description(BASE, "no decision", reasons[BASE]),
    }
    assert approvals[BASE]["why"].startswith(f"{BASE}: no decision — ")
    assert release.materialize_release_approval(track, UNDECIDED).values == {
        "approved": False,
        "decision": "none",
        "baseline": "none",
        "why": f"{UNDECIDED}: no decision — release_decision of {UNDECIDED} is not materialized",
    }


def test_the_board_lists_every_registered_build_in_order_with_what_may_ship_and_what_is_blocked(
    decided: tuple[Path, dict[str, Summary]], project: Project
) -> None:
    board = release.materialize_release_board(
        track_of(decided[0], project), partition_link=lambda b: f"/p/{b}" if b != UNDECIDED else None
    )
    assert board.values == {"builds": 4, "allowed": [REBUILD], "blocked": [CAND]}
    lines = [line for line in board.markdown.splitlines() if line.startswith("| ") and "---" not in line]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    block = {b: reason_count(decided[1][b]["reason_rows"], "block") for b in (BASE, REBUILD, CAND)}
    assert [c[:4] for c in cells] == [
        # each decision with its own coloured mark (an image defined once below the table) and its word
        [f"[{BASE}](/p/{BASE})", "![none][none] no decision", "none", str(block[BASE])],
        [f"[{REBUILD}](/p/{REBUILD})", "![allow][allow] allow", BASE, str(block[REBUILD])],
        [f"[{CAND}](/p/{CAND})", "![block][block] **BLOCK**", BASE, str(block[CAND])],
        [UNDECIDED, "not decided yet", "none", "0"],
    ]
    assert board.markdown.startswith("## Release board: 1 of 4 builds may ship")


def reason_count(rows: list[dict[str, Any]], severity: str) -> int:
    return sum(r["severity"] == severity for r in rows)


def test_a_current_decision_reads_back_with_its_baseline_and_recorded_reasons(
    decided: tuple[Path, dict[str, Summary]], project: Project
) -> None:
    track = track_of(decided[0], project)
    row, reasons = release.decision_and_reasons(track, CAND)
    assert row == {"decision": "block", "baseline": BASE, "stale": False}
    recorded = recorded_reasons(track.warehouse, CAND)
    keys = ("severity", "source", "finding", "message")
    assert [{k: r[k] for k in keys} for r in reasons] == [{k: r[k] for k in keys} for r in recorded]
    assert release.decision_and_reasons(track, UNDECIDED) == (None, [])


def test_a_stale_allow_reads_as_no_decision_with_one_reason_per_change(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    track = track_of(copy_of(decided, tmp_path), project)
    record_one_gate_suite(track, REBUILD, failing=False, milestone=3, run_id="suite-again")
    row, reasons = release.decision_and_reasons(track, REBUILD)
    assert row == {"decision": "none", "baseline": BASE, "stale": True}
    assert reasons and all(r["severity"] == "none" and r["source"] == "release" for r in reasons)
    assert all(set(r) == {"severity", "source", "message"} for r in reasons)
    for r in reasons:
        assert r["message"].startswith("the recorded decision (allow) is stale: ")
        assert r["message"].endswith("; materialize release_decision again")
    approval = release.materialize_release_approval(track, REBUILD).values
    assert approval["approved"] is False and approval["decision"] == "none"
    assert approval["why"].startswith(f"{REBUILD}: no decision — ")


def test_a_damaged_decision_reads_as_no_decision_naming_the_damage(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    root = copy_of(decided, tmp_path)
    edit_in_place(current_file(root, "release_decisions", REBUILD), 40)
    row, reasons = release.decision_and_reasons(track_of(root, project), REBUILD)
    assert row == {"decision": "none", "baseline": None, "damaged": True}
    [reason] = reasons
    assert set(reason) == {"severity", "source", "message"}
    assert (reason["severity"], reason["source"]) == ("none", "evidence")
    assert reason["message"].startswith(f"the decision of {REBUILD} cannot be verified: ")
    assert len(reason["message"]) > len(f"the decision of {REBUILD} cannot be verified: ")


def test_the_decision_asset_records_its_reasons_links_each_report_shows_its_plot_and_writes_the_page(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    root = copy_of(decided, tmp_path)
    track = track_of(root, project)
    summary = release.materialize_release_decision(track, CAND, "decide-again", report_link=report_link)
    assert summary["reason_rows"] == recorded_reasons(track.warehouse, CAND, "decide-again")
    assert summary["reason_rows"]
    assert reason_count(summary["reason_rows"], "block") >= 1
    markdown = summary.markdown
    assert markdown.startswith(f"## {CAND}: block\n")
    assert f"]({report_link(JUDGE)})" in markdown
    plot = root / "reports" / CAND / f"{JUDGE}.png"
    assert png_uri(plot.read_bytes()) in markdown
    page = summary.files["html_report"]
    assert page == root / "reports" / CAND / "report.html"
    assert CAND in page.read_text()


def test_a_judge_version_whose_evidence_failed_keeps_the_decision_from_allowing(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    track = track_of(copy_of(decided, tmp_path), project)
    failure = f"the capability report of {JUDGE} failed"
    summary = release.materialize_release_decision(
        track, REBUILD, "decide-again", evidence_failure=lambda jv: failure if jv == JUDGE else None
    )
    assert summary["decision"] != "allow"
    [reason] = [r for r in summary["reason_rows"] if failure in r["message"]]
    assert (reason["severity"], reason["source"], reason["finding"]) == ("none", JUDGE, "report")


def test_reliability_rows_are_two_info_rows_per_figure_with_where_and_what_was_counted() -> None:
    figures = [
        Reliability("scenario", "coding.a", 5, 3, 5, 1.0, 0.0),
        Reliability("scenario", "coding.b", 5, 4, 5, None, 0.5),
        Reliability("suite", "coding", 5, 1, 2, 0.5, None),
    ]
    rows = release.reliability_rows(figures, 0.6)
    common = {"p_value": None, "q_value": None, "verdict": "info"}
    at_floor = "k=5, 3 of 5 repeats at or above the floor 0.6"
    unknown = "; unknown: a judge could not score a repeat"
    assert rows == [
        {"finding": "pass_at_k", "scenario_id": "coding.a", "statistic": 1.0, **common,
         "detail": f"scenario coding.a: {at_floor}"},
        {"finding": "pass_hat_k", "scenario_id": "coding.a", "statistic": 0.0, **common,
         "detail": f"scenario coding.a: {at_floor}"},
        {"finding": "pass_at_k", "scenario_id": "coding.b", "statistic": None, **common,
         "detail": "scenario coding.b: k=5, 4 of 5 repeats at or above the floor 0.6" + unknown},
        {"finding": "pass_hat_k", "scenario_id": "coding.b", "statistic": 0.5, **common,
         "detail": "scenario coding.b: k=5, 4 of 5 repeats at or above the floor 0.6"},
        {"finding": "pass_at_k", "scenario_id": None, "statistic": 0.5, **common,
         "detail": "suite coding: k=5, 2 scenarios, 1 solved in all repeats"},
        {"finding": "pass_hat_k", "scenario_id": None, "statistic": None, **common,
         "detail": "suite coding: k=5, 2 scenarios, 1 solved in all repeats" + unknown},
    ]  # fmt: skip


def a_report(findings: tuple[Finding, ...]) -> CapabilityReport:
    return CapabilityReport(
        candidate_build=CAND,
        baseline_build=BASE,
        judge_version=JUDGE,
        floor=0.6,
        alpha=0.05,
        q=0.1,
        n_judge_versions=1,
        band_half_width=0.1,
        optimal_repeats=None,
        aa_block_rate=0.012,
        aa_flag_rate=0.034,
        aa_replications=200,
        aa_seed=7,
        decided_nothing=None,
        findings=findings,
        scenarios=pd.DataFrame(),
    )


def plain(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`frame`'s records with NaN read as None (a missing figure is NaN in a frame, None in a finding)."""
    return [{k: None if v is None or (isinstance(v, float) and v != v) else v for k, v in r.items()}
            for r in frame.to_dict("records")]  # fmt: skip


FINDINGS = (
    Finding("mean_drop", None, -0.02, 0.4, None, "ok", "suite mean"),
    Finding("scenario_drop", "coding.a", -0.3, 0.001, 0.004, "block", "t=5.1", rule="bh"),
)


def test_finding_rows_carry_every_report_column_in_order() -> None:
    rows = release.finding_rows(a_report(FINDINGS))
    assert list(rows.columns) == list(release.CAPABILITY_REPORT_COLUMNS)
    assert plain(rows) == [
        {"finding": "mean_drop", "scenario_id": None, "statistic": -0.02, "p_value": 0.4,
         "q_value": None, "verdict": "ok", "detail": "suite mean"},
        {"finding": "scenario_drop", "scenario_id": "coding.a", "statistic": -0.3, "p_value": 0.001,
         "q_value": 0.004, "verdict": "block", "detail": "t=5.1"},
    ]  # fmt: skip
    assert list(release.finding_rows(a_report(())).columns) == list(release.CAPABILITY_REPORT_COLUMNS)


@pytest.mark.parametrize("findings", [FINDINGS, ()], ids=["with-findings", "no-findings"])
def test_report_rows_stamp_each_finding_and_reliability_row_with_the_report_and_its_source(
    findings: tuple[Finding, ...],
) -> None:
    run = release.ReportRun(a_report(findings), BASE, None)
    figures = [Reliability("scenario", "coding.a", 5, 3, 5, 1.0, 0.0)]
    sources = {"coding.a": "trajectory"}
    rows = release.capability_report_rows(run, CAND, JUDGE, sources, figures, 0.6)
    expected = [*release.finding_rows(run.report).to_dict("records"), *release.reliability_rows(figures, 0.6)]
    assert list(rows.index) == list(range(len(expected)))
    assert plain(rows[list(release.CAPABILITY_REPORT_COLUMNS)]) == plain(pd.DataFrame(expected))
    assert set(rows["build"]) == {CAND} and set(rows["judge_version"]) == {JUDGE}
    assert set(rows["baseline"]) == {BASE}
    assert set(rows["aa_flag_rate"]) == {0.034} and set(rows["aa_block_rate"]) == {0.012}
    named = [isinstance(sid, str) for sid in rows["scenario_id"]]
    assert [s if isinstance(s, str) else None for s in rows["source"]] == [
        "trajectory" if n else None for n in named
    ]
    assert sum(named) == len(expected) - (1 if findings else 0)
    # the floor named in the reliability rows is the one given, not a default
    assert rows["detail"].iloc[-1].endswith("at or above the floor 0.6")


def test_the_report_asset_shows_its_sections_each_on_its_own_lines_and_names_its_reasons(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """The report's summary, then its reliability table, then judge-human agreement, each starting on a
    line of its own, then the plot; its reasons as severity, source, message and advice; its rows'
    reliability figures judged against the rubric's own floor."""
    root = copy_of(decided, tmp_path)
    summary = release.materialize_capability_report(track_of(root, project), CAND, JUDGE, "report-again")
    lines = summary.markdown.splitlines()
    assert lines[0] == f"### Capability report: judge {JUDGE}, {CAND} vs {BASE}"
    reliability = lines.index(
        "**Reliability over repeats** (pass@k: solved in at least one of k repeats; pass^k: in all k)"
    )
    agreement = next(i for i, line in enumerate(lines) if line.startswith("**Judge-human agreement** "))
    assert 0 < reliability < agreement and lines[reliability - 1] == "" and lines[agreement - 1] == ""
    plot = root / "reports" / CAND / f"{JUDGE}.png"
    assert summary.files == {"plot_file": plot}
    assert lines[-1] == release.png_markdown(plot.read_bytes())
    assert "Provider-family exemptions" not in summary.markdown  # the judge's family is not the subject's
    reasons = summary["reason_rows"]
    assert reasons and all(set(r) == {"severity", "source", "message", "advice"} for r in reasons)
    assert [r["severity"] for r in reasons if r["severity"] == "block"]
    assert all(r["source"] == f"judge {JUDGE}, {CAND} vs {BASE}" for r in reasons)
    assert (summary["verdict"], summary["baseline"], summary["decided_nothing"]) == ("block", BASE, "")
    floor = project.rubric_for(track_of(root, project).judge(JUDGE)).floor
    details = track_of(root, project).warehouse.query(
        "SELECT detail FROM capability_reports WHERE build = ? AND finding = 'pass_at_k' "
        "AND scenario_id IS NOT NULL",
        [CAND],
    )["detail"]
    assert len(details) and all(f"at or above the floor {floor:g}" in d for d in details)


def test_the_report_asset_values_agree_with_the_rows_it_wrote(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """What the asset's metadata shows (verdict, baseline, counts, A/A rates, pass^k per suite, the
    partition file) is what its `capability_reports` rows say; a report with no baseline says so."""
    summaries = decided[1]
    root = copy_of(decided, tmp_path)
    track = track_of(root, project)
    values = release.materialize_capability_report(track, CAND, JUDGE, "report-again").values
    rows = track.warehouse.query("SELECT * FROM capability_reports WHERE build = ?", [CAND])
    findings = rows[~rows["finding"].isin(["pass_at_k", "pass_hat_k"])]
    suites = rows[(rows["finding"] == "pass_hat_k") & rows["scenario_id"].isna()]
    assert values["verdict"] == "block" and values["baseline"] == BASE and values["decided_nothing"] == ""
    assert values["findings"] == len(findings)
    assert values["block_findings"] == (rows["verdict"] == "block").sum() >= 1
    assert values["investigate_findings"] == (rows["verdict"] == "investigate").sum() >= 1
    assert (values["aa_block_rate"], values["aa_flag_rate"]) == (
        rows["aa_block_rate"].iloc[0],
        rows["aa_flag_rate"].iloc[0],
    )
    names = [d.split(":")[0].removeprefix("suite ") for d in suites["detail"]]
    assert sorted(values["pass_hat_k"]) == sorted(names) and len(names) >= 2
    stored = {n: None if v != v else v for n, v in zip(names, suites["statistic"], strict=True)}
    assert values["pass_hat_k"] == stored and any(v is not None for v in stored.values())
    # the band the report stands on is the baseline's (whose optimal repeats the example suite leaves open)
    assert values["optimal_repeats"] == summaries[f"bands:{BASE}"]["optimal_repeats"]
    assert values["partition_file"] == str(current_file(root, "capability_reports", CAND))
    base = summaries[f"report:{BASE}"].values
    assert base["baseline"] == "none" and base["decided_nothing"] and base["verdict"] == "none"


def test_a_report_judged_by_the_subjects_own_family_lists_the_exemptions_in_force(
    tmp_path: Path, project: Project
) -> None:
    """A subject of the judge's own provider family is judged only where a scenario records an
    exemption, and the report says which, with the recorded reason, in a section of its own."""
    root = slow_project_copy(tmp_path / "project", {})
    shipped = load_project(root)
    judged = sorted(s.id for s in shipped.scenarios_judged_by(shipped.judges[JUDGE]))[:2]
    reasons = {sid: f"reviewed by hand weekly ({n})" for n, sid in enumerate(judged)}
    for sid in judged:
        path = shipped.sources[f"scenario{sid}"]
        scenario = yaml.safe_load(path.read_text())
        path.write_text(yaml.safe_dump({**scenario, "family_exemption": reasons[sid]}, sort_keys=False))
    judge = yaml.safe_load((root / "judges" / f"{JUDGE}.yaml").read_text())
    own = load_project(root)
    track = Track(own, EvalHome(tmp_path / "home").ensure())
    manifest = changed_manifest(tmp_path, own, "baseline.yaml", judges=[JUDGE])
    data = yaml.safe_load(manifest.read_text())
    data["subject"]["family"] = judge["family"]
    manifest.write_text(yaml.safe_dump(data))
    build = track.register_build(manifest).id
    materialize_scenario_runs(track, build, "runs")
    materialize_judge_verdicts(track, build, JUDGE, "verdicts")
    markdown = release.materialize_capability_report(track, build, JUDGE, "report").markdown
    section = "**Provider-family exemptions in force**"
    listed = "".join(f"- {sid}: {reasons[sid]}\n" for sid in judged)
    assert f"\n{section}\n\n{listed}" in markdown
    assert markdown.count(section) == 1 and markdown.startswith("### Capability report: ")
    # and the release decision lists them, one info reason each (the build has no baseline: none)
    decision = release.write_release_decision(track, build, "decide", lambda: [])
    notes = [r for r in recorded_reasons(track.warehouse, build, "decide") if r["finding"] == "exemption"]
    assert decision["decision"] == "none"
    assert [(r["severity"], r["source"], r["message"]) for r in notes] == [
        ("info", "provider family", f"{sid}: {reasons[sid]}") for sid in judged
    ]


def test_a_report_whose_baseline_has_no_verdicts_says_so_and_decides_nothing(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """A candidate whose named baseline is registered but not judged: the report decides nothing and
    says that baseline has no verdicts yet (not "no baseline", which would send the engineer looking for
    a manifest field that is there)."""
    track = track_of(copy_of(decided, tmp_path), project)
    orphan = "agent-2026-12-02-orphan"
    manifest = changed_manifest(
        tmp_path, project, "rebuild.yaml", id=orphan, baseline=UNDECIDED, judges=[JUDGE]
    )
    track.register_build(manifest)
    materialize_scenario_runs(track, orphan, "runs")
    materialize_judge_verdicts(track, orphan, JUDGE, "verdicts")
    summary = release.materialize_capability_report(track, orphan, JUDGE, "report")
    expected = f"baseline {UNDECIDED} has no verdicts yet under {JUDGE}"
    assert (summary["verdict"], summary["baseline"], summary["decided_nothing"]) == (
        "none",
        UNDECIDED,
        expected,
    )
    assert f"**Verdict: none** — {expected}" in summary.markdown


def test_the_noise_band_asset_values_are_its_suite_row_and_the_suite_row_summarises_the_scenarios(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """`noise_bands`: one suite row (no scenario id, the mean of the scenario means, the mean
    within-scenario variance of the scenarios with two or more scored repeats, a band centred on 0),
    then a row per scenario; the asset's values are that suite row, the scenario count and the file."""
    root = copy_of(decided, tmp_path)
    track = track_of(root, project)
    values = release.materialize_noise_bands(track, BASE, JUDGE, "bands-again").values
    rows = track.warehouse.query("SELECT * FROM noise_bands WHERE build = ?", [BASE])
    suite, per = rows[rows["scope"] == "suite"], rows[rows["scope"] == "scenario"]
    assert len(suite) == 1 and suite["scenario_id"].isna().all() and len(per) >= 16
    [row] = suite.to_dict("records")
    assert row["mean"] == pytest.approx(per["mean"].mean(), rel=1e-12)
    assert row["within_var"] == pytest.approx(per.loc[per["n_repeats"] >= 2, "within_var"].mean(), rel=1e-12)
    assert (row["low"], row["high"]) == (-row["half_width"], row["half_width"]) and row["half_width"] > 0
    assert per["scenario_id"].map(type).eq(str).all()
    assert values == {
        "suite_half_width": round(row["half_width"], 6),
        "suite_mean": round(row["mean"], 6),
        "within_var": round(row["within_var"], 6),
        "between_var": round(row["between_var"], 6),
        "between_build_var": values["between_build_var"],
        "rebuild_used": values["rebuild_used"],
        "optimal_repeats": values["optimal_repeats"],
        "scenarios": len(per),
        "partition_file": str(current_file(root, "noise_bands", BASE)),
    }
    # the baseline's band takes its registered unchanged rebuild's spread (docs/methods.md: noise band)
    assert values["rebuild_used"] is True and values["between_build_var"] is not None
    own = band_for(track, BASE, JUDGE, verdict_frame(track, BASE, JUDGE))
    assert own.between_build_df > 0 and values["between_build_var"] == round(own.between_build_var, 6)


def band_figures(band: NoiseBand | None) -> tuple[Any, ...] | None:
    return None if band is None else (band.half_width, band.between_build_var, band.between_build_df)


def test_a_report_compares_on_its_baselines_band_widened_by_a_registered_rebuild_never_by_itself(
    decided: tuple[Path, dict[str, Summary]], project: Project
) -> None:
    """The candidate's report is `compare` on the baseline's noise band with the run-to-run variance of
    the baseline's registered unchanged rebuild; the rebuild's own report never widens the band with
    itself. The report carries the rubric's floor, the number of judge versions the budget is split
    over (one here), and names its baseline."""
    track = track_of(decided[0], project)
    base = verdict_frame(track, BASE, JUDGE)
    floor = project.rubric_for(track.judge(JUDGE)).floor
    widened = band_for(track, BASE, JUDGE, base, excluding=CAND)
    alone = band_for(track, BASE, JUDGE, base, excluding=REBUILD)
    assert widened.between_build_df > 0 and alone.between_build_df == 0  # the home has one rebuild

    run = release.build_report(track, track.build(CAND), JUDGE, BASE)
    assert run.baseline == BASE
    assert band_figures(run.band) == band_figures(widened)
    cand = verdict_frame(track, CAND, JUDGE)
    expected = compare(
        base, cand, floor, widened, n_judge_versions=1, judge_version=JUDGE, baseline_build=BASE, candidate_build=CAND
    )
    unwidened = compare(
        base, cand, floor, None, n_judge_versions=1, judge_version=JUDGE, baseline_build=BASE, candidate_build=CAND
    )
    assert run.report.band_half_width == expected.band_half_width
    assert (run.report.floor, run.report.n_judge_versions, run.report.baseline_build) == (floor, 1, BASE)
    assert [repr(f) for f in run.report.findings] == [repr(f) for f in expected.findings]
    # the mean-drop finding names where its between-build variance came from
    assert "from a registered rebuild" in " ".join(f.detail for f in expected.findings)
    assert [repr(f) for f in run.report.findings] != [repr(f) for f in unwidened.findings]

    rebuild = release.build_report(track, track.build(REBUILD), JUDGE, BASE)
    assert band_figures(rebuild.band) == band_figures(alone)
    assert "from a registered rebuild" not in " ".join(f.detail for f in rebuild.report.findings)


def test_a_report_against_an_unregistered_baseline_is_refused_naming_both_builds(
    decided: tuple[Path, dict[str, Summary]], project: Project
) -> None:
    track = track_of(decided[0], project)
    with pytest.raises(TrackError) as refused:
        release.build_report(track, track.build(CAND), JUDGE, "agent-2026-01-01-nowhere")
    assert str(refused.value) == f"baseline build 'agent-2026-01-01-nowhere' of {CAND!r} is not registered"


def test_a_decision_names_each_judge_version_it_cannot_use_with_why_and_decides_on_the_others(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """A version whose evidence is known to have failed, a bridging version whose offset is not
    published, and a version the candidate has no verdicts under: each is one `none` reason naming the
    version and why, never a decision resting on it; the versions after it in the manifest still
    decide (the candidate blocks under helpfulness-v1)."""
    track = track_of(copy_of(decided, tmp_path), project)
    cand = track.build(CAND)
    both = cand.model_copy(update={"judges": ["safety-v1", JUDGE]})

    def refusals(decision: Any) -> list[tuple[str, str, str, str]]:
        return [
            (r.severity, r.source, r.finding, r.message) for r in decision.reasons if r.finding == "report"
        ]

    blocking = release.make_decision(track, cand)[0]
    assert blocking.decision == "block" and refusals(blocking) == []

    failed = "its judge_verdicts materialization failed"
    decision, baseline = release.make_decision(
        track, both, evidence_failure=lambda jv: failed if jv == "safety-v1" else None
    )
    assert (decision.decision, baseline) == ("block", BASE)
    assert refusals(decision) == [("none", "safety-v1", "report", failed)]
    # the helpfulness report's own reasons, its budget split over the manifest's two versions
    helpful_report = release.build_report(track, both, JUDGE, BASE).report
    assert helpful_report.n_judge_versions == 2  # the release's budget is split over both versions
    helpful = decide([helpful_report])
    assert [r for r in decision.reasons if r.finding != "report"] == list(helpful.reasons)

    judges = dict(project.judges)
    judges["safety-v1"] = judges["safety-v1"].model_copy(update={"bridges_from": JUDGE})
    bridging = Track(dataclasses.replace(project, judges=judges), track.home)
    decision = release.make_decision(bridging, both)[0]
    assert decision.decision == "block"
    assert refusals(decision) == [
        (
            "none",
            "safety-v1",
            "report",
            f"judge safety-v1 bridges from {JUDGE} and has no calibration_offsets yet: materialize its bridge run",
        )
    ]

    with pytest.raises(TrackError) as unjudged:
        release.build_report(track, cand, "safety-v1", BASE)
    assert str(unjudged.value) == (
        f"build {CAND!r} has no verdicts under safety-v1 yet: materialize judge_verdicts [{CAND}|safety-v1] first"
    )
    decision = release.make_decision(track, both)[0]
    assert decision.decision == "block"
    assert refusals(decision) == [("none", "safety-v1", "report", str(unjudged.value))]
    # its row: reasons one per line, the versions comma-joined in the manifest's order
    row = release.release_decision_row(CAND, decision, release.decision_versions(track, both), BASE, "{}")
    assert row == {
        "build": CAND,
        "decision": "block",
        "reasons": "\n".join(r.text() for r in decision.reasons),
        "judge_versions": f"safety-v1,{JUDGE}",
        "baseline": BASE,
        "evidence": "{}",
    }
    assert row["reasons"].count("\n") == len(decision.reasons) - 1 >= 2


def test_a_decision_reads_the_build_its_baseline_and_the_baselines_rebuilds_never_another_build(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """The partitions a decision's evidence record covers: the build, its baseline and every registered
    unchanged rebuild of that baseline (the undecided build is one), never an unrelated build nor a
    rebuild of the build itself."""
    track = track_of(copy_of(decided, tmp_path), project)
    other = "agent-2026-12-02-other"
    track.register_build(changed_manifest(tmp_path, project, "candidate.yaml", id=other, judges=[JUDGE]))
    rebuilds = [REBUILD, UNDECIDED]  # both declare rebuild_of the baseline
    assert release.evidence_builds(track, track.build(CAND), BASE) == sorted([CAND, BASE, *rebuilds])
    assert release.evidence_builds(track, track.build(REBUILD), BASE) == sorted([BASE, *rebuilds])
    assert release.evidence_builds(track, track.build(BASE), None) == [BASE]


def test_the_build_report_page_is_the_build_s_own_with_its_recorded_decision(
    decided: tuple[Path, dict[str, Summary]], project: Project, tmp_path: Path
) -> None:
    """`evaltrack report`'s page: the build's title, its recorded (and verified) decision and reasons."""
    track = track_of(copy_of(decided, tmp_path), project)
    page = release.write_build_report(track, CAND, tmp_path / "cand.html").read_text()
    row, rows = release.decision_and_reasons(track, CAND)
    assert row is not None and row["decision"] == "block" and len(rows) >= 2
    assert page == render(track, CAND, row, rows)
    assert f"<title>{CAND}: eval-track report</title>" in page
