"""Crash and resume: kill -9 a real materialization halfway, materialize again, never pay twice."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from shared import copy_manifest, evaltrack, evaltrack_here, kill_9_when, slow_project_copy

from eval_assets.capability.track import Track
from eval_assets.config import load_project
from eval_assets.home import EvalHome

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


def _ledger(home: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{home / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT attempt_key, status, cost_usd, reserved_usd FROM spend_journal").fetchall()
    finally:
        con.close()


def _settled_subject_calls(home: Path) -> int:
    path = home / "journal.sqlite"
    if not path.exists():
        return 0
    try:
        return sum(1 for key, status, *_ in _ledger(home) if "/subject/" in key and status == "settled")
    except sqlite3.OperationalError:
        return 0  # the schema is not there yet


def _spend(rows: list[tuple]) -> float:
    return sum(cost or 0.0 for _, status, cost, _ in rows if status in ("settled", "failed"))


def _registered_in_two_homes(project: Path, manifest: str, tmp_path: Path) -> tuple[Path, Path]:
    """A clean home and a home whose run will be killed, each with the build of `manifest` registered."""
    clean, crashed = tmp_path / "clean-home", tmp_path / "crashed-home"
    loaded = load_project(project)
    for home in (clean, crashed):
        Track(loaded, EvalHome(home)).register_build(project / manifest)
    return clean, crashed


def _killed_after(
    victim: subprocess.Popen[str], crashed: Path, settled: int, within_s: float, uninterrupted: list[tuple]
) -> tuple[list[tuple], list[tuple]]:
    """kill -9 the victim once `settled` subject calls have settled in `crashed`; the ledger then, and
    its calls in flight (reserved, never settled)."""
    kill_9_when(
        victim,
        lambda: _settled_subject_calls(crashed) >= settled,
        within_s=within_s,
        never="the run never got going",
    )
    at_kill = _ledger(crashed)
    assert 0 < len([r for r in at_kill if r[1] == "settled"]) < len(uninterrupted)
    return at_kill, [r for r in at_kill if r[1] == "reserved"]


def _assert_the_rerun_paid_nothing_twice(
    out: str, at_kill: list[tuple], resumed: list[tuple], uninterrupted: list[tuple], in_flight: list[tuple]
) -> None:
    """The rerun after the kill reused the journal, kept every row settled before the kill as the killed
    run wrote it, and spent one uninterrupted run's money plus at most the calls in flight at the kill."""
    reused = re.search(r"scenario_runs +\d+/\d+ attempts .* · (\d+) reused", out)
    assert reused is not None and int(reused.group(1)) > 0, out
    # each call settled before the kill was settled exactly once: the rerun reused it, so its row
    # (status and the amount paid) is the one the killed run wrote
    paid_before = {key: (status, cost) for key, status, cost, _ in at_kill if status in ("settled", "failed")}
    paid_after = {key: (status, cost) for key, status, cost, _ in resumed}
    assert {key: paid_after.get(key) for key in paid_before} == paid_before
    extra = _spend(resumed) - _spend(uninterrupted)
    assert -1e-9 <= extra <= sum(r[3] for r in in_flight) + 1e-9, (extra, in_flight)


def test_kill_9_mid_materialization_then_resume_pays_no_attempt_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project_copy(tmp_path / "project")
    clean, crashed = _registered_in_two_homes(project, "crash-build.yaml", tmp_path)

    # the clean run and the resume run in this process; the run that is killed is a process of its own
    evaltrack_here(capsys, project, clean, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    uninterrupted = _ledger(clean)

    victim = evaltrack(project, crashed, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    # halfway through the 83 subject calls
    at_kill, in_flight = _killed_after(victim, crashed, 20, 300, uninterrupted)

    out = evaltrack_here(capsys, project, crashed, "run", "--build", BUILD_ID, "--judge-version", JUDGE)
    resumed = _ledger(crashed)
    _assert_the_rerun_paid_nothing_twice(out, at_kill, resumed, uninterrupted, in_flight)
    # an attempt settled in both ledgers was paid the same amount: nothing was charged twice over
    paid_after = {key: (status, cost) for key, status, cost, _ in resumed}
    clean_paid = {key: cost for key, status, cost, _ in uninterrupted if status == "settled"}
    both = {key for key, (status, _) in paid_after.items() if status == "settled"} & set(clean_paid)
    assert len(both) >= len(clean_paid) - len(in_flight)
    assert {key: paid_after[key][1] for key in both} == {key: clean_paid[key] for key in both}
    # in-flight reservations stay reserved (their worst case keeps counting against the ceilings)
    assert {r[0] for r in in_flight} <= {r[0] for r in resumed if r[1] == "reserved"}
    print(
        f"spend uninterrupted ${_spend(uninterrupted):.6f}, interrupted+resumed ${_spend(resumed):.6f}, "
        f"{len(in_flight)} calls in flight at the kill"
    )
