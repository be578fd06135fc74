"""The sensors and the schedule, evaluated with Dagster's test contexts on a temporary instance.

`build_sensor_context` / `build_schedule_context` over a temporary Dagster instance and a temporary
EVAL_HOME holding the shipped project's example builds. Release decisions are real
`release_decision` materializations where that is cheap (the deterministic suite's `gate_results`
are recorded directly, so no subject or judge has to run); an `allow` needs a full capability
report, so it is reported as a runless materialization with the asset's metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from e2e.processes import wait_for
from e2e.webhook import webhook
from shared import ONE_GATE, record_one_gate_suite

from eval_assets.capability.track import Track
from eval_assets.config import Project, load_project
from eval_assets.definitions import defs, location
from eval_assets.defs.automation.schedules import NIGHTLY, nightly_schedule
from eval_assets.defs.automation.sensors import BUILD_ROOT_ASSETS, build_sensor, release_block_sensor
from eval_assets.defs.resources import NotificationResource, TrackResource
from eval_assets.home import EvalHome

EXAMPLES = ("baseline.yaml", "rebuild.yaml")
BASELINE, REBUILD = "agent-2026-11-28-base", "agent-2026-11-29-rebuild"


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """A persistent instance in a temporary directory: like the daemon's, it has an instance ref,
    which sensor evaluation needs to resolve run requests for partitions added in the same tick."""
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster")) as inst:
        yield inst


@pytest.fixture
def track(project: Project, home: EvalHome) -> Track:
    return Track(project, home)


@pytest.fixture
def track_resource(project: Project, home: EvalHome) -> TrackResource:
    return TrackResource(eval_home=str(home.root), project_root=str(project.root))


@pytest.fixture(scope="module")
def definitions() -> dg.Definitions:
    return defs()


def logged(capsys: pytest.CaptureFixture[str], level: str) -> list[str]:
    """Lines a sensor logged at `level` through `context.log` (Dagster's console logger: stderr)."""
    return [line for line in capsys.readouterr().err.splitlines() if f" - dagster - {level} - " in line]


def register(track: Track, *names: str) -> list[str]:
    return [track.register_build(track.project.root / "examples" / "builds" / n).id for n in names]


# --- build sensor -------------------------------------------------------------------------------


def evaluate_build_sensor(
    instance: dg.DagsterInstance, track_resource: TrackResource, definitions: dg.Definitions
) -> dg.SensorResult:
    """One tick, as the daemon evaluates it: run requests resolved against the code location."""
    # exited here, so the instance it opens from the ref leaves no Dagster context behind it
    with dg.build_sensor_context(
        instance_ref=instance.get_ref(), resources={"track": track_resource}, definitions=definitions
    ) as context:
        tick = build_sensor.evaluate_tick(context)
    return dg.SensorResult(
        run_requests=tick.run_requests,
        dynamic_partitions_requests=tick.dynamic_partitions_requests,
        skip_reason=tick.skip_message,
    )


def added_partitions(result: dg.SensorResult) -> list[str]:
    return [key for request in result.dynamic_partitions_requests or [] for key in request.partition_keys]


def apply_partition_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's dynamic partition requests."""
    for request in result.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_build_sensor_adds_new_builds_and_requests_their_root_runs_with_run_keys(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource, definitions: dg.Definitions
) -> None:
    builds = register(track, *EXAMPLES)
    result = evaluate_build_sensor(instance, track_resource, definitions)

    assert added_partitions(result) == builds
    assert [(r.run_key, r.partition_key) for r in result.run_requests or []] == [
        (f"build-{b}", b) for b in builds
    ]
    assert all(r.asset_selection == BUILD_ROOT_ASSETS for r in result.run_requests or [])
    assert all(r.job_name in (None, "capability_track") for r in result.run_requests or [])
    assert build_sensor.job_name == "capability_track"


def test_build_sensor_does_not_start_a_build_whose_subject_runs_exist_however_they_were_launched(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource, definitions: dg.Definitions
) -> None:
    """`evaltrack demo` / `run` materialize scenario_runs in runs the sensor never requested: opening
    the UI afterwards must not start those builds again (their run keys are unused)."""
    baseline, rebuild = register(track, *EXAMPLES)
    instance.add_dynamic_partitions("build", [baseline, rebuild])
    # a materialization launched by hand (no run key, no sensor): only the rebuild is still to run
    instance.report_runless_asset_event(
        dg.AssetMaterialization(asset_key="scenario_runs", partition=baseline, metadata={"generation": 0})
    )
    result = evaluate_build_sensor(instance, track_resource, definitions)
    assert [r.partition_key for r in result.run_requests or []] == [rebuild]

    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="scenario_runs", partition=rebuild))
    idle = evaluate_build_sensor(instance, track_resource, definitions)
    assert idle.run_requests == [] and added_partitions(idle) == []
    assert idle.skip_reason is not None and "2 already have their subject runs" in idle.skip_reason.skip_message


