"""Materializations through Dagster's own engine on a temporary instance, and code-location loading."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from eval_assets.config import Project
from eval_assets.home import EvalHome
from eval_assets.orchestrate import instance_for, materialize_build
from eval_assets.track import Track


def test_build_materializes_through_dagster_with_counts_in_metadata(project: Project, home: EvalHome) -> None:
    track = Track(project, home)
    build = track.register_build(project.root / "examples" / "builds" / "baseline.yaml")
    versions = [j.version_id for j in track.judges_for(build)]
    steps = materialize_build(home, build.id, versions)
    assert [s.success for s in steps] == [True] * (1 + len(versions) + 2), [s.error for s in steps]
    assert steps[-1].assets == ("release_decision",)

    runs_meta = steps[0].metadata["scenario_runs"]
    assert runs_meta["attempts"] == sum(s.repeats for s in track.scenarios_for(build))
    assert runs_meta["spend_usd"] > 0
    for step in steps[1 : 1 + len(versions)]:
        verdicts = step.metadata["judge_verdicts"]
        assert verdicts["verdicts"] == verdicts["scored"] + verdicts["failed"] + verdicts["excluded"]
        assert step.metadata["cost_ledger"]["rows"] > 0

    instance = instance_for(home)
    assert instance.has_dynamic_partition("build", build.id)
    event = instance.get_latest_materialization_event(dg.AssetKey("scenario_runs"))
    assert event is not None and event.dagster_event is not None
    assert event.dagster_event.partition == build.id
    assert yaml.safe_load((home.dagster / "dagster.yaml").read_text())["telemetry"] == {"enabled": False}

    con = duckdb.connect(str(home.warehouse / "warehouse.duckdb"), read_only=True)
    try:
        per_scenario = con.execute(
            "SELECT DISTINCT count(*) FROM scenario_runs WHERE build = ? GROUP BY scenario_id", [build.id]
        ).fetchall()
        failed = con.execute(
            "SELECT count(*), count(score), count(failure_reason) FROM judge_verdicts WHERE status = 'failed'"
        ).fetchone()
        ledger = con.execute("SELECT count(*), count(DISTINCT attempt_key), sum(cost_usd) FROM cost_ledger").fetchone()
    finally:
        con.close()
    assert {r[0] for r in per_scenario} == {s.repeats for s in track.scenarios_for(build)}
    assert failed is not None and failed[1] == 0 and failed[2] == failed[0]
    assert ledger is not None and ledger[0] == ledger[1] and ledger[2] > 0


def test_code_location_refuses_to_load_an_invalid_project(tmp_path: Path, project: Project) -> None:
    broken = tmp_path / "project"
    (broken / "scenarios").mkdir(parents=True)
    (broken / "scenarios" / "bad.yaml").write_text("id: a|b\n")
    code = "from eval_assets.definitions import defs; defs()"
    env = {"EVAL_PROJECT_ROOT": str(broken), "EVAL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "scenarios/bad.yaml: id: 'a|b' is not a valid id" in proc.stderr
