"""kill -9 a run of the example agent halfway, run it again: every settled agent call is answered from
the journal, no attempt key is paid twice, and spend stays within one run's plus what was in flight."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import yaml
from shared import evaltrack, evaltrack_here
from test_crash_resume import _ledger, _project_copy, _settled_subject_calls, _spend

from eval_assets.capability.track import Track
from eval_assets.config import load_project
from eval_assets.home import EvalHome

ROOT = Path(__file__).resolve().parents[1]
BUILD_ID = "tool-agent-example"
JUDGE = "helpfulness-v1"


def _agent_project(dest: Path) -> Path:
    """The crash test's slow, narrow project, with the example agent's manifest (calls 100 ms each)."""
    project = _project_copy(dest)
    manifest = yaml.safe_load((ROOT / "examples/agents/tool-agent.yaml").read_text())
    manifest["subject"]["params"].update(latency_ms=100)
    (project / "agent-build.yaml").write_text(yaml.safe_dump(manifest))
    return project


RUN = ("run", "--build", BUILD_ID, "--judge-version", JUDGE)


def _agent_calls_by_attempt(home: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{home / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT attempt_key FROM spend_journal WHERE status = 'settled'").fetchall()
    finally:
        con.close()
    out: dict[str, int] = {}
    for (key,) in rows:
        if "/subject/" in key:
            attempt = key.rsplit("/subject/", 1)[0]
            out[attempt] = out.get(attempt, 0) + 1
    return out


def test_kill_9_halfway_through_an_agent_run_then_rerun_pays_no_agent_call_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _agent_project(tmp_path / "project")
    clean, crashed = tmp_path / "clean-home", tmp_path / "crashed-home"
    loaded = load_project(project)
    for home in (clean, crashed):
        Track(loaded, EvalHome(home)).register_build(project / "agent-build.yaml")

    # the clean run and the rerun in this process; the run that is killed is a process of its own
    evaltrack_here(capsys, project, clean, *RUN)
    uninterrupted = _ledger(clean)
    calls = _agent_calls_by_attempt(clean)
    assert calls and max(calls.values()) > 1  # the agent made several calls per attempt (tools, then answer)

    victim = evaltrack(project, crashed, *RUN)
    deadline = time.monotonic() + 600
    total = sum(1 for key, status, *_ in uninterrupted if "/subject/" in key and status == "settled")
    while _settled_subject_calls(crashed) < total // 3:
        assert victim.poll() is None, victim.communicate()[0]
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)  # polling another process's progress, not waiting out a race
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    at_kill = _ledger(crashed)
    in_flight = [r for r in at_kill if r[1] == "reserved"]
    assert 0 < len([r for r in at_kill if r[1] == "settled"]) < len(uninterrupted)

    out = evaltrack_here(capsys, project, crashed, *RUN)
    resumed = _ledger(crashed)
    reused = re.search(r"scenario_runs +\d+/\d+ attempts .* · (\d+) reused", out)
    assert reused is not None and int(reused.group(1)) > 0, out
    # every call settled before the kill kept the row the killed run wrote: answered from the journal
    paid_before = {key: (status, cost) for key, status, cost, _ in at_kill if status in ("settled", "failed")}
    paid_after = {key: (status, cost) for key, status, cost, _ in resumed}
    assert {key: paid_after.get(key) for key in paid_before} == paid_before
    # no attempt key twice (the journal's primary key), and the same calls as a clean run's
    assert len({r[0] for r in resumed}) == len(resumed)
    assert _agent_calls_by_attempt(crashed).keys() == calls.keys()
    # spend = one uninterrupted run's, plus at most the calls in flight at the kill
    extra = _spend(resumed) - _spend(uninterrupted)
    assert -1e-9 <= extra <= sum(r[3] for r in in_flight) + 1e-9, (extra, in_flight)
    print(
        f"agent run: spend uninterrupted ${_spend(uninterrupted):.6f}, interrupted+resumed "
        f"${_spend(resumed):.6f}, {len(in_flight)} calls in flight at the kill"
    )