def test_build_sensor_evaluated_again_requests_the_same_run_keys_and_no_partition_twice(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource, definitions: dg.Definitions
) -> None:
    register(track, *EXAMPLES)
    first = evaluate_build_sensor(instance, track_resource, definitions)
    apply_partition_requests(instance, first)

    second = evaluate_build_sensor(instance, track_resource, definitions)

    assert added_partitions(second) == []
    assert [r.run_key for r in second.run_requests or []] == [r.run_key for r in first.run_requests or []]
    # a build registered later is the only new partition; the others keep their run keys
    [candidate] = register(track, "candidate.yaml")
    third = evaluate_build_sensor(instance, track_resource, definitions)
    assert added_partitions(third) == [candidate]
    assert {r.run_key for r in third.run_requests or []} == {
        f"build-{b}" for b in (BASELINE, REBUILD, candidate)
    }


def test_build_sensor_skips_an_invalid_manifest_with_a_warning(
    instance: dg.DagsterInstance,
    track: Track,
    home: EvalHome,
    track_resource: TrackResource,
    definitions: dg.Definitions,
    capsys: pytest.CaptureFixture[str],
) -> None:
    [baseline] = register(track, "baseline.yaml")
    (home.builds / "broken.yaml").write_text("id: broken\nmilestone: [not, a, number\n")
    (home.builds / "no-subject.yaml").write_text("id: no-subject\nmilestone: 1\n")
    renamed = yaml.safe_load(track.build_path(baseline).read_text())
    (home.builds / "renamed.yaml").write_text(yaml.safe_dump(renamed))  # says id: agent-2026-11-28-base

    result = evaluate_build_sensor(instance, track_resource, definitions)

    assert added_partitions(result) == [baseline]
    assert [r.partition_key for r in result.run_requests or []] == [baseline]
    warnings = "\n".join(logged(capsys, "WARNING"))
    for skipped in ("broken", "no-subject", "renamed"):
        assert f"skipping build {skipped}:" in warnings


# --- release-block sensor -----------------------------------------------------------------------


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def materialize_decision(
    instance: dg.DagsterInstance, track_resource: TrackResource, build: str
) -> dg.ExecuteInJobResult:
    """A real `release_decision` materialization of one build partition."""
    if not instance.has_dynamic_partition("build", build):
        instance.add_dynamic_partitions("build", [build])
    home = EvalHome(Path(track_resource.eval_home))
    release_decision = location(load_project(Path(track_resource.project_root)), home).resolve_assets_def(
        "release_decision"
    )
    result = dg.materialize([release_decision], instance=instance, partition_key=build)
    assert result.success
    return result


def decision_of(result: dg.ExecuteInJobResult) -> str:
    [event] = result.get_asset_materialization_events()
    return str(event.materialization.metadata["decision"].value)


def report_decision(instance: dg.DagsterInstance, build: str, decision: str) -> None:
    """A decision as a runless materialization with the asset's metadata (decision, reasons)."""
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key="release_decision",
            partition=build,
            metadata={"decision": decision, "reasons": dg.MetadataValue.json([])},
        )
    )


