"""Spend journal throughput against the engine's call rate, in alternating runs of one process tree.

    .venv/bin/python benchmarks/journal.py [--processes 2] [--callers 64] [--cycles 20] [--runs 3]
                                           [--prefill 0,10000] [--backend both] [--engine-scenarios 200]

The two rates are measured in SEPARATE PHASES that alternate (E J E J E J, `--runs` rounds, after one
warm-up of each that is not counted): the engine's rate is its capacity with its own journal, the
journal's rate is its capacity under contention alone; they are never run at the same time (running
them together would measure how they share two cores, not what each can carry).

E. The engine: `run_engine` from benchmarks/throughput.py (zero-latency sim provider,
   `--engine-scenarios` scenarios x 5 repeats, subject + judge, journaled on SQLite): model calls per
   second, wall and CPU of this process.
J. The journal: each of `--processes` OS processes opens the journal and runs `--callers` threads;
   after a barrier every caller does `--cycles` x (reserve, settle) with all three ceilings set (so
   every check runs), on SQLite (a temp file, WAL, synchronous=NORMAL) and on PostgreSQL (one
   throwaway cluster from tests/pg.py for the whole benchmark, fsync on, a fresh database per run),
   once per `--prefill` figure: that many settled rows on the same day beforehand, to show that the
   cost of a reservation does not grow as a day fills. CPU is the client processes' (PostgreSQL's
   server processes are not counted).

Every model call costs the journal one reservation and one settlement, so the journal's capacity in
calls per second is its rate of (reserve, settle) cycles; the goal is cycles/s >= 5 x the engine's
calls/s, on an empty and on a full day, compared as medians of the alternating runs.
"""

from __future__ import annotations

import argparse
import contextlib
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

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throwaway cluster helper lives beside the contract tests

from pg import PostgresCluster  # noqa: E402

from eval_assets.spend import AttemptKey, Ceilings, Reservation, open_journal  # noqa: E402

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MODEL = "sim/bench"
WORST_USD = 0.01
# High enough never to refuse; all three set, so every ceiling is checked.
CEILINGS = Ceilings(scenario_usd=1e6, suite_usd=1e7, day_usd=1e8)
GOAL_RATIO = 5.0


@dataclass(frozen=True)
class EngineRun:
    calls: int
    wall_s: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.calls / self.wall_s


