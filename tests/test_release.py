"""Release statistics through the track and the CLI: one judge version per comparison, always."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from shared import changed_manifest

from eval_assets import release
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import Project
from eval_assets.home import EvalHome


def test_compare_across_judge_versions_is_refused_naming_both_versions_and_the_fix(
    tmp_path: Path, project: Project, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    track = Track(project, home)
    base = track.register_build(changed_manifest(tmp_path, project, "baseline.yaml", judges=["safety-v1"]))
    cand = track.register_build(
        changed_manifest(tmp_path, project, "candidate.yaml", judges=["helpfulness-v1"])
    )
    for build, judge in ((base.id, "safety-v1"), (cand.id, "helpfulness-v1")):
        materialize_scenario_runs(track, build, "r1")
        materialize_judge_verdicts(track, build, judge, "r1")
    code = main(
        ["compare", "--baseline", base.id, "--candidate", cand.id, "--judge-version", "helpfulness-v1"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "helpfulness-v1" in err and "safety-v1" in err
    assert "never compared" in err and "Re-judge" in err and "bridge" in err
    assert f"{base.id} has no verdicts under judge version helpfulness-v1 (it has safety-v1)" in err
    # the report asset refuses the same way: no fallback to another version
    with pytest.raises(release.CrossJudgeVersionError, match=f"Re-judge {base.id}'s stored outputs"):
        release.materialize_capability_report(track, cand.id, "helpfulness-v1", "r2")


def _judged_pair(tmp_path: Path, project: Project, home: EvalHome) -> tuple[Track, str]:
    """The example baseline and its unchanged rebuild, registered, run and judged under helpfulness-v1;
    the track and the rebuild's id."""
    track = Track(project, home)
    base = track.register_build(
        changed_manifest(tmp_path, project, "baseline.yaml", judges=["helpfulness-v1"])
    )
    cand = track.register_build(
        changed_manifest(tmp_path, project, "rebuild.yaml", judges=["helpfulness-v1"])
    )
    for build in (base.id, cand.id):
        materialize_scenario_runs(track, build, "r1")
        materialize_judge_verdicts(track, build, "helpfulness-v1", "r1")
    return track, cand.id


def test_report_rows_show_each_scenario_source(tmp_path: Path, project: Project, home: EvalHome) -> None:
    track, candidate = _judged_pair(tmp_path, project, home)
    release.materialize_capability_report(track, candidate, "helpfulness-v1", "r1")
    frame = track.warehouse.query(
        "SELECT scenario_id, source FROM capability_reports WHERE scenario_id IS NOT NULL"
    )
    expected = {sid: project.scenarios[sid].source for sid in frame["scenario_id"]}
    assert dict(zip(frame["scenario_id"], frame["source"], strict=True)) == expected
    assert "trajectory" in set(frame["source"])


