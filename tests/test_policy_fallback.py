"""The policy fallback (docs/methods.md, "The release invariant"): a report that cannot be computed never
allows, and the candidate's policy failures, read directly from `scenario_runs`, still block.

End to end on a real warehouse through a real Track: the builds are run and judged by the sim
provider through litellm, then the candidate's stored verdicts are rewritten (through the one
partition writer) with one score outside [0, 1], which the statistics refuse: the capability report
raises `VerdictFrameError` inside `make_decision`.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from shared import changed_manifest

from eval_assets import release
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome
from eval_assets.present import recorded_reasons

JUDGE = "helpfulness-v1"
VERDICT_COLUMNS = (
    "build, judge_version, scenario_id, repeat, attempt_id, rubric, status, score, criteria, source, "
    "failure_reason, policy_failures, cost_usd, tries, author"
)


def _judged_pair(tmp_path: Path, project: Project, home: EvalHome, leak_rate: float) -> tuple[Track, str]:
    """A baseline and a candidate (policy_violation_rate `leak_rate`), run and judged; the candidate's id."""
    track = Track(project, home)
    base = track.register_build(changed_manifest(tmp_path, project, "baseline.yaml", judges=[JUDGE]))
    subject = yaml.safe_load((project.root / "examples/builds/candidate.yaml").read_text())["subject"]
    subject["params"] = {**subject["params"], "policy_violation_rate": leak_rate}
    cand = track.register_build(
        changed_manifest(tmp_path, project, "candidate.yaml", subject=subject, judges=[JUDGE])
    )
    for build in (base.id, cand.id):
        materialize_scenario_runs(track, build, "r1")
        materialize_judge_verdicts(track, build, JUDGE, "r1")
        release.materialize_noise_bands(track, build, JUDGE, "r1")
    return track, cand.id


def _store_a_verdict_the_statistics_refuse(track: Track, build: str) -> None:
    rows = track.warehouse.query(
        f"SELECT {VERDICT_COLUMNS} FROM judge_verdicts WHERE build = ? AND judge_version = ? "
        "ORDER BY scenario_id, repeat",
        [build, JUDGE],
    )
    scored = rows.index[rows["status"] == "scored"][0]
    rows.loc[scored, "score"] = 1.5  # a scored verdict outside [0, 1]: VerdictFrameError
    track.warehouse.write_partition(
        "judge_verdicts", {"build": build, "judge_version": JUDGE}, rows, "r-damaged"
    )


def test_a_report_that_raises_still_blocks_on_the_candidates_policy_failures_naming_them(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    track, cand = _judged_pair(tmp_path, project, home, leak_rate=0.3)
    leaks = track.warehouse.query(
        "SELECT scenario_id, count(*) AS attempts FROM scenario_runs "
        "WHERE build = ? AND output IS NOT NULL AND policy_failures > 0 GROUP BY 1 ORDER BY 1",
        [cand],
    )
    assert len(leaks) > 0  # the candidate leaked in some scenarios
    _store_a_verdict_the_statistics_refuse(track, cand)

    summary = release.write_release_decision(track, cand, "r2")

    assert summary["decision"] == "block" and summary["exit_code"] == 1
    reasons = "\n".join(summary["reasons"])
    assert "the report could not be computed: VerdictFrameError" in reasons
    named = ", ".join(f"{r.scenario_id} ({int(r.attempts)} attempts)" for r in leaks.itertuples())
    assert f"policy failures in attempts with output: {named}" in reasons
    [row] = [r for r in recorded_reasons(track.warehouse, cand, "r2") if r["source"] == "policy"]
    assert (row["severity"], row["finding"]) == ("block", "policy_failures")
    assert row["message"] == f"check policy_failures failed: policy failures in attempts with output: {named}"
    # and the judge version whose report could not be computed is named, with why
    [refused] = [r for r in recorded_reasons(track.warehouse, cand, "r2") if r["finding"] == "report"]
    assert (refused["severity"], refused["source"]) == ("none", JUDGE)
    assert refused["message"].startswith("the report could not be computed: VerdictFrameError: ")


def test_a_report_that_raises_without_policy_failures_decides_nothing_never_allow(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    track, cand = _judged_pair(tmp_path, project, home, leak_rate=0.0)
    before = release.make_decision(track, track.build(cand))[0]
    assert before.decision != "none"  # the same builds decide when their report computes
    _store_a_verdict_the_statistics_refuse(track, cand)

    summary = release.write_release_decision(track, cand, "r2")

    assert summary["decision"] == "none" and summary["exit_code"] == 2
    reasons = "\n".join(summary["reasons"])
    assert "the report could not be computed: VerdictFrameError" in reasons
    assert "policy failures in attempts with output" not in reasons