def engine_run(scenarios: int) -> EngineRun:
    """One run of benchmarks/throughput.py's engine case (subject + judge, `scenarios` x 5 repeats, a
    fresh SQLite journal): model calls (every try of a subject or judge call), wall and CPU."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import throughput  # noqa: PLC0415 - heavy (litellm, the project); only the parent process needs it

    with tempfile.TemporaryDirectory(prefix="evaltrack-bench-engine-") as tmp:
        result = throughput.run_engine(scenarios, Path(tmp))
    return EngineRun(result["calls"], result["wall_s"], result["cpu_s"])


@dataclass(frozen=True)
class _ProcessResult:
    started: float
    finished: float
    reserve_ms: list[float]
    settle_ms: list[float]
    refused: int
    cpu_s: float


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
    cpu = time.process_time()  # this process's threads, all of them
    started = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes on one machine
    ready.wait()
    for thread in threads:
        thread.join()
    finished = time.monotonic()
    cpu = time.process_time() - cpu
    journal.close()
    results.put(
        _ProcessResult(
            started,
            finished,
            [m for ms in reserve_ms for m in ms],
            [m for ms in settle_ms for m in ms],
            sum(refused),
            cpu,
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
    cpu_s: float  # the client processes' CPU during the timed part

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
        cpu_s=sum(o.cpu_s for o in outcomes),
    )


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


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
    parser.add_argument("--engine-scenarios", type=int, default=200, help="0: skip the engine runs")
    parser.add_argument("--runs", type=int, default=3, help="alternating rounds (>= 3), after one warm-up")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be at least 3 (medians of >= 3 alternating runs)")
    prefills = [int(n) for n in args.prefill.split(",")]
    shape = dict(processes=args.processes, callers=args.callers, cycles=args.cycles)
    backends: list[str] = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    wall, cpu = time.perf_counter(), time.process_time()
    recording = Recording("journal", argv=None if argv is None else [sys.argv[0], *argv])

    with contextlib.ExitStack() as stack:
        cluster = None
        if "postgresql" in backends:
            cluster = stack.enter_context(PostgresCluster(fsync=args.pg_fsync == "on"))

        def journal_run(backend: str, prefill: int) -> Measurement:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory(prefix="evaltrack-bench-") as tmp:
                    return measure(f"sqlite:///{tmp}/journal.sqlite", prefill=prefill, **shape)
            assert cluster is not None
            return measure(cluster.create_database(), prefill=prefill, **shape)

        # warm-up, not counted: litellm's lazy imports and caches; each backend's first connections
        if args.engine_scenarios > 0:
            engine_run(args.engine_scenarios)
        for backend in backends:
            journal_run(backend, 0)
        engines: list[EngineRun] = []
        journals: dict[tuple[str, int], list[Measurement]] = {(b, p): [] for b in backends for p in prefills}
        for _ in range(args.runs):  # E J E J ...: the phases alternate, never overlap
            if args.engine_scenarios > 0:
                engines.append(engine_run(args.engine_scenarios))
            for backend in backends:
                for prefill in prefills:
                    journals[(backend, prefill)].append(journal_run(backend, prefill))

    engine_rate = statistics.median(e.rate for e in engines) if engines else None
    print(f"{args.runs} alternating rounds (engine phase, then journal phases) after one warm-up of each; "
          "median (min-max)")
    if engines:
        print(
            f"engine: {_median([e.rate for e in engines])} calls/s, wall "
            f"{statistics.median(e.wall_s for e in engines):.2f} s, CPU "
            f"{statistics.median(1000 * e.cpu_s / e.calls for e in engines):.2f} ms per call "
            f"(benchmarks/throughput.py run_engine, {args.engine_scenarios} scenarios x 5 repeats, subject + judge, "
            "zero-latency sim, SQLite journal)"
        )
    print(
        f"spend journal: {args.processes} processes x {args.callers} callers x {args.cycles} cycles "
        "(reserve + settle, 3 ceilings checked)"
    )
    print(
        f"{'backend':<11}{'prefill':>8}{'cycles':>7}{'wall s':>7}{'cycles/s':>17}{'CPU ms/cycle':>13}"
        f"{'reserve p50/p99 ms':>19}{'settle p50/p99 ms':>18}{'refused':>8}{'journal/engine':>15}"
    )
    ratios: list[float] = []
    table = []
    for (backend, prefill), runs in journals.items():
        mid = sorted(runs, key=lambda m: m.cycles_per_s)[len(runs) // 2]  # the median run's latencies
        rate = statistics.median(m.cycles_per_s for m in runs)
        ratio = ""
        if engine_rate is not None:
            ratios.append(rate / engine_rate)
            ratio = f"{rate / engine_rate:.1f}"
        print(
            f"{backend:<11}{prefill:>8}{mid.cycles:>7}{statistics.median(m.wall_s for m in runs):>7.2f}"
            f"{_median([m.cycles_per_s for m in runs]):>17}"
            f"{statistics.median(1000 * m.cpu_s / m.cycles for m in runs):>13.2f}"
            f"{mid.reserve_ms[0]:>11.1f}/{mid.reserve_ms[1]:<7.1f}"
            f"{mid.settle_ms[0]:>10.1f}/{mid.settle_ms[1]:<7.1f}"
            f"{sum(m.refused for m in runs):>8}{ratio:>15}",
            flush=True,
        )
        table.append(
            {"backend": backend, "prefill": prefill, "cycles": mid.cycles,
             "wall_s": round(statistics.median(m.wall_s for m in runs), 2), "cycles_per_s": round(rate, 1),
             "cpu_ms_per_cycle": round(statistics.median(1000 * m.cpu_s / m.cycles for m in runs), 2),
             "reserve_p50_p99_ms": [round(x, 1) for x in mid.reserve_ms[:2]],
             "settle_p50_p99_ms": [round(x, 1) for x in mid.settle_ms[:2]],
             "refused": sum(m.refused for m in runs), "journal_over_engine": ratio or None}
        )
    print(
        "closed loop: each caller reserves again as soon as it has settled, so latencies include the wait"
        " behind the journal's write lock; journal/engine = median (reserve, settle) cycles/s / median engine"
        " calls/s, from separate, alternating phases"
    )
    if ratios:
        verdict = "met" if min(ratios) >= GOAL_RATIO else "NOT met"
        print(f"goal journal/engine >= {GOAL_RATIO:g} on every line: {verdict} (lowest {min(ratios):.1f})")
    print(f"total: wall {time.perf_counter() - wall:.0f} s, CPU {time.process_time() - cpu:.0f} s (this process)")
    recording.figure("engine_calls_per_s", engine_rate)
    recording.figure("goal_journal_over_engine", GOAL_RATIO)
    recording.figure("shape", shape)
    recording.table("journal", table)
    recording.write()


if __name__ == "__main__":
    main()
