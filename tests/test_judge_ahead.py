"""Judge ahead, reuse after: judge calls made while `scenario_runs` runs are the calls `judge_verdicts`
would make (same keys, prompts, spend path); the stored verdicts are the same either way, and nothing
is paid twice. Real sim provider through litellm, real SQLite journal, real Parquet warehouse."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import yaml

from eval_assets.capability.materialize import (
    materialize_judge_verdicts,
    materialize_scenario_runs,
    stored_attempts,
)
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome

BUILD = "agent-ahead"
VOLATILE = ("run_id", "written_at")  # which run wrote a row, and when: the only columns allowed to differ


def _track(project: Project, root: Path, *, judge_ahead: bool, error_rate: float) -> Track:
    engine = project.settings.engine.model_copy(update={"judge_ahead": judge_ahead})
    settings = project.settings.model_copy(update={"engine": engine})
    track = Track(dataclasses.replace(project, settings=settings), EvalHome(root).ensure())
    manifest = yaml.safe_load((project.root / "examples" / "builds" / "baseline.yaml").read_text())
    manifest["id"] = BUILD
    manifest["subject"]["params"]["error_rate"] = error_rate
    path = root.parent / f"{root.name}-build.yaml"
    path.write_text(yaml.safe_dump(manifest))
    track.register_build(path)
    return track


def _run(track: Track) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    runs = dict(materialize_scenario_runs(track, BUILD, "run-subjects").values)
    verdicts = {
        j.version_id: dict(
            materialize_judge_verdicts(track, BUILD, j.version_id, f"run-{j.version_id}").values
        )
        for j in track.judges_for(track.build(BUILD))
    }
    return runs, verdicts


def _verdict_rows(track: Track) -> list[dict[str, Any]]:
    frame = track.warehouse.query(
        "SELECT * FROM judge_verdicts WHERE build = ? ORDER BY judge_version, scenario_id, repeat", [BUILD]
    )
    frame = frame.drop(columns=list(VOLATILE)).astype(object)
    return frame.where(frame.notna(), None).to_dict("records")  # NULL as None: NaN never equals itself


def _paid(track: Track) -> list[tuple[str, str, float | None, str | None]]:
    """Every journal row: (key, status, cost, payload), in key order (the key is the journal's primary key)."""
    rows = track.journal.rows(build=BUILD)
    return sorted((r.attempt_key, r.status, r.cost_usd, r.payload) for r in rows)


def _pair(project: Project, tmp_path: Path, error_rate: float) -> tuple[Track, Track]:
    ahead = _track(project, tmp_path / "ahead", judge_ahead=True, error_rate=error_rate)
    after = _track(project, tmp_path / "after", judge_ahead=False, error_rate=error_rate)
    # one fence secret for both homes, so both render the very same judge prompts
    ahead.home.fence_secret()
    shutil.copy2(ahead.home.fence_secret_path, after.home.fence_secret_path)
    return ahead, after


def test_verdicts_judged_ahead_equal_verdicts_judged_after_and_no_key_is_paid_twice(
    project: Project, tmp_path: Path
) -> None:
    ahead, after = _pair(project, tmp_path, error_rate=0.0)
    ahead_runs, ahead_verdicts = _run(ahead)
    after_runs, after_verdicts = _run(after)

    rows = _verdict_rows(ahead)
    assert rows and rows == _verdict_rows(after)
    assert {r["status"] for r in rows} >= {"scored"}
    # the journals hold the same keys, statuses, costs and outputs: nothing paid twice, nothing extra
    assert _paid(ahead) == _paid(after)
    judge_rows = [r for r in ahead.journal.rows(build=BUILD) if r.role == "judge"]
    assert judge_rows and {r.run_id for r in judge_rows} == {"run-subjects"}  # all paid ahead

    versions = [j.version_id for j in ahead.judges_for(ahead.build(BUILD))]
    assert ahead_runs["judged_ahead"] == versions and after_runs["judged_ahead"] == []
    # every verdict that needed a judge call (all but the scenario a ceiling excluded) was judged ahead
    called = {jv: v["verdicts"] - v["excluded"] for jv, v in ahead_verdicts.items()}
    assert ahead_runs["judge_calls_ahead"] == sum(called.values())
    assert after_runs["judge_calls_ahead"] == 0
    for jv in versions:
        assert ahead_verdicts[jv]["reused_from_journal"] == called[jv] > 0
        assert after_verdicts[jv]["reused_from_journal"] == 0
        assert ahead_verdicts[jv]["spend_usd"] == after_verdicts[jv]["spend_usd"]


def test_the_output_judge_verdicts_reads_back_is_the_output_the_judge_saw_ahead(
    project: Project, tmp_path: Path
) -> None:
    """The judge's key does not hold the output it scored: the output read back from Parquet must be
    byte for byte the one judged ahead (the journal's subject payload), else the verdict reused is of
    another text. With subject errors, too: attempts without output are never judged, ahead or after."""
    ahead, after = _pair(project, tmp_path, error_rate=0.2)
    _, ahead_verdicts = _run(ahead)
    _run(after)
    assert _verdict_rows(ahead) == _verdict_rows(after)
    assert _paid(ahead) == _paid(after)

    # the outputs in memory, as the engine had them when it judged ahead: read back from the journal
    # (nothing paid), for the scenarios judged ahead (a ceiling excluded the others)
    build = ahead.build(BUILD)
    attempts = stored_attempts(ahead, BUILD)
    excluded = {a.scenario_id for a in attempts if a.status == "excluded"}
    before = _paid(ahead)
    scenarios = [s for s in ahead.scenarios_for(build) if s.id not in excluded]
    in_memory = {
        (r.scenario.id, r.repeat): r.call.text
        for r in asyncio.run(ahead.engine("read-back").run_subjects(build, scenarios))
        if r.call.status == "ok"
    }
    assert _paid(ahead) == before
    stored = {(a.scenario_id, a.repeat): a.output for a in attempts if a.status == "ok"}
    assert stored and stored.keys() == in_memory.keys()
    for key, text in stored.items():
        assert isinstance(text, str) and text.encode("utf-8", "surrogatepass") == str(in_memory[key]).encode(
            "utf-8", "surrogatepass"
        ), key
    errored = sum(a.output is None for a in attempts)
    assert errored > 0  # the case this test is for: some attempts have nothing to judge
    for jv, summary in ahead_verdicts.items():
        judged = {(r.scenario_id, r.repeat) for r in ahead.journal.rows(build=BUILD) if r.judge_version == jv}
        assert judged and judged <= set(stored)
        assert summary["reused_from_journal"] == len(judged)
