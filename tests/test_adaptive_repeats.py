"""Adaptive repeats through the engine (`repeats: adaptive`, docs/methods.md): a candidate with a judged
baseline runs 3 repeats, looks, and tops up the uncertain scenarios with repeats 4 and 5 as ordinary
attempts: keyed, paid once, visible in `scenario_runs`, `judge_verdicts` and `cost_ledger`, and
resumable after kill -9. Real sim provider through litellm, real SQLite journal, real Parquet warehouse."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from shared import copy_manifest, evaltrack, evaltrack_here, kill_9_when, slow_project_copy

from eval_assets.capability.baselines import verdict_frame
from eval_assets.capability.materialize import (
    materialize_cost_ledger,
    materialize_judge_verdicts,
    materialize_scenario_runs,
)
from eval_assets.capability.track import Track
from eval_assets.config import Project, load_project
from eval_assets.home import EvalHome
from eval_assets.release import build_report
from eval_assets.stats import CapabilityReport, compare

ROOT = Path(__file__).resolve().parents[1]
BASE, CAND, REBUILD = "agent-2026-11-28-base", "agent-2026-11-30-cand", "agent-2026-11-29-rebuild"
VOLATILE = ("run_id", "written_at")


def _adaptive(project: Project) -> Project:
    """The shipped project in adaptive mode, without scenario ceilings: a ceiling refuses a call while
    other calls' worst cases are reserved, and a re-run may then pay it (tests/test_crash_resume.py)."""
    settings = project.settings.model_copy(update={"repeats": "adaptive"})
    scenarios = {k: s.model_copy(update={"ceiling_usd": None}) for k, s in project.scenarios.items()}
    return dataclasses.replace(project, settings=settings, scenarios=scenarios)


def _track(project: Project, root: Path) -> Track:
    track = Track(_adaptive(project), EvalHome(root).ensure())
    for name in ("baseline", "candidate"):
        track.register_build(project.root / "examples" / "builds" / f"{name}.yaml")
    return track


def _judge(track: Track, build: str) -> None:
    for judge in track.judges_for(track.build(build)):
        materialize_judge_verdicts(track, build, judge.version_id, f"judge-{build}")
        materialize_cost_ledger(track, build, judge.version_id, f"ledger-{build}")


# what an attempt IS (a reused attempt's row also carries how long reading it back took: latency_s)
KEPT = {
    "scenario_runs": [
        "scenario_id",
        "repeat",
        "attempt_id",
        "status",
        "output",
        "policy_failures",
        "cost_usd",
    ]
}