def test_the_report_carries_pass_at_k_and_pass_hat_k_per_scenario_and_suite_and_decides_nothing_with_them(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    track, candidate = _judged_pair(tmp_path, project, home)
    summary = release.materialize_capability_report(track, candidate, "helpfulness-v1", "r1")
    rows = track.warehouse.query(
        "SELECT finding, scenario_id, statistic, verdict, detail FROM capability_reports "
        "WHERE finding IN ('pass_at_k', 'pass_hat_k') ORDER BY finding, scenario_id"
    )
    verdicts = track.warehouse.query(
        "SELECT scenario_id, bool_and(status = 'scored' AND score >= ?) AS every, "
        "bool_or(status = 'scored' AND score >= ?) AS any FROM judge_verdicts "
        "WHERE build = ? AND judge_version = 'helpfulness-v1' GROUP BY 1 ORDER BY 1",
        [project.rubrics["helpfulness-v1"].floor] * 2 + [candidate],
    )

    assert set(rows["verdict"]) == {"info"}  # never a block or investigate finding
    figure = {
        (r.finding, r.scenario_id): r.statistic for r in rows.itertuples() if isinstance(r.scenario_id, str)
    }
    hat = {sid: v for (finding, sid), v in figure.items() if finding == "pass_hat_k"}
    known = [
        r for r in verdicts.itertuples() if r.scenario_id in hat and hat[r.scenario_id] == hat[r.scenario_id]
    ]
    assert known  # NaN (unknown, a judge failure) is not equal to itself; an excluded scenario has no row
    assert all(figure[("pass_hat_k", r.scenario_id)] == float(r.every) for r in known)
    assert all(figure[("pass_at_k", r.scenario_id)] == float(r.any) for r in known)
    suites = {s.suite for s in project.scenarios_judged_by(project.judges["helpfulness-v1"])}
    assert rows["scenario_id"].isna().sum() == 2 * len(suites)
    findings = track.warehouse.query(
        "SELECT count(*) AS n FROM capability_reports WHERE finding NOT IN ('pass_at_k', 'pass_hat_k')"
    )
    assert "pass^k" in summary.markdown and summary["findings"] == int(findings["n"][0])
    assert "**Judge-human agreement** (helpfulness-v1): no human score pairs with its verdicts yet." in (
        summary.markdown
    )


def test_a_policy_leak_in_a_ceiling_stopped_scenario_still_gets_a_blocking_decision(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    """Issue 11 item 1: the track keeps the policy failures of a stopped scenario, and the statistics
    read them with the same invariant, so the leak blocks (noise_bands used to raise instead)."""
    track = Track(project, home)
    base = track.register_build(
        changed_manifest(tmp_path, project, "baseline.yaml", judges=["helpfulness-v1"])
    )
    params = yaml.safe_load((project.root / "examples/builds/candidate.yaml").read_text())["subject"][
        "params"
    ]
    leaky = changed_manifest(
        tmp_path,
        project,
        "candidate.yaml",
        id="agent-leaky",
        judges=["helpfulness-v1"],
        subject={"model": "sim/agent", "family": "sim", "params": {**params, "policy_violation_rate": 0.3}},
    )
    cand = track.register_build(leaky)
    for build in (base.id, cand.id):
        materialize_scenario_runs(track, build, "r1")
        materialize_judge_verdicts(track, build, "helpfulness-v1", "r1")
        release.materialize_noise_bands(track, build, "helpfulness-v1", "r1")
    release.write_release_decision(track, cand.id, "r1")
    recorded = release.checked_decision(track, cand.id)
    assert recorded is not None and recorded.decision == "block"
    assert any("policy failures in the candidate" in str(r["message"]) for r in recorded.reasons)
    # a decision never outlives its evidence: rewriting the runs makes it stale ("none", not allow)
    materialize_scenario_runs(track, cand.id, "r2")
    stale = release.checked_decision(track, cand.id)
    assert stale is not None and stale.decision == "none"
    assert stale.stale == [f"scenario_runs[{cand.id}] was re-materialized after the decision"]


def _kleene(outcomes: list[str]) -> tuple[float | None, float | None]:
    """pass@k and pass^k of one scenario's repeat outcomes ("pass", "fail", "unknown"), by hand."""
    at = 1.0 if "pass" in outcomes else (None if "unknown" in outcomes else 0.0)
    hat = 0.0 if "fail" in outcomes else (None if "unknown" in outcomes else 1.0)
    return at, hat


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def test_pass_at_k_and_pass_hat_k_are_the_same_figures_in_the_warehouse_the_report_compare_and_the_board(
    tmp_path: Path, project: Project, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    """One scenario with 3 passes and 2 judge failures on outputs, one excluded scenario (every repeat
    `excluded`, as a ceiling leaves it), the rest as judged: the warehouse rows, the HTML report's
    scenario row, `compare`'s table and the release board carry the same pass@k and pass^k, each the
    definition worked out by hand (a judge failure unknown, never a pass or a failure; an excluded
    scenario left out)."""
    import re

    jv = "helpfulness-v1"
    track, candidate = _judged_pair(tmp_path, project, home)
    baseline = track.build(candidate).baseline
    assert baseline is not None
    floor = project.rubrics[jv].floor
    verdicts = track.warehouse.query(
        "SELECT * FROM judge_verdicts WHERE build = ? AND judge_version = ? ORDER BY scenario_id, repeat",
        [candidate, jv],
    )
    sids = sorted(verdicts["scenario_id"].unique())
    unjudged, excluded = sids[0], sids[1]
    first = verdicts["scenario_id"].eq(unjudged)
    assert first.sum() == 5
    repeats = verdicts.loc[first, "repeat"].tolist()
    passing = first & verdicts["repeat"].isin(repeats[:3])
    failing = first & verdicts["repeat"].isin(repeats[3:])
    verdicts.loc[passing, ["status", "score"]] = ["scored", 1.0]
    verdicts.loc[failing, ["status", "score"]] = ["failed", None]
    verdicts.loc[failing, "failure_reason"] = "the judge's reply did not parse"
    gone = verdicts["scenario_id"].eq(excluded)
    verdicts.loc[gone, ["status", "score"]] = ["excluded", None]
    written = verdicts.drop(columns=["run_id", "written_at"])  # the writer stamps its own
    track.warehouse.write_partition(
        "judge_verdicts", {"build": candidate, "judge_version": jv}, written, "edit"
    )
    has_output = {
        (r["scenario_id"], int(r["repeat"])): r["output"] is not None
        for r in track.warehouse.rows(
            "SELECT scenario_id, repeat, output FROM scenario_runs WHERE build = ?", [candidate]
        )
    }
    assert all(has_output[(unjudged, r)] for r in repeats)  # judge failures on outputs: unknown, not failed

    outcomes: dict[str, list[str]] = {}
    left_out = set(verdicts.loc[verdicts["status"].eq("excluded"), "scenario_id"])
    assert excluded in left_out
    for r in verdicts.itertuples():
        if r.scenario_id in left_out:  # a scenario with an excluded repeat has no figures
            continue
        if r.status == "scored":
            outcome = "pass" if r.score >= floor else "fail"
        else:
            outcome = (
                "unknown" if r.status == "failed" and has_output[(r.scenario_id, int(r.repeat))] else "fail"
            )
        outcomes.setdefault(r.scenario_id, []).append(outcome)
    expected = {sid: _kleene(o) for sid, o in outcomes.items()}
    assert expected[unjudged] == (1.0, None)
    suite = project.scenarios[unjudged].suite
    members = [sid for sid in expected if project.scenarios[sid].suite == suite]
    suite_figures = tuple(
        None
        if any(expected[m][i] is None for m in members)
        else sum(expected[m][i] or 0.0 for m in members) / len(members)
        for i in (0, 1)
    )

    release.materialize_capability_report(track, candidate, jv, "r2")
    stored = track.warehouse.query(
        "SELECT finding, scenario_id, statistic, detail FROM capability_reports "
        "WHERE build = ? AND finding IN ('pass_at_k', 'pass_hat_k')",
        [candidate],
    )
    warehouse = {
        (r.finding, r.scenario_id): (None if r.statistic != r.statistic else r.statistic)
        for r in stored.itertuples()
        if isinstance(r.scenario_id, str)
    }
    assert {
        sid: (warehouse[("pass_at_k", sid)], warehouse[("pass_hat_k", sid)]) for sid in expected
    } == expected
    assert ("pass_at_k", excluded) not in warehouse
    suite_rows = stored[stored["scenario_id"].isna() & stored["detail"].str.startswith(f"suite {suite}:")]
    by_finding = {
        r.finding: (None if r.statistic != r.statistic else r.statistic) for r in suite_rows.itertuples()
    }
    assert (by_finding["pass_at_k"], by_finding["pass_hat_k"]) == suite_figures

    page = tmp_path / "report.html"
    assert main(["report", candidate, "--html", str(page)]) == 0
    html = page.read_text()
    for sid, (at, hat) in expected.items():
        row = re.search(rf'<tr data-scenario="{re.escape(sid)}" data-status="(\w+)">(.*?)</tr>', html, re.S)
        assert row is not None, sid
        shown = re.search(r"pass@(\d+) (\S+), pass\^(\d+) (\S+)", row.group(2))
        assert shown is not None and (shown.group(2), shown.group(4)) == (_pct(at), _pct(hat)), (
            sid,
            row.group(2),
        )
    unjudged_row = re.search(
        rf'<tr data-scenario="{re.escape(unjudged)}" data-status="(\w+)">(.*?)</tr>', html, re.S
    )
    assert unjudged_row is not None
    assert "pass@5 100%, pass^5 unknown (3 of 5 passed, 2 the judge could not score)" in unjudged_row.group(2)
    excluded_row = re.search(
        rf'<tr data-scenario="{re.escape(excluded)}" data-status="\w+">(.*?)</tr>', html, re.S
    )
    assert excluded_row is not None and "no figures (excluded" in excluded_row.group(1)

    capsys.readouterr()
    assert main(["compare", "--baseline", baseline, "--candidate", candidate, "--judge-version", jv]) == 0
    compared = capsys.readouterr().out
    table = compared[compared.index(f"candidate {candidate}:") :]
    assert f"| {suite} | {len(members)} | " in table
    line = next(x for x in table.splitlines() if x.startswith(f"| {suite} | "))
    assert line.split("|")[4:6] == [f" {_pct(suite_figures[0])} ", f" {_pct(suite_figures[1])} "], line
    assert "pass^5 unknown" in compared  # the summary's intervals: one scenario unknown, so is the build's

    board = release.materialize_release_board(track).markdown
    row = next(x for x in board.splitlines() if x.startswith(f"| {candidate} "))
    assert f"{suite} {_pct(suite_figures[0])} / {_pct(suite_figures[1])}" in row, row
