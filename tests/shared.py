"""What several test modules build the same way, in one place (imported as `shared`: tests/ is on the
path, as for `pg` and `agent_fixtures`): hand-made rows and frames, and a materialized home that a
module makes once and each test gets a copy of."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project, load_project
from eval_assets.gates import GateResult, SuiteResult, record_suite
from eval_assets.home import EvalHome
from eval_assets.warehouse import DATASETS

BASELINE = "agent-2026-11-28-base"
ONE_GATE = "config.example-builds-validate"  # the gate of `record_one_gate_suite`
ROOT = Path(__file__).resolve().parents[1]


def full_row(dataset: str, row: dict[str, Any]) -> dict[str, Any]:
    """A fixture row with the table's other columns given as None (every producer gives each column)."""
    ds = DATASETS[dataset]
    return {c: None for c, _ in ds.columns if c not in ds.partition_by} | row


def frame_from(scores: np.ndarray, ids: list[str] | None = None) -> pd.DataFrame:
    """A scored verdict frame from an (n_scenarios, n_repeats) score array."""
    n, k = scores.shape
    ids = ids or [f"s{i:03d}" for i in range(n)]
    return pd.DataFrame(
        {
            "scenario_id": np.repeat(ids, k),
            "repeat": np.tile(np.arange(k), n),
            "status": "scored",
            "score": scores.ravel(),
            "policy_failures": 0,
        }
    )


def record_one_gate_suite(
    track: Track, build: str, *, failing: bool, milestone: int = 2, run_id: str = "suite-run"
) -> None:
    """The deterministic suite's recorded outcome for a build: one gate (`ONE_GATE`), failing or passing."""
    gate = GateResult(
        gate_id=ONE_GATE,
        kind="corpus",
        milestone=0,
        status="fail" if failing else "pass",
        duration_s=0.01,
        message="1 of 3 member(s) failed" if failing else "",
        declared_in="docs/specs/configuration.md#Hard gates",
    )
    record_suite(track.warehouse, SuiteResult(build, milestone, datetime.now(UTC), (gate,)), run_id)


def current_file(home: Path, table: str, build: str) -> Path:
    """The file of `table`'s current partition of `build` in the home at `home`."""
    con = sqlite3.connect(home / "warehouse" / "partitions.sqlite")
    try:
        (rel,) = con.execute(
            "SELECT path FROM partition_files WHERE dataset = ? AND build = ? AND state = 'written' "
            "ORDER BY written_at_ns DESC, run_id DESC LIMIT 1",
            [table, build],
        ).fetchone()
    finally:
        con.close()
    return home / "warehouse" / "data" / rel


