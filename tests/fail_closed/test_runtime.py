"""Issue 11, items 2, 9 and 10: each reproduction as a case, with the outcome it must have now.

Item 2: a damaged or missing warehouse file is named, moved aside and gives its build exit 4; other
builds read on. Item 9: one run per (build, asset, partition); stored costs are settled costs; a
killed run is marked failed and its lease freed. Item 10: bounds (deadline, attempts, output size,
judge prompt size) are refusals or failures with a reason, never a silent truncation.
Every case fails on the code before issue 11.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from eval_assets.capability.track import RunBoundExceeded, RunRefused, Track
from eval_assets.cli import main
from eval_assets.config import ConfigError, Project, load_project
from eval_assets.home import PROJECT_ROOT, EvalHome
from eval_assets.spend import AttemptRef, Ceilings

sys.path.insert(0, str(PROJECT_ROOT / "tests"))
from e2e.project import small_project  # noqa: E402
from shared import full_row

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs

SCENARIO = "support.refund-policy"


# --- helpers ------------------------------------------------------------------------------------


def _small(tmp_path: Path, **bounds: Any) -> Path:
    root = small_project(tmp_path / "project", scenarios=(SCENARIO,))
    for registry in (root / "gates").glob("*.yaml"):  # no gates: the deterministic suite is quick
        registry.unlink()
    if bounds:
        settings = yaml.safe_load((root / "evaltrack.yaml").read_text())
        settings["bounds"] = bounds
        (root / "evaltrack.yaml").write_text(yaml.safe_dump(settings))
    return root


def _manifest(path: Path, build_id: str, api_base: str | None = None) -> Path:
    subject: dict[str, Any] = {
        "model": "sim/agent",
        "family": "sim",
        "params": {"seed": 7, "error_rate": 0.0},
    }
    if api_base is not None:
        subject = {"model": "openai/gpt-4o-mini", "family": "openai", "api_base": api_base}
    data = {"id": build_id, "milestone": 0, "subject": subject, "judges": ["helpfulness-v1"]}
    path.write_text(yaml.safe_dump(data))
    return path


class GatedModel:
    """An OpenAI-compatible server on 127.0.0.1: every completion waits until `open()`, then answers
    `text` (with a sim-quality marker the sim judge reads). `arrived` is set by the first request."""

    def __init__(self, text: str = "Here is the refund policy. [sim-quality=0.8]", gated: bool = True):
        self.text, self.requests = text, 0
        self.gate, self.arrived = threading.Event(), threading.Event()
        if not gated:
            self.gate.set()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer._lock:
                    outer.requests += 1
                outer.arrived.set()
                outer.gate.wait(300)
                body = json.dumps(
                    {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "gpt-4o-mini",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": outer.text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> GatedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(30)


class Cli:
    """`evaltrack ARGS` as a process; threads drain its stdout and stderr (a full pipe would stall it)."""

    def __init__(self, root: Path, home: Path, *args: str):
        env = dict(
            os.environ,
            LITELLM_OFFLINE_MODE="true",
            OPENAI_API_KEY="test-" + "key-not-a-secret",
            EVAL_HOME=str(home),
            EVAL_PROJECT_ROOT=str(root),
            PYTHONUNBUFFERED="1",
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eval_assets.cli", "--project", str(root), "--home", str(home), *args],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid
        self.out: list[str] = []
        self.err: list[str] = []
        self.waiting = threading.Event()  # it printed "waiting:" (run --wait)
        self._threads = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _drain(self, stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)
            if line.startswith("waiting:"):
                self.waiting.set()

    def wait(self, timeout: float = 1800) -> int:
        code = self.proc.wait(timeout)
        for thread in self._threads:
            thread.join(60)
        return code

    def text(self) -> str:
        return "".join(self.out) + "".join(self.err)


def _until(event: threading.Event, cli: Cli, what: str) -> None:
    """Wait for `event`, failing at once if the process exits first (no sleep orders anything here)."""
    while not event.wait(5):
        assert cli.proc.poll() is None, f"exited ({cli.proc.returncode}) before {what}: {cli.text()[-3000:]}"


@pytest.fixture
def stopped() -> Iterator[list[Cli]]:
    """Processes a test starts; any still running at its end is killed."""
    procs: list[Cli] = []
    yield procs
    for cli in procs:
        if cli.proc.poll() is None:
            cli.proc.kill()
            cli.proc.wait(30)


# --- item 2: a corrupt file reads as "block" ----------------------------------------------------


def _two_decided_builds(project: Project, home: EvalHome) -> tuple[Track, str, str, Path, int]:
    """A damaged-to-be build (the candidate) and a healthy one (the baseline, whose evidence does not
    hold the candidate), each with a verdicts file and a decision; and the healthy build's exit code
    before anything is damaged (its decision was written by hand, without evidence, so it is not an
    allow: what matters is that damage elsewhere does not change it)."""
    track = Track(project, home)
    healthy = track.register_build(project.root / "examples/builds/baseline.yaml").id
    damaged = track.register_build(project.root / "examples/builds/candidate.yaml").id
    verdict = full_row(
        "judge_verdicts",
        {"scenario_id": SCENARIO, "repeat": 1, "status": "scored", "score": 0.8, "policy_failures": 0},
    )
    files = {}
    for build in (damaged, healthy):
        run_id = f"run-{build}"
        files[build] = track.warehouse.write_partition(
            "judge_verdicts", {"build": build, "judge_version": "helpfulness-v1"}, [verdict], run_id
        )
        track.warehouse.write_partition(
            "release_decisions",
            {"build": build},
            [full_row("release_decisions", {"decision": "allow", "reasons": "ok"})],
            run_id,
        )
        track.warehouse.write_partition(
            "release_decision_reasons",
            {"build": build},
            [full_row("release_decision_reasons", {"rank": 1, "severity": "info"})],
            run_id,
        )
    before = main(["release-status", healthy])
    assert before != 4
    return track, damaged, healthy, files[damaged], before


def test_item2_deleted_partition_file_is_noticed_and_exits_4(
    project: Project, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    _track, damaged, healthy, path, before = _two_decided_builds(project, home)
    path.unlink()
    assert main(["release-status", damaged]) == 4  # was: exit 0, the deletion unnoticed
    assert "missing: the file was deleted" in capsys.readouterr().err
    assert main(["release-status", healthy]) == before


# --- item 9: two runs of one build at once pay twice --------------------------------------------


def test_item9_stored_cost_of_each_attempt_is_exactly_what_the_journal_settled(
    project: Project, home: EvalHome
) -> None:
    track = Track(project, home)
    build = track.register_build(project.root / "examples/builds/baseline.yaml").id
    # try 1 of one attempt reserved by a run that died before settling it
    key = AttemptRef(build, SCENARIO, 1, "subject").attempt(1)
    track.journal.reserve(
        key,
        run_id="killed",
        model="sim/agent",
        worst_case_usd=0.004,
        ceilings=Ceilings(),
        now=datetime.now(UTC),
    )
    materialize_scenario_runs(track, build, "run-after")
    settled: dict[tuple[str, int], float] = {}
    for row in track.journal.rows(build=build, role="subject"):
        settled[(row.scenario_id, row.repeat)] = settled.get((row.scenario_id, row.repeat), 0.0) + (
            row.cost_usd or 0.0
        )
    stored = track.warehouse.query("SELECT scenario_id, repeat, cost_usd FROM scenario_runs")
    for r in stored.itertuples():
        assert r.cost_usd == pytest.approx(settled.get((r.scenario_id, r.repeat), 0.0), abs=1e-12), r
    assert (SCENARIO, 1) in {(r.scenario_id, r.repeat) for r in stored.itertuples()}


def test_item9_a_second_run_is_refused_naming_the_holder_and_with_wait_reuses_the_journal(
    tmp_path: Path, stopped: list[Cli]
) -> None:
    root, home = _small(tmp_path), tmp_path / "home"
    with GatedModel() as model:
        manifest = _manifest(tmp_path / "b.yaml", "slow", model.base_url)
        assert main(["--project", str(root), "--home", str(home), "build", "add", str(manifest)]) == 0
        first = Cli(root, home, "run", "--build", "slow")
        stopped.append(first)
        _until(model.arrived, first, "calling the model")  # it holds its lease now, its calls held
        second = Cli(root, home, "run", "--build", "slow")
        stopped.append(second)
        assert second.wait() == 1, second.text()
        assert f"is being run by process {first.pid} on " in second.text() and "--wait" in second.text()
        waiter = Cli(root, home, "run", "--build", "slow", "--wait")
        stopped.append(waiter)
        _until(waiter.waiting, waiter, "waiting for the lease")
        assert f"process {first.pid}" in "".join(waiter.out)
        model.gate.set()
        assert first.wait() == 0, first.text()[-3000:]
        paid_by_first = model.requests
        assert waiter.wait() == 0, waiter.text()[-3000:]
    assert paid_by_first >= 1
    assert model.requests == paid_by_first  # the waiting run reused every settled call: none paid twice
    track = Track(load_project(root), EvalHome(home))
    subject_rows = track.journal.rows(build="slow", role="subject")
    # held calls may time out (a failed try, then the next): every try is settled or failed, none hangs
    assert len(subject_rows) == paid_by_first and {r.status for r in subject_rows} <= {"settled", "failed"}
    stored = track.warehouse.query("SELECT sum(cost_usd) AS usd FROM scenario_runs WHERE build = 'slow'")
    assert stored["usd"].iloc[0] == pytest.approx(sum(r.cost_usd or 0 for r in subject_rows), abs=1e-12)


def test_item9_a_run_killed_with_kill_9_is_marked_failed_and_its_lease_is_taken_at_once(
    tmp_path: Path, stopped: list[Cli]
) -> None:
    root, home = _small(tmp_path), tmp_path / "home"
    with GatedModel() as model:
        manifest = _manifest(tmp_path / "b.yaml", "killed", model.base_url)
        assert main(["--project", str(root), "--home", str(home), "build", "add", str(manifest)]) == 0
        victim = Cli(root, home, "run", "--build", "killed")
        stopped.append(victim)
        _until(model.arrived, victim, "calling the model")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(60)
    from eval_assets.cli.orchestrate import instance_for

    instance = dg.DagsterInstance.from_config(str(EvalHome(home).dagster))
    started = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    assert len(started) == 1  # what kill -9 leaves behind
    instance_for(EvalHome(home))  # the next evaltrack command on this host
    run = instance.get_run_by_id(started[0].run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    track = Track(load_project(root), EvalHome(home))
    assert track.journal.leases(build="killed")  # left behind by the killed run ...
    with track.lease("killed", "scenario_runs", "killed", "next") as lease:  # ... and taken at once
        held = [r.holder for r in track.journal.leases(build="killed") if r.asset == "scenario_runs"]
        assert held == [lease.holder]
    cfg = yaml.safe_load((EvalHome(home).dagster / "dagster.yaml").read_text())
    assert cfg["run_monitoring"]["enabled"] is True


# --- item 10: bounds instead of backlogs --------------------------------------------------------


def test_item10_bounds_have_defaults_and_bad_values_are_refused_naming_the_field(tmp_path: Path) -> None:
    bounds = load_project(PROJECT_ROOT).settings.bounds
    assert (bounds.run_deadline_s, bounds.max_attempts_per_run) == (21600.0, 20000)
    assert (bounds.max_output_bytes, bounds.max_judge_prompt_bytes) == (262144, 524288)
    with pytest.raises(ConfigError, match="bounds.max_output_bytes"):
        load_project(_small(tmp_path, max_output_bytes=-1))


def test_item10_run_deadline_fails_the_run_keeps_settled_tries_and_the_rerun_pays_each_once(
    tmp_path: Path, home: EvalHome
) -> None:
    track = Track(load_project(_small(tmp_path)), home)
    build = track.register_build(_manifest(tmp_path / "b.yaml", "late")).id
    ticks = iter([0.0] * 3 + [1e9] * 10_000)  # start + 2 tries within the deadline, then past it
    track.clock = lambda: next(ticks)
    with pytest.raises(RunBoundExceeded, match=r"bounds.run_deadline_s=21600 passed with 2 of \d+ attempts"):
        materialize_scenario_runs(track, build, "run-late")
    first = track.journal.rows(build=build, role="subject")
    assert len(first) == 2 and {r.status for r in first} == {"settled"}  # kept, none left reserved
    assert track.warehouse.query("SELECT count(*) AS n FROM scenario_runs")["n"].tolist() == [0]
    track.clock = time.monotonic
    summary = materialize_scenario_runs(track, build, "run-again")
    after = {r.attempt_key: r for r in track.journal.rows(build=build, role="subject")}
    assert summary["reused_from_journal"] == 2
    assert all(after[r.attempt_key].run_id == "run-late" for r in first)  # paid once, by the first run
    assert len(after) == summary["attempts"]


def test_item10_a_run_planning_more_attempts_than_the_cap_is_refused_before_any_call(
    tmp_path: Path, home: EvalHome
) -> None:
    track = Track(load_project(_small(tmp_path, max_attempts_per_run=2)), home)
    build = track.register_build(_manifest(tmp_path / "b.yaml", "big")).id
    with pytest.raises(RunRefused, match=r"plans \d+ attempts, above bounds.max_attempts_per_run=2"):
        materialize_scenario_runs(track, build, "run-big")
    assert track.journal.rows() == []


def test_item10_an_over_cap_output_is_stored_cut_with_a_marker_and_never_judged(
    tmp_path: Path, home: EvalHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-a-secret")
    track = Track(load_project(_small(tmp_path)), home)
    with GatedModel(text="x" * 3_000_000 + " [sim-quality=0.9]", gated=False) as model:  # a 3 MB answer
        build = track.register_build(_manifest(tmp_path / "b.yaml", "huge", model.base_url)).id
        materialize_scenario_runs(track, build, "run-huge")
    cap = track.project.settings.bounds.max_output_bytes
    runs = track.warehouse.query("SELECT status, error_kind, error, output FROM scenario_runs")
    assert set(runs["status"]) == {"error"} and set(runs["error_kind"]) == {"output_cap"}
    assert runs["error"].str.contains(f"output of 3000018 bytes exceeds bounds.max_output_bytes={cap}").all()
    assert (
        runs["output"]
        .str.endswith(f"[evaltrack: output cut at {cap} of 3000018 bytes (bounds.max_output_bytes)]")
        .all()
    )
    # the journal stays small: the cut text, its marker and the call envelope (`[evaltrack-call/2]`,
    # with the policy's hits and digest), never the 3 MB answer
    assert max(len(p.payload or "") for p in track.journal.rows()) < cap + 1024
    materialize_judge_verdicts(track, build, "helpfulness-v1", "run-judge")
    verdicts = track.warehouse.query("SELECT status, failure_reason FROM judge_verdicts")
    assert set(verdicts["status"]) == {"failed"}
    assert verdicts["failure_reason"].str.contains("exceeds bounds.max_output_bytes").all()
    assert track.journal.rows(role="judge") == []  # never sent to a judge


def test_item10_an_over_cap_judge_prompt_is_a_failed_verdict_with_its_reason_and_no_call(
    tmp_path: Path, home: EvalHome
) -> None:
    track = Track(load_project(_small(tmp_path, max_judge_prompt_bytes=1024)), home)
    build = track.register_build(_manifest(tmp_path / "b.yaml", "wordy")).id
    materialize_scenario_runs(track, build, "run-wordy")
    materialize_judge_verdicts(track, build, "helpfulness-v1", "run-judge")
    verdicts = track.warehouse.query("SELECT status, failure_reason FROM judge_verdicts")
    assert len(verdicts) and set(verdicts["status"]) == {"failed"}
    assert (
        verdicts["failure_reason"]
        .str.match(r"judge prompt of \d+ bytes exceeds bounds.max_judge_prompt_bytes=1024; no call made")
        .all()
    )
    assert track.journal.rows(role="judge") == []
