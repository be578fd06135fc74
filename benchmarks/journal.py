"""Spend journal throughput: reservations and settlements per second under contention.

    .venv/bin/python benchmarks/journal.py [--processes 2] [--callers 64] [--cycles 20] [--prefill 0]

Each of `--processes` OS processes opens the journal and runs `--callers` threads; after a barrier
every caller does `--cycles` × (reserve, settle) with all three ceilings set (so every check runs),
on SQLite (a temp file, WAL, synchronous=FULL) and on PostgreSQL (a throwaway cluster from
tests/pg.py, fsync on). `--prefill` puts that many settled rows on the same day first, to show how
the day sum scales. Prints one line per backend; the journal must stay well above the engine's
attempt rate (`engine_attempt_rate()`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier as ProcessBarrier
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throwaway cluster helper lives beside the contract tests

from pg import PostgresCluster  # noqa: E402

from eval_assets.journal import AttemptKey, Ceilings, Reservation, open_journal  # noqa: E402

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MODEL = "sim/bench"
WORST_USD = 0.01
# High enough never to refuse, low enough that every ceiling query runs.
CEILINGS = Ceilings(scenario_usd=1e6, suite_usd=1e7, day_usd=1e8)


def engine_attempt_rate() -> float | None:
    """HOOK for the engine's figure: attempts per second one engine process sustains on the sim
    provider, to print beside the journal's rate. Returns None until the engine benchmark exists."""
    return None


@dataclass(frozen=True)
class _ProcessResult:
    started: float
    finished: float
    reserve_ms: list[float]
    settle_ms: list[float]
    refused: int


def _run_process(
    url: str,
    process_no: int,
    callers: int,
    cycles: int,
    start: ProcessBarrier,
    results: Queue[_ProcessResult],
) -> None:
    journal = open_journal(url)
    ready = threading.Barrier(callers + 1)
    reserve_ms: list[list[float]] = [[] for _ in range(callers)]
    settle_ms: list[list[float]] = [[] for _ in range(callers)]
    refused = [0] * callers

    def caller(n: int) -> None:
        ready.wait()
        for cycle in range(cycles):
            key = AttemptKey(f"bench-p{process_no}", None, f"caller-{n}", cycle, "subject", 1)
            t0 = time.perf_counter()
            outcome = journal.reserve(
                key, run_id="bench", model=MODEL, worst_case_usd=WORST_USD, ceilings=CEILINGS, now=NOW
            )
            t1 = time.perf_counter()
            reserve_ms[n].append((t1 - t0) * 1000)
            if not isinstance(outcome, Reservation):
                refused[n] += 1
                continue
            journal.settle(
                key,
                status="settled",
                cost_usd=WORST_USD / 2,
                prompt_tokens=100,
                completion_tokens=50,
                payload="x" * 500,
                error=None,
                now=NOW,
            )
            settle_ms[n].append((time.perf_counter() - t1) * 1000)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes on one machine
    ready.wait()
    for thread in threads:
        thread.join()
    finished = time.monotonic()
    journal.close()
    results.put(
        _ProcessResult(
            started,
            finished,
            [m for ms in reserve_ms for m in ms],
            [m for ms in settle_ms for m in ms],
            sum(refused),
        )
    )


def _prefill(url: str, rows: int) -> None:
    with open_journal(url) as journal:
        for n in range(rows):
            key = AttemptKey("prefill", None, "s", n, "subject", 1)
            journal.reserve(
                key, run_id="prefill", model=MODEL, worst_case_usd=WORST_USD, ceilings=Ceilings(), now=NOW
            )
            journal.settle(
                key,
                status="settled",
                cost_usd=WORST_USD,
                prompt_tokens=1,
                completion_tokens=1,
                payload=None,
                error=None,
                now=NOW,
            )


def _percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def measure(url: str, *, processes: int, callers: int, cycles: int, prefill: int) -> str:
    """Run the contention workload on `url`; one formatted result line."""
    _prefill(url, prefill)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(processes)
    results: Queue[_ProcessResult] = spawn.Queue()
    workers = [
        spawn.Process(target=_run_process, args=(url, n, callers, cycles, start, results))
        for n in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"a benchmark process failed (exit {worker.exitcode})")
    wall = max(o.finished for o in outcomes) - min(o.started for o in outcomes)
    reserve_ms = [m for o in outcomes for m in o.reserve_ms]
    settle_ms = [m for o in outcomes for m in o.settle_ms]
    refused = sum(o.refused for o in outcomes)
    return (
        f"{len(reserve_ms):>7} {wall:>7.2f} {len(reserve_ms) / wall:>15.0f} {len(settle_ms) / wall:>14.0f}"
        f" {_percentile(reserve_ms, 50):>8.1f}/{_percentile(reserve_ms, 99):<7.1f}"
        f" {_percentile(settle_ms, 50):>8.1f}/{_percentile(settle_ms, 99):<7.1f} {refused:>7}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers (threads) per process")
    parser.add_argument("--cycles", type=int, default=20, help="reserve+settle cycles per caller")
    parser.add_argument("--prefill", type=int, default=0, help="settled rows on the same day beforehand")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--pg-fsync", choices=["on", "off"], default="on", help="off: take the disk's flush latency out"
    )
    args = parser.parse_args(argv)
    shape = dict(processes=args.processes, callers=args.callers, cycles=args.cycles, prefill=args.prefill)

    print(
        f"spend journal: {args.processes} processes x {args.callers} callers x {args.cycles} cycles "
        f"(reserve + settle, 3 ceilings checked), {args.prefill} rows prefilled on the day"
    )
    print(
        f"{'backend':<11}{'cycles':>7} {'wall s':>7} {'reservations/s':>15} {'settlements/s':>14}"
        f" {'reserve p50/p99 ms':>17} {'settle p50/p99 ms':>17} {'refused':>7}"
    )
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="evaltrack-bench-") as tmp:
            print(f"{'sqlite':<11}{measure(f'sqlite:///{tmp}/journal.sqlite', **shape)}", flush=True)
    if args.backend in ("postgresql", "both"):
        with PostgresCluster(fsync=args.pg_fsync == "on") as cluster:
            print(f"{'postgresql':<11}{measure(cluster.create_database(), **shape)}", flush=True)
    print(
        "closed loop: each caller reserves again as soon as it has settled, so latencies include the wait"
        " behind the journal's single reservation lock (SQLite: its write lock)"
    )
    rate = engine_attempt_rate()
    print(
        "engine attempt rate: not measured yet (engine_attempt_rate() returns None)"
        if rate is None
        else f"engine attempt rate: {rate:.0f} attempts/s"
    )


if __name__ == "__main__":
    main()
