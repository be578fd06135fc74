"""kill -9 a run of the example agent halfway, run it again: every settled agent call is answered from
the journal, no attempt key is paid twice, and spend stays within one run's plus what was in flight."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from shared import (
    assert_the_rerun_paid_nothing_twice,
    evaltrack,
    evaltrack_here,
    killed_after,
    ledger,
    registered_in_two_homes,
    spend,
)
from test_crash_resume import _project_copy

ROOT = Path(__file__).resolve().parents[1]
BUILD_ID = "tool-agent-example"
JUDGE = "helpfulness-v1"


# each agent attempt is a process of its own that imports the OpenAI SDK: the six converted scenarios
# (30 attempts, whose prompts lead the sim to call tools) are enough for a kill to land mid-run
KEPT = "converted"


def _agent_project(dest: Path) -> Path:
    """The crash test's slow, narrow project, with the example agent's manifest (calls 100 ms each) and
    only the `KEPT` suite's scenarios."""
    project = _project_copy(dest)
    for suite in (project / "scenarios").iterdir():
        if suite.name != KEPT:
            shutil.rmtree(suite)
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


@pytest.mark.e2e  # the slow lane (three runs of the example agent, a process per attempt): bash scripts/test_e2e
def test_kill_9_halfway_through_an_agent_run_then_rerun_pays_no_agent_call_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _agent_project(tmp_path / "project")
    clean, crashed = registered_in_two_homes(project, "agent-build.yaml", tmp_path)

    # the clean run and the rerun in this process; the run that is killed is a process of its own
    evaltrack_here(capsys, project, clean, *RUN)
    uninterrupted = ledger(clean)
    calls = _agent_calls_by_attempt(clean)
    assert calls and max(calls.values()) > 1  # the agent made several calls per attempt (tools, then answer)

    victim = evaltrack(project, crashed, *RUN)
    total = sum(1 for key, status, *_ in uninterrupted if "/subject/" in key and status == "settled")
    at_kill, in_flight = killed_after(victim, crashed, total // 3, 600, uninterrupted)

    out = evaltrack_here(capsys, project, crashed, *RUN)
    resumed = ledger(crashed)
    assert_the_rerun_paid_nothing_twice(out, at_kill, resumed, uninterrupted, in_flight)
    # no attempt key twice (the journal's primary key), and the same calls as a clean run's
    assert len({r[0] for r in resumed}) == len(resumed)
    assert _agent_calls_by_attempt(crashed).keys() == calls.keys()
    print(
        f"agent run: spend uninterrupted ${spend(uninterrupted):.6f}, interrupted+resumed "
        f"${spend(resumed):.6f}, {len(in_flight)} calls in flight at the kill"
    )
