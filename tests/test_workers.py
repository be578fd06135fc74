"""Every core: blocks of a build's attempts run in worker processes and change no row.

The shipped project and example baseline (22 scenarios x 5, one scenario with a ceiling low enough
to stop it, a 2% retryable error rate) run once in the calling process and once in blocks of 3
scenarios on two worker processes (the calling process running none, so the workers run them all,
whichever is ready first), each against its own fresh home and journal.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import duckdb
import pytest
from shared import fresh_python
from worker_project import two_worker_project

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import (
    BLOCK_ATTEMPTS,
    Block,
    BlockRun,
    Counters,
    Runner,
    Track,
    TrackError,
    WorkerSetup,
    blocks_of,
    drive,
    worker_main,
)
from eval_assets.config import EngineSettings, Message, Project, Scenario
from eval_assets.home import EvalHome

ROOT = Path(__file__).resolve().parents[1]
BUILD = "agent-2026-11-28-base"
VOLATILE = ("run_id", "written_at", "latency_s")  # differ between any two runs, whatever the workers


def _with_workers(project: Project, workers: int) -> Project:
    engine = project.settings.engine.model_copy(update={"workers": workers, "min_attempts_per_worker": 1})
    return replace(project, settings=project.settings.model_copy(update={"engine": engine}))


def _rows(path: str) -> list[dict[str, Any]]:
    """A partition file's rows in file order, without the columns that differ between runs."""
    quoted = path.replace("'", "''")
    frame = duckdb.sql(f"SELECT * FROM read_parquet('{quoted}')").df()
    frame = frame.drop(columns=[c for c in VOLATILE if c in frame.columns]).astype(object)
    return frame.where(frame.notna(), None).to_dict("records")  # NaN != NaN: missing is None


def _materialize(project: Project, home: Path, workers: int) -> dict[str, Any]:
    track = Track(_with_workers(project, workers), EvalHome(home))
    if workers > 1:
        track.lanes = 0  # every block in a worker process
        track.block_attempts = 15
    track.register_build(ROOT / "examples/builds/baseline.yaml")
    subjects = materialize_scenario_runs(track, BUILD, f"run-w{workers}")
    out: dict[str, Any] = {"summary": subjects, "scenario_runs": _rows(subjects["partition_file"])}
    for judge in track.judges_for(track.build(BUILD))[:1]:  # one judge version keeps the test short
        verdicts = materialize_judge_verdicts(
            track, BUILD, judge.version_id, f"run-w{workers}-{judge.version_id}"
        )
        assert verdicts["workers"] == workers
        assert verdicts["blocks_by_process"][0] == (1 if workers == 1 else 0)
        out[judge.version_id] = _rows(verdicts["partition_file"])
    out["journal"] = [
        (r.attempt_key, r.status, r.cost_usd, r.prompt_tokens, r.completion_tokens)
        for r in track.journal.rows(build=BUILD)
    ]
    out["track"] = track
    return out


def test_worker_count_changes_no_row_and_pays_no_key_twice(project: Project, tmp_path: Path) -> None:
    one = _materialize(project, tmp_path / "one", 1)
    two = _materialize(project, tmp_path / "two", 3)
    assert one["summary"]["workers"] == 1 and two["summary"]["workers"] == 3
    assert one["summary"]["blocks_by_process"] == [1]  # 110 attempts: one block, in the calling process
    blocks = two["summary"]["blocks_by_process"]
    assert blocks[0] == 0 and sum(blocks[1:]) == 8, blocks  # 22 scenarios in blocks of 3: all in workers
    # the shipped suite stops one scenario at its own ceiling: exclusion still covers it whole
    assert one["summary"]["excluded_scenarios"] == two["summary"]["excluded_scenarios"] != []
    assert one["scenario_runs"] == two["scenario_runs"]
    judges = [k for k in one if k.endswith(tuple(f"-v{i}" for i in range(1, 10)))]
    assert judges
    for judge in judges:
        assert one[judge] == two[judge], judge
    # the journal: the same tries, each key once, the same cost and usage
    keys = [row[0] for row in two["journal"]]
    assert [k for k, n in Counter(keys).items() if n > 1] == []
    assert sorted(one["journal"]) == sorted(two["journal"])

    # a second run on two workers reuses every settled try: nothing is paid again (a scenario its
    # ceiling stopped may reserve a refused try again: settled costs below their worst case free room)
    track: Track = two["track"]
    stopped = set(two["summary"]["excluded_scenarios"])

    def paid() -> dict[str, float]:
        rows = track.journal.rows(build=BUILD)
        return {r.attempt_key: r.cost_usd or 0.0 for r in rows if r.scenario_id not in stopped}

    before = paid()
    again = materialize_scenario_runs(track, BUILD, "run-w2-again")
    assert again["workers"] == 3 and again["blocks_by_process"][0] == 0
    assert again["reused_from_journal"] >= again["attempts"] - len(stopped) * 5
    assert paid() == before
    assert [r for r in _rows(again["partition_file"]) if r["scenario_id"] not in stopped] == [
        r for r in two["scenario_runs"] if r["scenario_id"] not in stopped
    ]