def _rows(track: Track, table: str, build: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    frame = track.warehouse.query(
        f"SELECT * FROM {table} WHERE build = ? ORDER BY scenario_id, repeat", [build]
    )
    frame = frame.drop(columns=[c for c in VOLATILE if c in frame.columns]).astype(object)
    if columns is not None:
        frame = frame[columns]
    return frame.where(frame.notna(), None).to_dict("records")


def _journal(track: Track, build: str) -> list[tuple[str, str, float | None]]:
    return sorted((r.attempt_key, r.status, r.cost_usd) for r in track.journal.rows(build=build))


def test_a_baseline_without_a_baseline_runs_the_fixed_count_and_says_so(
    project: Project, tmp_path: Path
) -> None:
    track = _track(project, tmp_path / "home")
    values = materialize_scenario_runs(track, BASE, "run-base").values
    fixed = sum(s.repeats for s in track.scenarios_for(track.build(BASE)))
    assert values["attempts"] == values["attempts_fixed_count"] == fixed
    assert "no baseline to look against; fixed count run" in values["adaptive"]
    assert "adaptive_start" not in values


def test_top_ups_are_keyed_attempts_in_every_table_and_a_rerun_pays_nothing_new(
    project: Project, tmp_path: Path
) -> None:
    track = _track(project, tmp_path / "home")
    track.register_build(project.root / "examples" / "builds" / "rebuild.yaml")
    materialize_scenario_runs(track, BASE, "run-base")
    _judge(track, BASE)

    values = materialize_scenario_runs(track, REBUILD, "run-cand").values
    topped = set(values["topped_up_scenarios"])
    scenarios = track.scenarios_for(track.build(REBUILD))
    assert values["adaptive_start"] == 3 and values["adaptive_baseline"] == BASE
    assert 0 < len(topped) < len(scenarios)
    # an unchanged rebuild: a few scenarios are uncertain at the first look, none blocks it
    looked = values["adaptive_look"]
    assert [v["blocked_at_first_look"] for v in looked.values()] == [False] * len(looked)
    repeats: dict[str, list[int]] = {}
    for row in _rows(track, "scenario_runs", REBUILD):
        repeats.setdefault(row["scenario_id"], []).append(int(row["repeat"]))
    assert {sid: sorted(r) for sid, r in repeats.items()} == {
        s.id: list(range(1, (s.repeats if s.id in topped else 3) + 1)) for s in scenarios
    }
    assert values["attempts"] == 3 * len(scenarios) + 2 * len(topped)
    assert values["attempts_saved"] == values["attempts_fixed_count"] - values["attempts"] > 0

    _judge(track, REBUILD)
    verdicts = {(r["scenario_id"], int(r["repeat"])) for r in _rows(track, "judge_verdicts", REBUILD)}
    assert {(sid, 5) for sid in topped} <= verdicts
    assert not {(sid, r) for sid, r in verdicts if r > 3 and sid not in topped}
    ledger = _rows(track, "cost_ledger", REBUILD)
    for role in ("subject", "judge"):
        assert {r["scenario_id"] for r in ledger if r["role"] == role and int(r["repeat"]) > 3} == topped

    paid = _journal(track, REBUILD)
    rows = {t: _rows(track, t, REBUILD, KEPT.get(t)) for t in ("scenario_runs", "judge_verdicts")}
    again = materialize_scenario_runs(track, REBUILD, "run-cand-again").values
    _judge(track, REBUILD)
    assert _journal(track, REBUILD) == paid  # same keys, same amounts: the re-run paid nothing new
    assert {t: _rows(track, t, REBUILD, KEPT.get(t)) for t in rows} == rows
    assert again["topped_up_scenarios"] == values["topped_up_scenarios"]


def _findings(report: CapabilityReport) -> list[tuple[object, ...]]:
    return [(f.finding, f.scenario_id, f.p_value, f.verdict) for f in report.findings]


def test_a_stored_builds_report_keeps_the_looks_its_run_made_when_the_repeats_setting_is_switched(
    project: Project, tmp_path: Path
) -> None:
    """The design is read from the build's own rows, not from the project's setting at report time."""
    track = _track(project, tmp_path / "home")
    materialize_scenario_runs(track, BASE, "run-base")
    _judge(track, BASE)
    materialize_scenario_runs(track, CAND, "run-cand")
    _judge(track, CAND)

    def recorded(build: str) -> set[tuple[object, object]]:
        return {(r["adaptive_start"], r["adaptive_maximum"]) for r in _rows(track, "scenario_runs", build)}

    assert recorded(CAND) == {(3, 5)}
    assert recorded(BASE) == {(None, None)}  # no baseline of its own: it ran the fixed count
    # the same home, read by a project switched back to fixed repeats after the run
    switched = Track(project, EvalHome(tmp_path / "home"))
    assert switched.project.settings.repeats == "fixed"
    for judge in track.judges_for(track.build(CAND)):
        run = build_report(track, track.build(CAND), judge.version_id, BASE)
        ran = run.report
        later = build_report(switched, switched.build(CAND), judge.version_id, BASE).report
        assert _findings(later) == _findings(ran)
        assert (later.verdict, later.aa_block_rate, later.aa_flag_rate) == (
            ran.verdict,
            ran.aa_block_rate,
            ran.aa_flag_rate,
        )
        # and the looks matter here: the same verdicts read as one look give other p-values
        one_look = compare(
            verdict_frame(track, BASE, judge.version_id),
            verdict_frame(track, CAND, judge.version_id),
            track.project.rubric_for(judge).floor,
            run.band,
            n_judge_versions=ran.n_judge_versions,
            judge_version=judge.version_id,
            aa_replications=0,
        )
        assert _findings(one_look) != _findings(ran)


# --- kill -9 during the top-ups ---------------------------------------------------------------------


def _project_copy(dest: Path) -> Path:
    """The shipped project in adaptive mode, slow and narrow (2 calls in flight, 60 ms each) so a kill
    lands in the top-ups, with the example baseline and rebuild."""
    project = slow_project_copy(
        dest, {"concurrency_per_model": 2, "timeout_s": 30, "max_tries": 3}, repeats="adaptive"
    )
    for name in ("baseline", "rebuild"):
        copy_manifest(
            ROOT / f"examples/builds/{name}.yaml",
            project / f"{name}.yaml",
            {"latency_ms": 60, "error_rate": 0.0},
        )
    return project


def _ledger(home: Path) -> dict[str, tuple[str, float | None]]:
    path = home / "journal.sqlite"
    if not path.exists():
        return {}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT attempt_key, status, cost_usd FROM spend_journal").fetchall()
    except sqlite3.OperationalError:
        return {}  # the schema is not there yet
    finally:
        con.close()
    return {key: (status, cost) for key, status, cost in rows}


def _top_up_keys(ledger: dict[str, tuple[str, float | None]]) -> set[str]:
    """Settled subject calls of the candidate's repeats past the first look's 3."""
    out = set()
    for key, (status, _) in ledger.items():
        build, _, _, repeat, role, _ = key.split("#")[0].split("/")
        if build == REBUILD and role == "subject" and int(repeat) > 3 and status == "settled":
            out.add(key)
    return out


@pytest.mark.e2e  # the slow lane: a run killed with kill -9, then resumed, each in a process of its own
def test_kill_9_during_the_top_ups_then_resume_tops_up_the_same_scenarios_paying_each_attempt_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project_copy(tmp_path / "project")
    home = tmp_path / "home"
    loaded = load_project(project)
    track = Track(loaded, EvalHome(home))
    for name in ("baseline", "rebuild"):
        track.register_build(project / f"{name}.yaml")
    # every run but the one killed runs in this process (a process of its own imports the stack again)
    evaltrack_here(capsys, project, home, "run", "--build", BASE)

    # an unchanged rebuild: some scenarios stay uncertain at the first look and are topped up
    victim = evaltrack(project, home, "run", "--build", REBUILD)
    kill_9_when(  # once the first look is over and the top-ups are being paid
        victim,
        lambda: bool(_top_up_keys(_ledger(home))),
        within_s=300,
        never="the top-ups never started",
        poll_s=0.02,
    )
    at_kill = _ledger(home)
    paid_before = {k: v for k, v in at_kill.items() if v[0] in ("settled", "failed")}

    out = evaltrack_here(capsys, project, home, "run", "--build", REBUILD)
    assert "topping up" in out or "scenario_runs (top-ups)" in out, out
    resumed = _ledger(home)
    # every call settled before the kill kept its row: reused, never paid again
    assert {k: resumed.get(k) for k in paid_before} == paid_before
    reader = Track(loaded, EvalHome(home))
    runs = reader.warehouse.query(
        "SELECT scenario_id, max(repeat) AS k, count(*) AS n FROM scenario_runs WHERE build = ? GROUP BY 1",
        [REBUILD],
    )
    topped = set(runs.loc[runs["k"] > 3, "scenario_id"])
    assert topped and set(runs["k"]) <= {3, 5} and (runs["n"] == runs["k"]).all()
    # the resumed run topped up the scenarios whose top-ups had started before the kill (same look)
    started = {key.split("/")[2] for key in _top_up_keys(at_kill)}
    assert started <= topped
    # one more run pays nothing new
    evaltrack_here(capsys, project, home, "run", "--build", REBUILD)
    assert _ledger(home) == resumed
