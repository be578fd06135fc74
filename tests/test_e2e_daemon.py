"""End to end through the real Dagster daemon and webserver, observed only through GraphQL.

SLOW — one test. Its time limits (TOTAL_S, 14 minutes in all; STOP_BOUND_S for the stop) are hang
guards, not speed assertions: they only turn a hung daemon into a failure with the timeline and the
log tail instead of a stuck CI run; how long each step took is printed, never asserted. It starts `evaltrack ui` the way a user
does (its own session; `dagster dev` on 127.0.0.1), registers a build with `evaltrack build add`, and
waits (polling GraphQL once a second) until the daemon has run everything the build needs: the
build sensor's run (scenario_runs + deterministic_suite), the automation condition sensor's runs
(the judge-version chain, then the release decision), and the release-block sensor's notification.
A gate injected into the project copy fails, so the decision must be `block`, notified exactly once
(JSONL sink and a webhook on 127.0.0.1). Then SIGTERM stops it all: `evaltrack ui` exits, the port
closes, and no process it started survives; whatever happens, the test kills what is left.

Runs are subprocesses that import the code location, so the project copy is small: one judge
version, three scenarios, milestone 0.

It runs twice: on the default instance (SQLite under EVAL_HOME/dagster), and with the instance's
storage on a throwaway PostgreSQL cluster (tests/pg.py; EVAL_DAGSTER_STORAGE=postgres and the URL in
EVAL_DAGSTER_PG_URL, as a deployment sets them). Both instances queue runs through the queued run
coordinator and put the model-calling assets in their provider's concurrency pool; the PostgreSQL
run also checks that the instance file names the URL's variable, never the URL. Without PostgreSQL
binaries the second run fails with the install hint (EVAL_TRACK_SKIP_PG=1: a loud skip).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2e.graphql import IN_PROGRESS, DagsterGraphQL
from e2e.processes import free_port, port_open, running_ui, wait_for
from e2e.project import KEPT_JUDGES, inject_failing_gate, small_project, write_manifest
from e2e.webhook import webhook

from eval_assets.home import PROJECT_ROOT, STORAGE_ENV

pytestmark = pytest.mark.e2e  # the slow lane: bash scripts/test_e2e

try:  # tests/ imported as a package (tests/__init__.py present) or as a rootdir on sys.path
    from tests.pg import running_cluster
except ImportError:
    from pg import running_cluster  # type: ignore[no-redef]

BUILD = "e2e-build"
NIGHTLY_CRON = "17 3 * * *"
TOTAL_S = 14 * 60  # hang guard for the whole test, stop included (generous for a loaded 2-core machine)
STOP_BOUND_S = 60  # SIGTERM -> `evaltrack ui` exited (it gives leftover run workers up to 30 s)
PORT_CLOSE_BOUND_S = 10
DEADLINE_S = TOTAL_S - STOP_BOUND_S - PORT_CLOSE_BOUND_S  # for everything before the stop
ROOT_ASSETS = ["deterministic_suite", "scenario_runs"]
JUDGE_CHAIN = ["capability_report", "cost_ledger", "judge_verdicts", "noise_bands"]


def _build_of(run: dict[str, Any]) -> str | None:
    return run["tags"].get("dagster/partition/build") or run["tags"].get("dagster/partition")


class Timeline:
    """When each step was first observed (seconds since the test started), for failure messages."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seen: dict[str, float] = {}

    def remaining(self) -> float:
        return max(0.0, DEADLINE_S - (time.monotonic() - self.started))

    def mark(self, what: str) -> None:
        self.seen.setdefault(what, round(time.monotonic() - self.started, 1))

    def __str__(self) -> str:
        return "\n".join(f"{at:7.1f}s  {what}" for what, at in self.seen.items())


