"""Spend journal throughput against the engine's attempt rate, measured side by side in one run.

    .venv/bin/python benchmarks/journal.py [--processes 2] [--callers 64] [--cycles 20]
                                           [--prefill 0,10000] [--backend both] [--engine-scenarios 200]

1. The engine: `run_engine` from benchmarks/throughput.py (zero-latency sim provider, `--engine-scenarios`
   scenarios x 5 repeats, subject + judge, journaled on SQLite): model calls per second, the best of
   `--engine-runs` runs after a warm-up (the best, so the ratio below is the conservative one).
2. The journal: each of `--processes` OS processes opens the journal and runs `--callers` threads;
   after a barrier every caller does `--cycles` x (reserve, settle) with all three ceilings set (so
   every check runs), on SQLite (a temp file, WAL, synchronous=NORMAL) and on PostgreSQL (a
   throwaway cluster from tests/pg.py, fsync on), once per `--prefill` figure: that many settled rows
   on the same day beforehand, to show that the cost of a reservation does not grow as a day fills.

Every model call costs the journal one reservation and one settlement, so the journal's capacity in
calls per second is its rate of (reserve, settle) cycles; the goal is cycles/s >= 5 x the engine's
calls/s, on an empty and on a full day.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
# High enough never to refuse; all three set, so every ceiling is checked.
CEILINGS = Ceilings(scenario_usd=1e6, suite_usd=1e7, day_usd=1e8)
GOAL_RATIO = 5.0


def engine_attempt_rate(scenarios: int = 200, runs: int = 2) -> float:
    """Model calls (attempts: every try of a subject or judge call) per second one engine process
    sustains on the zero-latency sim provider: benchmarks/throughput.py's engine case, subject + judge,
    `scenarios` x 5 repeats; the best of `runs` runs after a 20-scenario warm-up."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import throughput  # noqa: PLC0415 - heavy (litellm, the project); only the parent process needs it

    rates = []
    with tempfile.TemporaryDirectory(prefix="evaltrack-bench-engine-") as tmp:
        throughput.run_engine(20, Path(tmp))  # warm litellm's lazy imports and caches
        for _ in range(runs):
            result = throughput.run_engine(scenarios, Path(tmp))
            rates.append(result["calls"] / result["wall_s"])
    return max(rates)


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
    """`rows` settled attempts on the benchmark's day, written through the journal (so its totals
    count them too), from 32 threads so group commit packs them into few transactions."""
    if rows <= 0:
        return
    with open_journal(url) as journal:

        def one(n: int) -> None:
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

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(one, range(rows)))
        assert len(journal.rows(build="prefill")) == rows


def _percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass(frozen=True)
class Measurement:
    cycles: int
    wall_s: float
    reservations_per_s: float
    settlements_per_s: float
    reserve_ms: tuple[float, float]  # p50, p99
    settle_ms: tuple[float, float]
    refused: int

    @property
    def cycles_per_s(self) -> float:
        """Model calls per second the journal can carry: one reservation + one settlement each."""
        return min(self.reservations_per_s, self.settlements_per_s)


def measure(url: str, *, processes: int, callers: int, cycles: int, prefill: int) -> Measurement:
    """Run the contention workload on `url` (after `prefill` settled rows on the same day)."""
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
    return Measurement(
        cycles=len(reserve_ms),
        wall_s=wall,
        reservations_per_s=len(reserve_ms) / wall,
        settlements_per_s=len(settle_ms) / wall,
        reserve_ms=(_percentile(reserve_ms, 50), _percentile(reserve_ms, 99)),
        settle_ms=(_percentile(settle_ms, 50), _percentile(settle_ms, 99)),
        refused=sum(o.refused for o in outcomes),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers (threads) per process")
    parser.add_argument("--cycles", type=int, default=20, help="reserve+settle cycles per caller")
    parser.add_argument(
        "--prefill", default="0,10000", help="comma-separated: settled rows on the same day beforehand"
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--pg-fsync", choices=["on", "off"], default="on", help="off: take the disk's flush latency out"
    )
    parser.add_argument("--engine-scenarios", type=int, default=200, help="0: skip the engine run")
    parser.add_argument("--engine-runs", type=int, default=2)
    args = parser.parse_args(argv)
    prefills = [int(n) for n in args.prefill.split(",")]
    shape = dict(processes=args.processes, callers=args.callers, cycles=args.cycles)

    engine_rate = None
    if args.engine_scenarios > 0:
        engine_rate = engine_attempt_rate(args.engine_scenarios, args.engine_runs)
        print(
            f"engine: {engine_rate:.0f} calls/s (benchmarks/throughput.py run_engine, "
            f"{args.engine_scenarios} scenarios x 5 repeats, subject + judge, zero-latency sim, "
            f"best of {args.engine_runs})"
        )
    print(
        f"spend journal: {args.processes} processes x {args.callers} callers x {args.cycles} cycles "
        "(reserve + settle, 3 ceilings checked)"
    )
    print(
        f"{'backend':<11}{'prefill':>8}{'cycles':>7}{'wall s':>7}{'reserv./s':>10}{'settl./s':>9}"
        f"{'reserve p50/p99 ms':>19}{'settle p50/p99 ms':>18}{'refused':>8}{'journal/engine':>15}"
    )
    backends: list[str] = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    ratios: list[float] = []
    for backend in backends:
        for prefill in prefills:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory(prefix="evaltrack-bench-") as tmp:
                    result = measure(f"sqlite:///{tmp}/journal.sqlite", prefill=prefill, **shape)
            else:
                with PostgresCluster(fsync=args.pg_fsync == "on") as cluster:
                    result = measure(cluster.create_database(), prefill=prefill, **shape)
            ratio = "" if engine_rate is None else f"{result.cycles_per_s / engine_rate:.1f}"
            if engine_rate is not None:
                ratios.append(result.cycles_per_s / engine_rate)
            print(
                f"{backend:<11}{prefill:>8}{result.cycles:>7}{result.wall_s:>7.2f}"
                f"{result.reservations_per_s:>10.0f}{result.settlements_per_s:>9.0f}"
                f"{result.reserve_ms[0]:>11.1f}/{result.reserve_ms[1]:<7.1f}"
                f"{result.settle_ms[0]:>10.1f}/{result.settle_ms[1]:<7.1f}"
                f"{result.refused:>8}{ratio:>15}",
                flush=True,
            )
    print(
        "closed loop: each caller reserves again as soon as it has settled, so latencies include the wait"
        " behind the journal's write lock; journal/engine = (reserve, settle) cycles/s / engine calls/s"
    )
    if ratios:
        verdict = "met" if min(ratios) >= GOAL_RATIO else "NOT met"
        print(f"goal journal/engine >= {GOAL_RATIO:g} on every line: {verdict} (lowest {min(ratios):.1f})")


if __name__ == "__main__":
    main()