def test_worker_count_setting() -> None:
    assert EngineSettings(workers=4, min_attempts_per_worker=100).worker_count(1000) == 4
    assert EngineSettings(workers=4, min_attempts_per_worker=100).worker_count(250) == 2
    assert EngineSettings(workers=4, min_attempts_per_worker=100).worker_count(99) == 1
    assert EngineSettings(workers=1).worker_count(10**6) == 1
    with pytest.raises(ValueError):
        EngineSettings(workers=0)


# --- blocks of whole scenarios (capability/_shards.blocks_of) ---------------------------------------


def _scenarios(*repeats: int) -> list[Scenario]:
    return [
        Scenario(
            id=f"s{i:02d}",
            suite="x",
            description="d",
            judge="grader",
            input=[Message(role="user", content="q")],
            repeats=r,
        )
        for i, r in enumerate(repeats)
    ]


def test_blocks_are_whole_scenarios_in_id_order_cut_once_they_reach_the_size() -> None:
    scenarios = _scenarios(4, 2, 3, 2, 5, 2)
    assert blocks_of(list(reversed(scenarios)), 5) == [("s00", "s01"), ("s02", "s03"), ("s04",), ("s05",)]
    assert blocks_of(_scenarios(3, 2, 2), 5) == [("s00", "s01"), ("s02",)]  # exactly 5 attempts: cut there
    assert blocks_of(_scenarios(3, 2, 4, 2), 5) == [
        ("s00", "s01"),
        ("s02", "s03"),
    ]  # counted afresh per block
    assert blocks_of([], 5) == []


def test_blocks_hold_about_block_attempts_attempts_by_default() -> None:
    assert BLOCK_ATTEMPTS == 200
    assert [len(b) for b in blocks_of(_scenarios(*[5] * 40))] == [40]
    assert [len(b) for b in blocks_of(_scenarios(*[5] * 41))] == [40, 1]


# --- the block run itself (capability/_shards.py), with runners that need no track ----------------


class _Echo(Runner[int]):
    """Gives back its block's index as many times as the block has scenarios; fails as told."""

    def __init__(self, setup: WorkerSetup):
        self.failing = setup.run_id  # "raise:N" or "exit:N": what to do at block N

    def run(self, block: Block) -> list[int]:
        how, _, at = self.failing.partition(":")
        if at and block.index == int(at):
            if how == "raise":
                raise ValueError(f"boom at block {block.index}")
            os._exit(3)
        return [block.index] * len(block.scenario_ids)

    def counters(self) -> Counters:
        return Counters()


def _open_echo(setup: WorkerSetup) -> Runner[int]:
    return _Echo(setup)


def _block_run(project: Project, failing: str, lanes: int) -> list[list[int]]:
    setup = WorkerSetup(project, ROOT, "sqlite://", failing, BUILD, None, 0, 2, time.monotonic() + 600)
    blocks = [Block(i, tuple(f"s{i}-{j}" for j in range(1 + i % 3))) for i in range(12)]

    async def local(block: Block) -> list[int]:
        return [block.index] * len(block.scenario_ids)

    run = BlockRun(blocks, local, Counters, workers=1, setup=setup, open_runner=_open_echo, lanes=lanes)
    return list(drive(run.results()))


def test_blocks_come_back_in_order_whoever_ran_them(project: Project) -> None:
    for lanes in (0, 1):
        assert _block_run(project, "", lanes) == [[i] * (1 + i % 3) for i in range(12)]


