"""Every core: a build's attempts sharded by scenario over worker processes.

A shard is every `shards`-th scenario of the build's scenarios in id order (round robin), so all the
repeats of a scenario run in one process and the whole-scenario exclusion of a stopped scenario
still sees them together. Each worker is forked from a fork server (a clean process that imported the
track once; Dagster's threads and a running event loop do not survive a fork of the caller) that rebuilds the track from the `ShardJob` (the project as loaded, the home, the
journal URL, the run id, the build, the judge version or None) and runs the SAME engine call the
calling process makes when it runs alone, against the same spend journal (its reservations are
atomic across processes, so the ceilings hold). It returns plain results; the caller merges them in
(scenario id, repeat) order, so the rows are the same whatever the worker count.

The run's deadline is handed over as an absolute point on the host's monotonic clock (shared by the
processes of one host), so a worker that took a while to start does not get longer.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from eval_assets.capability.errors import TrackError
from eval_assets.config import Project, Scenario
from eval_assets.engine import StoredAttempt

T = TypeVar("T")


@dataclass(frozen=True)
class ShardJob:
    """What one worker process needs to run its shard; plain, picklable values only."""

    project: Project
    home: Path
    journal_url: str
    run_id: str
    build_id: str
    judge_version: str | None  # None: the subject attempts (scenario_runs)
    generation: int
    shard: int
    shards: int
    deadline_at: float  # the run's deadline on time.monotonic() (one clock per host)
    attempts: tuple[StoredAttempt, ...] = ()  # judge shards: the stored attempts of the shard's scenarios
    judge_ahead: tuple[str, ...] = ()  # subject shards: the judge versions that judge ahead (engine.judge_ahead)


@dataclass(frozen=True)
class ShardOutcome:
    """A shard's results (already in (scenario id, repeat) order) and its engine's counters."""

    shard: int
    results: list[Any]
    reused: int
    deadline_passed: bool
    judged_ahead: int = 0  # judge calls made ahead in this shard


def shard_of(scenarios: Sequence[Scenario], shard: int, shards: int) -> list[Scenario]:
    """The scenarios of shard `shard` of `shards`: round robin over the scenarios in id order."""
    ordered = sorted(scenarios, key=lambda s: s.id)
    return [s for i, s in enumerate(ordered) if i % shards == shard]


def run_shards(
    work: Callable[[ShardJob], ShardOutcome],
    jobs: Sequence[ShardJob],
    log: Callable[[str], None] | None = None,
) -> list[ShardOutcome]:
    """Run each job in its own spawned worker process; their outcomes in shard order.

    `work` must be a module-level function (it is pickled by reference). A worker that raises fails
    the whole run with its error (the others are cancelled or left to finish their current calls; what
    they settled stays in the journal and the next run reuses it); a worker that dies is a TrackError.
    """
    context = multiprocessing.get_context("forkserver")
    # the fork server imports the track (litellm, the engine) once; each worker is forked from it, a
    # clean single-threaded process, never from the caller (Dagster's threads, a running event loop)
    context.set_forkserver_preload([work.__module__])
    outcomes: dict[int, ShardOutcome] = {}
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=context) as pool:
        futures: dict[Future[ShardOutcome], ShardJob] = {pool.submit(work, job): job for job in jobs}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                job = futures[future]
                try:
                    outcome = future.result()
                except BrokenProcessPool as exc:
                    for other in pending:
                        other.cancel()
                    raise TrackError(
                        f"worker process of shard {job.shard + 1}/{job.shards} died ({exc}); what it "
                        "settled stays in the journal and the next run reuses it"
                    ) from exc
                except BaseException:
                    for other in pending:
                        other.cancel()
                    raise
                outcomes[job.shard] = outcome
                if log is not None:
                    log(
                        f"shard {job.shard + 1}/{job.shards} done: {len(outcome.results)} results, "
                        f"{outcome.reused} reused"
                    )
    return [outcomes[i] for i in sorted(outcomes)]
