"""Materializations through Dagster's own engine on a temporary instance, and code-location loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import yaml
from shared import record_one_gate_suite

from eval_assets.capability.track import Track
from eval_assets.cli.orchestrate import instance_for, launch_build
from eval_assets.config import Project
from eval_assets.home import EvalHome


def test_build_materializes_through_dagster_with_counts_in_metadata(project: Project, home: EvalHome) -> None:
    track = Track(project, home)
    build = track.register_build(project.root / "examples" / "builds" / "baseline.yaml")
    versions = [j.version_id for j in track.judges_for(build)]
    steps = launch_build(home, build.id, versions)
    assert [s.assets[-1] for s in steps[-3:]] == [
        "deterministic_suite",
        "release_decision",
        "release_approval",
    ]
    # the baseline decides nothing: its approval is withheld (nothing materialized, nothing failed)
    assert [s.success for s in steps] == [True] * (1 + len(versions) + 3), [s.error for s in steps]
    assert "release_approval" not in steps[-1].metadata
    assert steps[-1].withheld and not any(s.withheld for s in steps[:-1])

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
        ledger = con.execute(
            "SELECT count(*), count(DISTINCT attempt_key), sum(cost_usd) FROM cost_ledger"
        ).fetchone()
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


def _check_history(
    instance: dg.DagsterInstance, asset: str, check: str
) -> list[tuple[str | None, bool, str]]:
    """(partition, passed, severity) of every evaluation of a check, newest first."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check)
    out = []
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=20):
        assert record.event is not None and record.event.dagster_event is not None
        evaluation = record.event.dagster_event.event_specific_data
        out.append((record.partition, evaluation.passed, evaluation.severity.value))  # type: ignore[union-attr]
    return out


def _a_blocked_and_an_undecided_build(
    project: Project, home: EvalHome
) -> tuple[dg.DagsterInstance, dg.Definitions, str, str]:
    """The example baseline (its one gate failing: blocked) and rebuild (its gate passing, no report:
    undecided) registered, their suites recorded and their partitions added; the instance, the
    location to materialize from, and the two build ids."""
    from eval_assets.definitions import location

    track = Track(project, home)
    blocked, undecided = (
        track.register_build(project.root / "examples" / "builds" / n).id
        for n in ("baseline.yaml", "rebuild.yaml")
    )
    for build in (blocked, undecided):
        record_one_gate_suite(track, build, failing=build == blocked, run_id=f"suite-{build}")
    instance = instance_for(home)
    instance.add_dynamic_partitions("build", [blocked, undecided])
    return instance, location(project, home), blocked, undecided


def test_release_and_gate_checks_are_recorded_per_build_with_the_decisions_severity(
    project: Project, home: EvalHome
) -> None:
    """block → failed ERROR; none → failed WARN; each evaluation names the build it judged."""
    from eval_assets.defs.suite.assets import NO_FAILING_GATES

    instance, defs, blocked, undecided = _a_blocked_and_an_undecided_build(project, home)
    release_decision = defs.resolve_assets_def("release_decision")
    for build in (blocked, undecided):
        result = dg.materialize([release_decision], instance=instance, partition_key=build)
        assert result.success

    history = _check_history(instance, "release_decision", "release_allowed")
    assert sorted(history) == [(blocked, False, "ERROR"), (undecided, False, "WARN")]
    # the check names the block reason, and says the outcome once
    check = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("release_decision"), "release_allowed"), limit=20
    )
    descriptions = {r.partition: r.event.dagster_event.event_specific_data.description for r in check}  # type: ignore[union-attr]
    assert descriptions[blocked].startswith(f"{blocked}: block — 1 block: ")
    assert (
        "config.example-builds-validate" in descriptions[blocked]
        and "block (block)" not in descriptions[blocked]
    )
    assert NO_FAILING_GATES.partitions_def is not None  # the gate check, too, is recorded per build
    event = instance.get_latest_materialization_event(dg.AssetKey("release_decision"))
    assert event is not None and event.asset_materialization is not None
    meta = event.asset_materialization.metadata
    assert meta["build"].value == undecided and "reasons" in meta
    assert not {"exit_code", "decided_nothing"} & set(meta)
    # the HTML report is a link the UI draws clickable (a file:// URL of the page it wrote)
    link = meta["html_report"]
    assert isinstance(link, dg.UrlMetadataValue), link
    assert link.value == (home.root / "reports" / undecided / "report.html").resolve().as_uri()
    assert Path(link.value.removeprefix("file://")).is_file()
    assert "### No decision" in str(meta["reasons"].value)