def test_a_worker_error_fails_the_run_with_its_own_error(project: Project) -> None:
    with pytest.raises(ValueError, match="boom at block 4"):
        _block_run(project, "raise:4", 0)


def test_a_worker_that_dies_fails_the_run_naming_it(project: Project) -> None:
    with pytest.raises(TrackError, match=r"worker process 1 died \(exit code 3\)"):
        _block_run(project, "exit:2", 0)


# --- a worker process's side of the pipe (worker_main), run in this process ---------------------------


def _setup(project: Project, failing: str = "") -> WorkerSetup:
    return WorkerSetup(project, ROOT, "sqlite://", failing, BUILD, None, 0, 2, time.monotonic() + 600)


def _messages(conn: Connection) -> list[Any]:
    out = []
    while conn.poll():
        out.append(conn.recv())
    return out


def test_a_worker_says_ready_runs_each_block_it_is_handed_in_turn_and_stops_at_none(project: Project) -> None:
    ours, theirs = multiprocessing.Pipe()
    for block in (Block(0, ("a", "b")), Block(1, ("c",)), None, Block(2, ("d",))):
        ours.send(block)

    worker_main(theirs, _open_echo, _setup(project))

    assert _messages(ours) == [("ready",), ("done", 0, [0, 0], Counters()), ("done", 1, [1], Counters())]


def test_a_worker_whose_block_fails_reports_the_error_and_runs_nothing_more(project: Project) -> None:
    ours, theirs = multiprocessing.Pipe()
    for block in (Block(0, ("a",)), Block(1, ("b",)), Block(2, ("c",))):
        ours.send(block)

    worker_main(theirs, _open_echo, _setup(project, "raise:1"))

    ready, done, (kind, exc, text) = _messages(ours)
    assert (ready, done) == (("ready",), ("done", 0, [0], Counters()))
    assert kind == "error" and isinstance(exc, ValueError) and str(exc) == "boom at block 1"
    assert text == "ValueError: boom at block 1"


def test_a_worker_that_cannot_open_its_runner_reports_why_and_never_says_ready(project: Project) -> None:
    def cannot_open(setup: WorkerSetup) -> Runner[int]:
        raise RuntimeError(f"no track for {setup.build_id}")

    ours, theirs = multiprocessing.Pipe()
    worker_main(theirs, cannot_open, _setup(project))

    ((kind, exc, text),) = _messages(ours)
    assert (kind, type(exc), text) == ("error", RuntimeError, f"RuntimeError: no track for {BUILD}")


class _Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("cannot travel")
        self.callback = lambda: None  # a lambda does not pickle


def test_an_error_that_does_not_pickle_still_reaches_the_caller_as_its_text(project: Project) -> None:
    def cannot_open(setup: WorkerSetup) -> Runner[int]:
        raise _Unpicklable()

    ours, theirs = multiprocessing.Pipe()
    worker_main(theirs, cannot_open, _setup(project))

    ((kind, exc, text),) = _messages(ours)
    assert (kind, exc) == ("error", None)
    assert text.endswith("_Unpicklable: cannot travel") and "\n" not in text


def test_a_worker_whose_caller_is_gone_returns_quietly(project: Project) -> None:
    ours, theirs = multiprocessing.Pipe()
    ours.close()
    worker_main(theirs, _open_echo, _setup(project))  # its "ready" finds no reader: it returns

    ours, theirs = multiprocessing.Pipe()
    worker = threading.Thread(target=worker_main, args=(theirs, _open_echo, _setup(project)))
    worker.start()
    assert ours.recv() == ("ready",)
    ours.close()  # the caller goes away while the worker waits for a block
    worker.join(60)
    assert not worker.is_alive()


def test_an_errors_text_carries_its_notes(project: Project) -> None:
    def cannot_open(setup: WorkerSetup) -> Runner[int]:
        error = RuntimeError("no track")
        error.add_note("while opening the run's journal")
        raise error

    ours, theirs = multiprocessing.Pipe()
    worker_main(theirs, cannot_open, _setup(project))

    ((_, _, text),) = _messages(ours)
    assert text == "RuntimeError: no track\nwhile opening the run's journal"


