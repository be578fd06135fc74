"""Crash and resume: kill -9 a real materialization halfway, materialize again, never pay twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared import (
    assert_the_rerun_paid_nothing_twice,
    copy_manifest,
    evaltrack,
    evaltrack_here,
    killed_after,
    ledger,
    registered_in_two_homes,
    slow_project_copy,
    spend,
)

ROOT = Path(__file__).resolve().parents[1]
BUILD_ID = "crash-build"
JUDGE = "helpfulness-v1"


def _project_copy(dest: Path) -> Path:
    """The shipped project, slow and narrow (4 calls in flight, 100 ms each) so a kill lands mid-run, with
    one build that has no baseline (`crash-build.yaml`)."""
    project = slow_project_copy(dest, {"concurrency_per_model": 4, "timeout_s": 30, "max_tries": 3})
    copy_manifest(
        ROOT / "examples/builds/baseline.yaml",
        project / "crash-build.yaml",
        {"latency_ms": 100, "error_rate": 0.0},
        id=BUILD_ID,
        baseline=None,
    )
    return project


def test_kill_9_mid_materialization_then_resume_pays_no_attempt_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project_copy(tmp_path / "project")
    clean, crashed = registered_in_two_homes(project, "crash-build.yaml", tmp_path)

    # the clean run and the resume run in this process; the run that is killed is a process of its own
    evaltrack_here(capsys, project, clean, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    uninterrupted = ledger(clean)

    victim = evaltrack(project, crashed, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    # halfway through the 83 subject calls
    at_kill, in_flight = killed_after(victim, crashed, 20, 300, uninterrupted)

    out = evaltrack_here(capsys, project, crashed, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    resumed = ledger(crashed)
    assert_the_rerun_paid_nothing_twice(out, at_kill, resumed, uninterrupted, in_flight)
    # an attempt settled in both ledgers was paid the same amount: nothing was charged twice over
    paid_after = {key: (status, cost) for key, status, cost, _ in resumed}
    clean_paid = {key: cost for key, status, cost, _ in uninterrupted if status == "settled"}
    both = {key for key, (status, _) in paid_after.items() if status == "settled"} & set(clean_paid)
    assert len(both) >= len(clean_paid) - len(in_flight)
    assert {key: paid_after[key][1] for key in both} == {key: clean_paid[key] for key in both}
    # in-flight reservations stay reserved (their worst case keeps counting against the ceilings)
    assert {r[0] for r in in_flight} <= {r[0] for r in resumed if r[1] == "reserved"}
    print(
        f"spend uninterrupted ${spend(uninterrupted):.6f}, interrupted+resumed ${spend(resumed):.6f}, "
        f"{len(in_flight)} calls in flight at the kill"
    )