def edit_in_place(path: Path, offset: int) -> None:
    """Flip one byte, keeping the file's size and its mtime (what an mtime shortcut would miss)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def baseline_home(project: Project, root: Path, *, judged: bool) -> Path:
    """An EVAL_HOME at `root` with the example baseline registered and its scenario_runs materialized
    (and, when `judged`, every judge version's verdicts): a module's template, made once."""
    track = Track(project, EvalHome(root))
    track.register_build(project.root / "examples" / "builds" / "baseline.yaml")
    materialize_scenario_runs(track, BASELINE, "runs-1")
    for judge in sorted(project.judges) if judged else ():
        materialize_judge_verdicts(track, BASELINE, judge, f"verdicts-{judge}")
    return root


def track_on_copy(project: Project, template: Path, tmp_path: Path) -> Track:
    """A track over a copy of `template` (a home), so a test may change it freely."""
    root = tmp_path / "eval_home"
    shutil.copytree(template, root)
    return Track(project, EvalHome(root))


# --- a real `evaltrack` process over a project copy (the kill -9 tests) ------------------------------


def slow_project_copy(dest: Path, engine: dict[str, Any], **settings: Any) -> Path:
    """The shipped project copied to `dest` with these `engine` settings (slow and narrow, so a kill
    lands mid-run), any other top-level settings given (e.g. `repeats="adaptive"`), and without the
    scenarios' `ceiling_usd`: a reservation in flight at a kill keeps counting against its scope's
    ceiling (fail closed), so under a ceiling a resumed run may settle fewer attempts than a clean one,
    depending on when the kill lands. These tests are about paying no attempt twice; what a ceiling
    does after a crash is pinned by the journal's contract tests."""
    for sub in ("scenarios", "rubrics", "judges", "examples"):
        shutil.copytree(ROOT / sub, dest / sub)
    for path in (dest / "scenarios").rglob("*.yaml"):
        scenario = yaml.safe_load(path.read_text())
        if scenario.pop("ceiling_usd", None) is not None:
            path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    loaded = yaml.safe_load((ROOT / "evaltrack.yaml").read_text())
    (dest / "evaltrack.yaml").write_text(yaml.safe_dump(loaded | settings | {"engine": engine}))
    return dest


def copy_manifest(source: Path, dest: Path, subject_params: dict[str, Any], **fields: Any) -> Path:
    """A build manifest from `source` written to `dest` with its subject's sim knobs and top-level
    fields changed (a field given as None is left out)."""
    manifest = yaml.safe_load(source.read_text())
    manifest["subject"]["params"].update(subject_params)
    manifest.update(fields)
    dest.write_text(yaml.safe_dump({k: v for k, v in manifest.items() if v is not None}))
    return dest


def changed_manifest(tmp: Path, project: Project, name: str, **changes: object) -> Path:
    """The project's example build manifest `examples/builds/NAME` written to `tmp/<id>.yaml` with these
    top-level fields changed (a field given as None is left out)."""
    data = yaml.safe_load((project.root / "examples/builds" / name).read_text())
    data.update(changes)
    path = tmp / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def evaltrack(project: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    """`evaltrack --project P --home H ARGS` in its own process group (so a test can kill -9 it all)."""
    exe = Path(sys.executable).with_name("evaltrack")
    return subprocess.Popen(
        [str(exe), "--project", str(project), "--home", str(home), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def fresh_python(script: str, *args: str, cwd: Path, **env: str) -> Any:
    """`python -c script ARGS` in a fresh interpreter of this environment (this checkout first on the
    path, no EVAL_/DAGSTER_ variable of the test process, `env` added), in `cwd`; it must exit 0. The
    JSON its last stdout line prints."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "DAGSTER_"))}
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**clean, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def evaltrack_here(capsys: pytest.CaptureFixture[str], project: Path, home: Path, *args: str) -> str:
    """`evaltrack --project P --home H ARGS` run in this process, for a command that must exit 0 and is
    not itself the process under test (a clean run beside a killed one, the run that resumes after the
    kill): a process of its own would import the whole stack again, about 10 s of CPU each. Its output,
    stdout then stderr."""
    from eval_assets.cli import main

    capsys.readouterr()  # only this command's output
    code = main(["--project", str(project), "--home", str(home), *args])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    return out + err


def kill_9_when(
    victim: subprocess.Popen[str],
    ready: Callable[[], bool],
    *,
    within_s: float,
    never: str,
    poll_s: float = 0.05,
) -> None:
    """Poll `ready` until it holds, then kill -9 the victim's whole process group and reap it. Fails
    with the victim's output if it exits first, and with `never` if `ready` does not hold within
    `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while not ready():
        assert victim.poll() is None, victim.communicate()[0]
        assert time.monotonic() < deadline, never
        time.sleep(poll_s)  # polling another process's progress, not waiting out a race
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)


def ledger(home: Path) -> list[tuple]:
    """(attempt_key, status, cost_usd, reserved_usd) of every row of the journal under `home`, read-only."""
    con = sqlite3.connect(f"file:{home / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT attempt_key, status, cost_usd, reserved_usd FROM spend_journal").fetchall()
    finally:
        con.close()


def settled_subject_calls(home: Path) -> int:
    """How many subject calls have settled in the journal under `home` (0 before it exists)."""
    path = home / "journal.sqlite"
    if not path.exists():
        return 0
    try:
        return sum(1 for key, status, *_ in ledger(home) if "/subject/" in key and status == "settled")
    except sqlite3.OperationalError:
        return 0  # the schema is not there yet


def spend(rows: list[tuple]) -> float:
    """What the `ledger` rows paid (settled and failed tries)."""
    return sum(cost or 0.0 for _, status, cost, _ in rows if status in ("settled", "failed"))


def registered_in_two_homes(project: Path, manifest: str, tmp_path: Path) -> tuple[Path, Path]:
    """A clean home and a home whose run will be killed, each with the build of `manifest` registered."""
    clean, crashed = tmp_path / "clean-home", tmp_path / "crashed-home"
    loaded = load_project(project)
    for home in (clean, crashed):
        Track(loaded, EvalHome(home)).register_build(project / manifest)
    return clean, crashed


def killed_after(
    victim: subprocess.Popen[str], crashed: Path, settled: int, within_s: float, uninterrupted: list[tuple]
) -> tuple[list[tuple], list[tuple]]:
    """kill -9 the victim once `settled` subject calls have settled in `crashed`; the ledger then, and
    its calls in flight (reserved, never settled)."""
    kill_9_when(
        victim,
        lambda: settled_subject_calls(crashed) >= settled,
        within_s=within_s,
        never="the run never got going",
    )
    at_kill = ledger(crashed)
    assert 0 < len([r for r in at_kill if r[1] == "settled"]) < len(uninterrupted)
    return at_kill, [r for r in at_kill if r[1] == "reserved"]


def assert_the_rerun_paid_nothing_twice(
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
    extra = spend(resumed) - spend(uninterrupted)
    assert -1e-9 <= extra <= sum(r[3] for r in in_flight) + 1e-9, (extra, in_flight)


@asynccontextmanager
async def http_agent(handle: Callable[[Any], Awaitable[Any]]) -> AsyncIterator[str]:
    """An HTTP agent on a free 127.0.0.1 port whose `POST /attempt` is `handle` (an aiohttp handler);
    yields the attempt URL and stops the server on leaving."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/attempt", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/attempt"
    finally:
        await runner.cleanup()