class Tick:
    """One evaluated tick of the release-block sensor: its message, cursor, notice events and the
    release_board refresh."""

    def __init__(self, result: dg.SensorResult, cursor: str | None):
        self.skip_message = result.skip_reason.skip_message if result.skip_reason else None
        self.cursor = cursor
        events = list(result.asset_events or [])
        self.notices = [e for e in events if e.asset_key == dg.AssetKey("release_block_notice")]
        self.boards = [e for e in events if e.asset_key == dg.AssetKey("release_board")]


def evaluate_release_sensor(
    instance: dg.DagsterInstance,
    notifications: NotificationResource,
    cursor: str | None,
    track_resource: TrackResource | None = None,
) -> tuple[Tick, str | None]:
    """One tick as the daemon runs it: its notice events are stored in the instance afterwards."""
    resources: dict[str, Any] = {"notifications": notifications}
    resources["track"] = track_resource or TrackResource(
        eval_home=os.environ["EVAL_HOME"], project_root=os.environ["EVAL_PROJECT_ROOT"]
    )
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
        result = release_block_sensor(context)
    assert isinstance(result, dg.SensorResult)
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)
    return Tick(result, context.cursor), context.cursor


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_block_decision_is_notified_once_to_the_jsonl_file_and_the_webhook(
    instance: dg.DagsterInstance,
    track: Track,
    track_resource: TrackResource,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    [build] = register(track, "baseline.yaml")
    record_one_gate_suite(track, build, failing=True)
    capsys.readouterr()
    decided = materialize_decision(instance, track_resource, build)
    assert decision_of(decided) == "block"
    # block reasons are warnings; the info lines ("nothing to block") are not
    warnings = logged(capsys, "WARNING")
    assert any("[block] deterministic_suite" in line for line in warnings), warnings
    assert not any("[info]" in line for line in warnings)
    sink = tmp_path / "notifications" / "release_blocks.jsonl"

    with webhook() as (url, posts):
        notifications = NotificationResource(jsonl_path=str(sink), webhook_url=url)
        skip, cursor = evaluate_release_sensor(instance, notifications, None)
        assert skip.skip_message == f"{build}: block notified via log, webhook, jsonl"
        # the notice is visible in the UI: a release_block_notice event of the build with the reasons
        [event] = skip.notices
        assert isinstance(event, dg.AssetMaterialization) and event.partition == build
        assert event.asset_key == dg.AssetKey("release_block_notice")
        assert event.metadata["notice_key"].value == f"{build}@{decided.run_id}"
        assert ONE_GATE in str(event.metadata["block_reasons"].value)
        [notice] = lines(sink)
        assert (notice["build"], notice["decision"], notice["run_id"]) == (build, "block", decided.run_id)
        assert any(ONE_GATE in reason for reason in notice["reasons"])
        assert posts == [notice]

        # the next tick, from the advanced cursor: nothing new
        again, _ = evaluate_release_sensor(instance, notifications, cursor)
        assert again.skip_message == "no new release decision"
        # the same event evaluated again (the cursor was lost): its notice event is already recorded
        replay, _ = evaluate_release_sensor(instance, notifications, None)
        assert replay.skip_message == f"{build}: block already notified"
        assert replay.notices == []
        assert len(lines(sink)) == 1 and len(posts) == 1


def test_a_decision_that_is_not_block_is_recorded_and_nothing_is_sent(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource, tmp_path: Path
) -> None:
    [baseline, rebuild] = register(track, *EXAMPLES)
    record_one_gate_suite(track, baseline, failing=False)
    undecided = materialize_decision(instance, track_resource, baseline)  # no verdicts yet: none
    assert decision_of(undecided) == "none"
    report_decision(instance, rebuild, "allow")
    sink = tmp_path / "release_blocks.jsonl"

    with webhook() as (url, posts):
        notifications = NotificationResource(jsonl_path=str(sink), webhook_url=url)
        skip, cursor = evaluate_release_sensor(instance, notifications, None)

    assert skip.skip_message == f"{baseline}: none, nothing to notify; {rebuild}: allow, nothing to notify"
    assert cursor is not None and skip.notices == []
    assert not sink.exists() and posts == []
    [board] = skip.boards  # the board is refreshed after the decisions of the tick
    assert board.metadata["may_ship"].value == "none"


def test_decisions_landing_between_two_ticks_are_each_notified(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource, tmp_path: Path
) -> None:
    builds = register(track, *EXAMPLES)
    for build in builds:
        record_one_gate_suite(track, build, failing=True)
        materialize_decision(instance, track_resource, build)
    sink = tmp_path / "release_blocks.jsonl"

    evaluate_release_sensor(instance, NotificationResource(jsonl_path=str(sink)), None)

    assert [(n["build"], n["decision"]) for n in lines(sink)] == [(b, "block") for b in builds]


def test_a_failed_webhook_holds_the_decision_for_the_next_tick_and_keeps_its_url_out_of_the_log(
    instance: dg.DagsterInstance,
    track: Track,
    track_resource: TrackResource,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    [build] = register(track, "baseline.yaml")
    record_one_gate_suite(track, build, failing=True)
    materialize_decision(instance, track_resource, build)
    sink = tmp_path / "release_blocks.jsonl"
    secret_url = closed_port_url() + "/T000/B000/s3cr3t-token"

    _, cursor = evaluate_release_sensor(
        instance, NotificationResource(jsonl_path=str(sink), webhook_url=secret_url), None
    )
    assert cursor is None and not sink.exists()
    errors = "\n".join(logged(capsys, "ERROR"))
    assert f"notifying the block of {build} failed" in errors and "s3cr3t-token" not in errors

    with webhook() as (url, posts):
        evaluate_release_sensor(instance, NotificationResource(jsonl_path=str(sink), webhook_url=url), cursor)
    assert [n["build"] for n in lines(sink)] == [build] and [p["build"] for p in posts] == [build]


# --- nightly schedule ---------------------------------------------------------------------------

TICK = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def evaluate_nightly(
    instance: dg.DagsterInstance, track_resource: TrackResource
) -> dg.RunRequest | dg.SkipReason:
    # exited here: the context opens its own instance from the ref, and an instance never exited leaves
    # its defs-state storage in Dagster's context variable for the next definitions load in this worker
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=TICK, resources={"track": track_resource}
    ) as context:
        return nightly_schedule("0 2 * * *")(context)  # type: ignore[no-any-return]


def registered_in_order(track: Track, builds: list[str]) -> None:
    """Give the manifests distinct registration times, oldest first."""
    for offset, build in enumerate(builds):
        stamp = 1_700_000_000 + offset * 60
        os.utime(track.build_path(build), (stamp, stamp))


def test_nightly_runs_at_two_utc_by_default(definitions: dg.Definitions) -> None:
    nightly = definitions.get_schedule_def(NIGHTLY)
    assert nightly.cron_schedule == "0 2 * * *"
    assert nightly.execution_timezone == "UTC"
    assert nightly.default_status == dg.DefaultScheduleStatus.RUNNING


def test_nightly_cron_comes_from_evaltrack_yaml(project: Project, tmp_path: Path) -> None:
    copy = tmp_path / "project"
    for name in ("scenarios", "rubrics", "judges"):
        shutil.copytree(project.root / name, copy / name)
    settings = yaml.safe_load((project.root / "evaltrack.yaml").read_text())
    (copy / "evaltrack.yaml").write_text(yaml.safe_dump({**settings, "nightly_cron": "30 4 * * 1-5"}))

    schedule = location(load_project(copy), EvalHome(tmp_path / "home")).get_schedule_def(NIGHTLY)

    assert (schedule.cron_schedule, schedule.execution_timezone) == ("30 4 * * 1-5", "UTC")


def test_nightly_without_builds_skips(instance: dg.DagsterInstance, track_resource: TrackResource) -> None:
    result = evaluate_nightly(instance, track_resource)
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message == "no build registered yet"


def test_nightly_runs_the_newest_build_under_a_run_key_with_the_date(
    instance: dg.DagsterInstance, track: Track, track_resource: TrackResource
) -> None:
    base, rebuild, cand = register(track, "baseline.yaml", "rebuild.yaml", "candidate.yaml")  # a baseline first
    builds = [rebuild, base, cand]
    registered_in_order(track, builds)

    result = evaluate_nightly(instance, track_resource)

    assert isinstance(result, dg.RunRequest)
    assert result.partition_key == builds[-1]
    assert result.run_key == f"nightly-{builds[-1]}-2026-12-01"
    assert result.asset_selection == BUILD_ROOT_ASSETS
    assert result.tags["evaltrack/trigger"] == "nightly"
    assert evaluate_nightly(instance, track_resource).run_key == result.run_key  # same night, same key


def test_nightly_passes_over_a_newer_manifest_that_does_not_load(
    instance: dg.DagsterInstance, track: Track, home: EvalHome, track_resource: TrackResource
) -> None:
    [baseline] = register(track, "baseline.yaml")
    (home.builds / "broken.yaml").write_text("id: broken\n")
    registered_in_order(track, [baseline, "broken"])

    result = evaluate_nightly(instance, track_resource)

    assert isinstance(result, dg.RunRequest) and result.partition_key == baseline


# --- the release-block sensor across a daemon restart (real `dagster-daemon`) -------------------------


DAEMON_BOUND_S = 900  # a bound, not a speed goal: a loaded 2-core machine took > 4 min to load the location


def _notices(instance: dg.DagsterInstance, build: str) -> list[str]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("release_block_notice"), asset_partitions=[build]),
        limit=100,
    ).records
    out = []
    for record in records:
        event = record.event_log_entry.dagster_event
        assert event is not None and event.step_materialization_data is not None
        out.append(str(event.step_materialization_data.materialization.metadata["notice_key"].value))
    return out