PG_URL_ENV = "EVAL_DAGSTER_PG_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def instance_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment that picks the instance's storage: nothing (SQLite), or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield {}
        return
    with running_cluster("instance end to end") as cluster:
        with psycopg.connect(
            host="127.0.0.1", port=cluster.port, user="postgres", dbname="postgres", autocommit=True
        ) as c:
            c.execute('CREATE DATABASE "dagster_instance"')
        # dagster-postgres needs psycopg2 (SQLAlchemy 2.1 would pick psycopg 3 for a bare postgresql://)
        url = f"postgresql+psycopg2://postgres@127.0.0.1:{cluster.port}/dagster_instance"
        yield {STORAGE_ENV: "postgres", PG_URL_ENV: url, "_database_port": str(cluster.port)}


def _instance_tables(port: int) -> set[str]:
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="dagster_instance") as c:
        rows = c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {r[0] for r in rows}


def test_a_registered_build_runs_through_the_daemon_to_a_block_notified_once(
    tmp_path: Path, instance_env: dict[str, str]
) -> None:
    """SLOW (minutes): real daemon + webserver via `evaltrack ui`; see the module docstring."""
    timeline = Timeline()
    pg_port = instance_env.pop("_database_port", None)
    project = small_project(tmp_path / "project", nightly_cron=NIGHTLY_CRON)
    gate_id = inject_failing_gate(project)
    manifest = write_manifest(tmp_path / "manifest.yaml", BUILD)
    home = tmp_path / "home"
    sink = home / "notifications" / "release_blocks.jsonl"
    evaltrack = str(Path(sys.executable).with_name("evaltrack"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("EVAL_HOME", "DAGSTER_HOME", "EVAL_PROJECT_ROOT")}
    env["PYTHONUNBUFFERED"] = "1"
    # the injected gate's check (tests/e2e/injected_gate.py) must import wherever the suite runs
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT / "tests"), env.get("PYTHONPATH")]))
    env = {k: v for k, v in env.items() if k not in (STORAGE_ENV, PG_URL_ENV)} | instance_env

    with (
        webhook("/release-blocks") as (hook_url, posts),
        running_ui(home, project, port, tmp_path / "ui.log", env | {"EVAL_NOTIFY_WEBHOOK": hook_url}) as ui,
    ):
        # `evaltrack ui` announces itself once EVAL_HOME's instance exists and dagster dev is starting:
        # the build is registered while the code location loads, as a user may do at any time
        assert wait_for(lambda: "Dagster UI on" in ui.log_tail(), timeline.remaining(), 0.2), ui.log_tail()
        timeline.mark("evaltrack ui started dagster dev")
        adding = subprocess.Popen(
            [evaltrack, "--home", str(home), "--project", str(project), "build", "add", str(manifest)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        gql = DagsterGraphQL(ui.url)
        location = wait_for(lambda: gql.reachable() and gql.loaded_location(), timeline.remaining(), 1.0)
        assert location, f"the code location did not load in time:\n{ui.log_tail()}"
        timeline.mark("code location loaded")

        # automation is on from the first start: nobody toggles anything in the UI
        for name in ("build_sensor", "release_block_sensor", "default_automation_condition_sensor"):
            assert gql.sensor(*location, name)["sensorState"]["status"] == "RUNNING", name
        schedule = gql.schedule(*location, "nightly_capability_track")
        assert (schedule["cronSchedule"], schedule["executionTimezone"]) == (NIGHTLY_CRON, "UTC")
        assert schedule["scheduleState"]["status"] == "RUNNING"

        output, _ = adding.communicate(timeout=timeline.remaining())
        assert adding.returncode == 0, output
        timeline.mark("build registered")

        def notified_and_checked_again() -> list[dict[str, Any]] | None:
            """The decision's materializations once every run of the build finished, the block was
            notified, and the release-block sensor has ticked again since it notified."""
            ui.track_sessions()  # run workers come and go: remember their sessions
            runs = [r for r in gql.runs() if _build_of(r) == BUILD]
            for run in runs:
                timeline.mark(f"run {'+'.join(run['assets'])} {run['status']}")
            decisions = gql.materializations("release_decision", BUILD)
            if not decisions or any(r["status"] in IN_PROGRESS for r in runs):
                return None
            timeline.mark("decision landed, every run finished")
            ticks = gql.sensor(*location, "release_block_sensor")["sensorState"]["ticks"]
            notified = [
                t["timestamp"] for t in ticks if f"{BUILD}: block notified" in (t["skipReason"] or "")
            ]
            if not notified:
                return None
            timeline.mark("block notified")
            if not any(t["timestamp"] > notified[0] and t["status"] != "STARTED" for t in ticks):
                return None
            timeline.mark("release-block sensor ticked again")
            return decisions

        decisions = wait_for(notified_and_checked_again, timeline.remaining(), 1.0)
        assert decisions, f"no notified decision within {DEADLINE_S} s:\n{timeline}\n{ui.log_tail()}"

        runs = sorted((r for r in gql.runs() if _build_of(r) == BUILD), key=lambda r: r["assets"])
        by_sensor = {
            (r["tags"].get("dagster/sensor_name"), tuple(r["assets"]), r["tags"]["dagster/partition"]): r
            for r in runs
        }
        assert len(by_sensor) == len(runs) == 3, [(r["assets"], r["tags"]) for r in runs]
        # the build sensor's run: its blocking gate check failed, so the run failed (the suite still
        # materialized: a failing gate is evidence, not a crash)
        root = by_sensor[("build_sensor", tuple(ROOT_ASSETS), BUILD)]
        assert (root["status"], root["tags"]["dagster/run_key"]) == ("FAILURE", f"build-{BUILD}")
        [judge] = KEPT_JUDGES
        chain = by_sensor[("default_automation_condition_sensor", tuple(JUDGE_CHAIN), f"{BUILD}|{judge}")]
        # the decision and its approval run together; a blocked build is refused approval, so that run
        # fails (red in the partition list) after the decision materialized
        decided = by_sensor[
            ("default_automation_condition_sensor", ("release_approval", "release_decision"), BUILD)
        ]
        assert (chain["status"], decided["status"]) == ("SUCCESS", "FAILURE")
        assert gql.materializations("release_approval", BUILD) == []

        [suite] = gql.materializations("deterministic_suite", BUILD)
        assert suite["metadata"]["blocking"] == [gate_id] and suite["metadata"]["passed"] is False
        [decision] = decisions
        assert decision["runId"] == decided["runId"]
        assert decision["metadata"]["decision"] == "block"
        assert gate_id in decision["metadata"]["reasons"]  # one markdown entry, grouped by severity

        lines = sink.read_text(encoding="utf-8").splitlines()
        assert len(lines) == 1, lines
        notice = json.loads(lines[0])
        assert (notice["build"], notice["decision"], notice["run_id"]) == (BUILD, "block", decided["runId"])
        assert [p["key"] for p in posts] == [notice["key"]]

        # the instance this ran on: queued runs, provider pools, storage where it was asked to be
        instance_yaml = (home / "dagster" / "dagster.yaml").read_text()
        assert "class: QueuedRunCoordinator" in instance_yaml and "max_concurrent_runs:" in instance_yaml
        if pg_port is not None:
            assert f"env: {PG_URL_ENV}" in instance_yaml and instance_env[PG_URL_ENV] not in instance_yaml
            assert {"runs", "event_logs", "concurrency_limits"} <= _instance_tables(int(pg_port))
            assert not (home / "dagster" / "history" / "runs.db").exists()  # nothing went to SQLite
        else:
            assert (home / "dagster" / "history" / "runs.db").exists()

        tree = ui.tree()
        assert ui.terminate(STOP_BOUND_S) == 0, f"`evaltrack ui` did not exit on SIGTERM:\n{ui.log_tail()}"
        timeline.mark("evaltrack ui exited on SIGTERM")
        assert wait_for(lambda: not port_open(port), PORT_CLOSE_BOUND_S, 0.2), "the port stayed open"
        assert not ui.tree(), f"left running after SIGTERM (of {sorted(tree)}): {sorted(ui.tree())}"
        print(f"\n{timeline}")