def test_release_approval_is_red_for_block_grey_for_none_with_the_reasons_on_each_partition_and_the_board_lists_each_build(
    project: Project, home: EvalHome
) -> None:
    """A blocked and an undecided build: the blocked one's release_approval partition reads FAILED (red),
    the undecided one's stays unmaterialized (grey, a successful step: nothing decided is not a block),
    neither ever MATERIALIZED; the `decision` check of each partition (what its panel shows) is failed
    with ERROR for block (red) and WARN for none (yellow), its description and metadata naming the
    decision and its reasons; once approved, a later non-allow decision fails it (an approval never
    reads as current after it); the board names both builds with their decisions, each with its own
    coloured mark, and links to their partitions."""
    from eval_assets.defs.release.assets import was_approved
    from eval_assets.present import DECISION_COLOURS

    instance, defs, blocked, undecided = _a_blocked_and_an_undecided_build(project, home)
    release_approval, release_board, release_decision = (
        defs.resolve_assets_def(a) for a in ("release_approval", "release_board", "release_decision")
    )
    for build in (blocked, undecided):
        decided = dg.materialize([release_decision], instance=instance, partition_key=build)
        assert decided.success
        approval = dg.materialize(
            [release_approval],
            instance=instance,
            partition_key=build,
            raise_on_error=False,
        )
        assert approval.success == (build == undecided)
        assert approval.get_asset_materialization_events() == []
    statuses = instance.get_status_by_partition(
        dg.AssetKey("release_approval"), [blocked, undecided], release_approval.partitions_def
    )
    assert statuses.get(blocked) == dg.AssetPartitionStatus.FAILED
    assert statuses.get(undecided) is None  # missing: drawn grey, not red
    assert sorted(_check_history(instance, "release_approval", "decision")) == [
        (blocked, False, "ERROR"),
        (undecided, False, "WARN"),
    ]
    records = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("release_approval"), "decision"), limit=10
    )
    seen = {r.partition: r.event.dagster_event.event_specific_data for r in records}  # type: ignore[union-attr]
    assert seen[blocked].description.startswith(f"{blocked}: block — 1 block: ")
    assert "config.example-builds-validate" in seen[blocked].description
    assert str(seen[blocked].metadata["decision"].value) == "block"
    assert seen[undecided].description.startswith(f"{undecided}: no decision — ")
    assert str(seen[undecided].metadata["decision"].value) == "none"
    assert not was_approved(instance, undecided)
    board = dg.materialize([release_board], instance=instance)
    assert board.success
    [event] = board.get_asset_materialization_events()
    meta = event.step_materialization_data.materialization.metadata
    table = str(meta["board"].value)
    link = "/assets/release_decision?view=partitions&partition="
    assert f"[{blocked}]({link}{blocked}) | ![block][block] **BLOCK**" in table
    assert f"[{undecided}]({link}{undecided}) | ![none][none] no decision" in table
    assert (
        f"[block]: {DECISION_COLOURS['block'][1]}" in table
        and f"[none]: {DECISION_COLOURS['none'][1]}" in table
    )
    assert meta["may_ship"].value == "none" and meta["blocked"].value == blocked


def test_the_code_location_has_named_jobs_owners_and_a_freshness_expectation() -> None:
    from eval_assets.definitions import defs as location_defs

    defs = location_defs()
    jobs = {j.name for j in defs.get_repository_def().get_all_jobs()}
    assert {"capability_track", "judge_and_report", "deterministic_suite_job", "release_decision_job"} <= jobs
    specs = {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}
    assert all(spec.owners == ["team:eval-track"] for spec in specs.values()), {
        k: s.owners for k, s in specs.items()
    }
    assert all("python" in spec.kinds for spec in specs.values())
    assert {k for k, s in specs.items() if "parquet" not in s.kinds} == {
        "release_block_notice",
        "release_approval",
        "release_board",
    }
    fresh = {k for k, s in specs.items() if s.freshness_policy is not None}
    assert fresh == {"scenario_runs", "capability_report", "release_decision"}
    # applied once, in definitions.py: no asset module repeats owners, kinds or freshness
    defs_dir = Path(__file__).resolve().parents[1] / "eval_assets" / "defs"
    for module in defs_dir.rglob("*.py"):
        text = module.read_text()
        assert "owners=" not in text and "kinds=" not in text and "freshness_policy=" not in text, module
    workspace = (Path(__file__).resolve().parents[1] / "workspace.yaml").read_text()
    assert "location_name: eval_track" in workspace
    # the checkout is a project like one `evaltrack init` writes: the same location, named once in each
    shipped = Path(__file__).resolve().parents[1] / "eval_assets/cli/project_template/workspace.yaml"
    assert shipped.read_text() == workspace


def test_each_job_selects_exactly_what_the_one_selection_table_says() -> None:
    """defs/selections.py is the one table of job selections; the jobs and the CLI's steps read it."""
    from eval_assets.definitions import defs
    from eval_assets.defs.selections import JOB_OF, JOBS

    repository = defs().get_repository_def()
    for name, assets in JOBS.items():
        job = repository.get_job(name)
        selected = {key.to_user_string() for key in job.asset_layer.selected_asset_keys}
        assert selected == set(assets), name
    for asset, name in JOB_OF.items():
        assert asset in JOBS[name]


SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "definitions.json"


def definitions_snapshot() -> dict[str, Any]:
    """The code location's graph as a reviewer reads it: every asset (group, owners, kinds,
    partitioning, upstream assets, automation), check (asset, blocking), job (selection), schedule
    (cron, job) and sensor (kind, default status)."""
    from eval_assets.definitions import defs

    repository = defs().get_repository_def()
    graph = repository.asset_graph
    assets = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        condition = node.automation_condition
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "owners": sorted(node.owners),
            "kinds": sorted(node.kinds),
            "partitions": type(node.partitions_def).__name__ if node.partitions_def else None,
            "upstream": sorted(k.to_user_string() for k in node.parent_keys),
            "automation": type(condition).__name__ if condition else None,
        }
    checks = {
        f"{spec.asset_key.to_user_string()}:{spec.name}": {"blocking": spec.blocking}
        for spec in (graph.get_check_spec(k) for k in graph.asset_check_keys)
    }
    jobs = {
        job.name: sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys)
        for job in repository.get_all_jobs()
        if not job.name.startswith("__")
    }
    schedules = {s.name: {"cron": s.cron_schedule, "job": s.job_name} for s in repository.schedule_defs}
    sensors = {
        s.name: {"kind": type(s).__name__, "default": s.default_status.value} for s in repository.sensor_defs
    }
    return {
        "assets": dict(sorted(assets.items())),
        "checks": dict(sorted(checks.items())),
        "jobs": dict(sorted(jobs.items())),
        "schedules": dict(sorted(schedules.items())),
        "sensors": dict(sorted(sensors.items())),
    }


def test_the_loaded_definitions_match_the_reviewed_snapshot() -> None:
    """A change to the graph (an asset, a check, a job, a schedule, a sensor, a group or owner) is a
    reviewed diff of tests/snapshots/definitions.json; write the new one with
    `EVALTRACK_UPDATE_SNAPSHOT=1 .venv/bin/pytest tests/test_dagster.py -k snapshot` and review it."""
    now = json.dumps(definitions_snapshot(), indent=2, sort_keys=False) + "\n"
    if os.environ.get("EVALTRACK_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(now, encoding="utf-8")
    assert SNAPSHOT.read_text(encoding="utf-8") == now, (
        "the code location changed: review and update the snapshot"
    )


def test_only_the_release_block_sensor_notifies_never_a_run_step() -> None:
    """Notifications are sent by one sensor (evaluated in the code server, once per decision through
    its `release_block_notice` events in the instance), never by a step of a run: a run pod needs
    no volume for the notification record (docs/deploy.md)."""
    from eval_assets.definitions import defs

    repository = defs().get_repository_def()
    steps = {
        (job.name, node.name)
        for job in repository.get_all_jobs()
        for node in job.graph.node_defs
        if "notifications" in node.required_resource_keys
    }
    assert steps == set()
    sensors = {s.name for s in repository.sensor_defs if "notifications" in s.required_resource_keys}
    assert sensors == {"release_block_sensor"}


def test_the_location_loaded_for_a_second_project_in_one_process_serves_that_projects_judges(
    tmp_path: Path, project: Project, home: EvalHome, monkeypatch: Any
) -> None:
    """The location is built from the project in force when Dagster loads it, never from one read
    at import: a load for another project in the same process (a command after another, a test after
    another) serves that project's judge partitions, not the first's."""
    import shutil

    from eval_assets.definitions import defs

    def judge_keys() -> set[str]:
        spec = defs().resolve_assets_def("judge_verdicts").partitions_def
        assert isinstance(spec, dg.MultiPartitionsDefinition)
        return set(spec.get_partitions_def_for_dimension("judge_version").get_partition_keys())

    assert judge_keys() == set(project.judges)
    copy = tmp_path / "project"
    copy.mkdir()
    for part in ("evaltrack.yaml", "scenarios", "rubrics", "judges", "examples", "gates"):
        source = project.root / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    # the copy loses one judge and the scenarios only it scores
    dropped = next(j for j in sorted(project.judges) if j.startswith("safety-"))
    for path in (copy / "judges").glob("*.yaml"):
        if yaml.safe_load(path.read_text()).get("name") == "safety":
            path.unlink()
    for path in (copy / "scenarios").rglob("*.yaml"):
        if yaml.safe_load(path.read_text()).get("judge") == "safety":
            path.unlink()
    monkeypatch.setenv("EVAL_PROJECT_ROOT", str(copy))
    assert dropped not in judge_keys() and judge_keys() == {j for j in project.judges if not j.startswith("safety-")}
