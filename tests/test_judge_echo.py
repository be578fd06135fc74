"""A judge cannot win by echoing (issue 24): a reply that repeats the judge's prompt is `failed: echo`.

Before, the prompt's example verdict held every scale's best value, so a judge that answered with its
own system message scored 1.0 on helpfulness-v1 (85 of 85 verdicts at 1.0 for garbage outputs).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from eval_assets import release
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.fence import fence_nonce
from eval_assets.home import EvalHome
from eval_assets.judging import parse_verdict, render_judge_prompt

NONCE = fence_nonce(b"judge-echo tests: a fence secret", "build/judge-v1/scenario/1/1/g0")


@pytest.mark.parametrize("version", ["helpfulness-v1", "safety-v1"])
def test_a_judge_answering_with_its_own_system_message_fails_as_echo_and_scores_nothing(
    project: Project, version: str
) -> None:
    judge = project.judges[version]
    rubric = project.rubric_for(judge)
    system = render_judge_prompt(judge, rubric, project.scenarios_judged_by(judge)[0], "garbage", nonce=NONCE)[0]
    verdict = parse_verdict(system["content"], rubric)  # the engine's call (main scored it 1.0 / 0.33)
    assert verdict.status == "failed" and verdict.score is None and verdict.criteria is None
    assert verdict.failure_reason is not None and verdict.failure_reason.startswith("echo: ")
    # the gate cases' call, which passes the system message
    verdict = parse_verdict(system["content"], rubric, instructions=system["content"])
    assert verdict.status == "failed" and (verdict.failure_reason or "").startswith("echo: ")


def _manifest(tmp_path: Path, project: Project, name: str) -> Path:
    data = yaml.safe_load((project.root / "examples/builds" / name).read_text())
    data["judges"] = ["helpfulness-v1"]
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_echoing_sim_judge_through_the_track_records_echo_failures_and_the_decision_is_never_allow(
    tmp_path: Path, project: Project, home: EvalHome
) -> None:
    """The real path: engine, litellm's custom provider, the warehouse. Every reply of a judge with
    `echo_rate: 1` is its system message; each verdict is failed with reason echo, and a release on
    nothing scored decides nothing (it used to be 1.0 everywhere, and ok)."""
    judge = project.judges["helpfulness-v1"]
    echoing = judge.model_copy(update={"params": {**judge.params, "echo_rate": 1.0, "malformed_rate": 0.0}})
    track = Track(dataclasses.replace(project, judges={**project.judges, judge.version_id: echoing}), home)
    base = track.register_build(_manifest(tmp_path, project, "baseline.yaml"))
    cand = track.register_build(_manifest(tmp_path, project, "rebuild.yaml"))
    for build in (base.id, cand.id):
        materialize_scenario_runs(track, build, "r1")
        materialize_judge_verdicts(track, build, judge.version_id, "r1")
    verdicts = track.warehouse.query(
        "SELECT status, score, failure_reason FROM judge_verdicts WHERE judge_version = 'helpfulness-v1'"
    )
    judged = verdicts[verdicts["status"] != "excluded"]
    assert len(judged) > 0
    assert set(judged["status"]) == {"failed"} and judged["score"].isna().all()
    assert judged["failure_reason"].str.startswith("echo: ").all(), judged["failure_reason"].unique()
    decision, _ = release.make_decision(track, track.build(cand.id))
    assert decision.decision == "none"
    assert any("no scored verdicts" in r.text() for r in decision.reasons)