class _Reports(Runner[int]):
    """Gives back one figure of its process (`figure`) for each block."""

    def __init__(self, figure: Callable[[], int]):
        self.figure = figure

    def run(self, block: Block) -> list[int]:
        return [self.figure()]

    def counters(self) -> Counters:
        return Counters()


def _open_parent(setup: WorkerSetup) -> Runner[int]:
    return _Reports(os.getppid)


def _open_collector_state(setup: WorkerSetup) -> Runner[int]:
    return _Reports(lambda: int(gc.isenabled()))


def _figure_from_one_worker(project: Project, open_runner: Callable[[WorkerSetup], Runner[int]]) -> int:
    """The figure a one-block run's one worker process (`lanes=0`: none in this process) gives back."""

    async def local(block: Block) -> list[int]:
        raise AssertionError("lanes=0: the calling process runs no block")

    run = BlockRun(
        [Block(0, ("a",))],
        local,
        Counters,
        workers=1,
        setup=_setup(project),
        open_runner=open_runner,
        lanes=0,
    )
    ((figure,),) = list(drive(run.results()))
    return figure


def test_a_worker_collects_what_its_blocks_make(project: Project) -> None:
    """The fork server turns the collector off for its imports; a worker forked from it has it on
    again, or the garbage of a long run's blocks would pile up (what freezing saves: benchmarks/gc_freeze.py)."""
    assert _figure_from_one_worker(project, _open_collector_state) == 1


def test_worker_processes_are_forked_from_a_fork_server_never_from_the_calling_process(
    project: Project,
) -> None:
    assert _figure_from_one_worker(project, _open_parent) != os.getpid()


# --- the calling process of a run with worker processes calls no model --------------------------

_ADD = """
import json, sys
from eval_assets.cli import main
project, home = sys.argv[1:3]
print(json.dumps(main(["--project", project, "--home", home, "build", "add", project + "/bench.yaml"])))
"""

_RUN_AND_REPORT = """
import json, sys
from eval_assets.cli import main
project, home = sys.argv[1:3]
ran = main(["--project", project, "--home", home, "run", "--build", "bench", "--format", "json"])
litellm = sorted(m for m in sys.modules if m == "litellm" or m.startswith("litellm."))
import dagster as dg
with dg.DagsterInstance.from_config(home + "/dagster") as instance:
    event = instance.get_latest_materialization_event(dg.AssetKey("scenario_runs"))
    metadata = {k.split(" · ")[0]: v.value for k, v in event.asset_materialization.metadata.items()}
print(json.dumps({"exit": ran, "blocks_by_process": metadata["blocks_by_process"], "litellm": litellm}))
"""


@pytest.fixture(scope="module")
def run_on_two_workers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`evaltrack build add`, then `evaltrack run` in a fresh interpreter, of a build whose attempts
    run on two worker processes (tests/worker_project.py)."""
    tmp_path = tmp_path_factory.mktemp("two-workers")
    project = tmp_path / "project"
    two_worker_project(project)
    home = str(tmp_path / "home")
    added = fresh_python(_ADD, str(project), home, cwd=tmp_path)
    assert added == 0
    report: dict[str, Any] = fresh_python(_RUN_AND_REPORT, str(project), home, cwd=tmp_path)
    assert report["exit"] == 0, report
    return report


def test_a_run_with_worker_processes_never_imports_litellm_in_the_calling_process(
    run_on_two_workers: dict[str, Any],
) -> None:
    """Every step (subject runs, judge verdicts, ledger, report, suite, decision, board) runs in the
    calling process, and litellm never enters its sys.modules; the workers call the models."""
    assert run_on_two_workers["litellm"] == [], run_on_two_workers["litellm"][:5]
    blocks = run_on_two_workers["blocks_by_process"]
    assert blocks[0] == 0 and len(blocks) == 3 and sum(blocks) == 1, blocks  # the one block: in a worker


def test_import_call_modules_imports_every_module_a_call_imports() -> None:
    """The agent endpoint readies calls with `import_call_modules`; it must cover `CALL_MODULES` (the
    fork server's preload list), or an agent's first call pays for an import inside the event loop."""
    import subprocess
    import sys

    from eval_assets.providers.gateway import CALL_MODULES

    code = (
        "import sys; from eval_assets.providers.gateway import import_call_modules; import_call_modules(); "
        f"print(sorted(m for m in {CALL_MODULES!r} if m not in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stderr