def _start_daemon(home: EvalHome, project: Project, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "EVAL_HOME")}
    env |= {"DAGSTER_HOME": str(home.dagster), "EVAL_HOME": str(home.root), "EVAL_NOTIFY_WEBHOOK": url}
    env |= {"EVAL_PROJECT_ROOT": str(project.root), "LITELLM_OFFLINE_MODE": "true"}
    daemon = str(Path(sys.executable).with_name("dagster-daemon"))
    with log.open("ab") as out:
        return subprocess.Popen(
            [daemon, "run", "-w", str(project.root / "workspace.yaml")],
            cwd=project.root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the daemon's session, then SIGKILL to whatever of it is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.e2e  # the slow lane (a real daemon, started twice): bash scripts/test_e2e
def test_a_daemon_restart_does_not_notify_a_block_again(
    project: Project, home: EvalHome, tmp_path: Path
) -> None:
    """SLOW (~2 min on a quiet machine): the real daemon notifies a block once; stopped and started again, it resumes
    after its stored cursor: a block decided after the restart is notified, the first one not again."""
    from eval_assets.cli.orchestrate import instance_for

    track = Track(project, home)
    instance = instance_for(home)
    resource = TrackResource(eval_home=str(home.root), project_root=str(project.root))
    first, second = register(track, *EXAMPLES)
    for build in (first, second):
        record_one_gate_suite(track, build, failing=True)
    materialize_decision(instance, resource, first)
    # the build sensor must have nothing to start while the daemon runs (no subject runs in this test)
    aside = {b: tmp_path / f"{b}.yaml" for b in (first, second)}
    for build, path in aside.items():
        shutil.move(track.build_path(build), path)
    sink = home.root / "notifications" / "release_blocks.jsonl"
    log = tmp_path / "daemon.log"

    with webhook() as (url, posts):
        daemon = _start_daemon(home, project, url, log)
        try:
            assert wait_for(lambda: _notices(instance, first), DAEMON_BOUND_S, 1.0), log.read_text()[-3000:]
        finally:
            _stop(daemon)
        [key] = _notices(instance, first)

        for build, path in aside.items():  # the second build's baseline (the first) must be registered too
            shutil.move(path, track.build_path(build))
        materialize_decision(instance, resource, second)  # a new fact while the daemon is down
        for build, path in aside.items():
            shutil.move(track.build_path(build), path)
        daemon = _start_daemon(home, project, url, log)
        try:
            assert wait_for(lambda: _notices(instance, second), DAEMON_BOUND_S, 1.0), log.read_text()[-3000:]
        finally:
            _stop(daemon)

    assert _notices(instance, first) == [key]
    assert [n["build"] for n in lines(sink)] == [first, second]
    assert [p["build"] for p in posts] == [first, second]
