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
    suites = {s.suite for s in project.scenarios_for(project.judges["helpfulness-v1"])}
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
