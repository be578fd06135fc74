"""Release statistics through the track and the CLI: one judge version per comparison, always."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval_assets import release
from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import Project
from eval_assets.home import EvalHome


def _manifest(tmp_path: Path, project: Project, name: str, **changes: object) -> Path:
    data = yaml.safe_load((project.root / "examples/builds" / name).read_text())
    data.update(changes)
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def test_compare_across_judge_versions_is_refused_naming_both_versions_and_the_fix(
    tmp_path: Path, project: Project, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    track = Track(project, home)
    base = track.register_build(_manifest(tmp_path, project, "baseline.yaml", judges=["safety-v1"]))
    cand = track.register_build(_manifest(tmp_path, project, "candidate.yaml", judges=["helpfulness-v1"]))
    for build, judge in ((base.id, "safety-v1"), (cand.id, "helpfulness-v1")):
        track.run_scenario_runs(build, "r1")
        track.run_judge_verdicts(build, judge, "r1")
    code = main(["compare", "--baseline", base.id, "--candidate", cand.id, "--judge", "helpfulness-v1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "helpfulness-v1" in err and "safety-v1" in err
    assert "never compared" in err and "Re-judge" in err and "bridge" in err
    # the report asset refuses the same way: no fallback to another version
    with pytest.raises(release.CrossJudgeVersionError):
        release.run_capability_report(track, cand.id, "helpfulness-v1", "r2")


def test_report_rows_show_each_scenario_source(tmp_path: Path, project: Project, home: EvalHome) -> None:
    track = Track(project, home)
    base = track.register_build(_manifest(tmp_path, project, "baseline.yaml", judges=["helpfulness-v1"]))
    cand = track.register_build(_manifest(tmp_path, project, "rebuild.yaml", judges=["helpfulness-v1"]))
    for build in (base.id, cand.id):
        track.run_scenario_runs(build, "r1")
        track.run_judge_verdicts(build, "helpfulness-v1", "r1")
    release.run_capability_report(track, cand.id, "helpfulness-v1", "r1")
    frame = track.warehouse.query(
        "SELECT scenario_id, source FROM capability_reports WHERE scenario_id IS NOT NULL"
    )
    expected = {sid: project.scenarios[sid].source for sid in frame["scenario_id"]}
    assert dict(zip(frame["scenario_id"], frame["source"], strict=True)) == expected
    assert "trajectory" in set(frame["source"])


def test_a_policy_leak_in_a_ceiling_stopped_scenario_still_gets_a_blocking_decision(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    """Issue 11 item 1: the track keeps the policy failures of a stopped scenario, and the statistics
    read them with the same invariant, so the leak blocks (noise_bands used to raise instead)."""
    track = Track(project, home)
    base = track.register_build(_manifest(tmp_path, project, "baseline.yaml", judges=["helpfulness-v1"]))
    params = yaml.safe_load((project.root / "examples/builds/candidate.yaml").read_text())["subject"]["params"]
    leaky = _manifest(
        tmp_path,
        project,
        "candidate.yaml",
        id="agent-leaky",
        judges=["helpfulness-v1"],
        subject={"model": "sim/agent", "family": "sim", "params": {**params, "policy_violation_rate": 0.3}},
    )
    cand = track.register_build(leaky)
    for build in (base.id, cand.id):
        track.run_scenario_runs(build, "r1")
        track.run_judge_verdicts(build, "helpfulness-v1", "r1")
        release.run_noise_bands(track, build, "helpfulness-v1", "r1")
    release.run_release_decision(track, cand.id, "r1")
    recorded = release.recorded_decision(track, cand.id)
    assert recorded is not None and recorded["decision"] == "block"
    assert any("policy failures in the candidate" in str(r["message"]) for r in recorded["reasons"])
    # a decision never outlives its evidence: rewriting the runs makes it stale ("none", not allow)
    track.run_scenario_runs(cand.id, "r2")
    stale = release.recorded_decision(track, cand.id)
    assert stale is not None and stale["decision"] == "none" and "stale" in stale["reasons"]
