"""Throughput and scale-out of the capability track: the goals of the throughput issue, side by side in one run.

One function per case (`CASES`); `--only a,b` runs some, `--quick` uses smoke sizes. The goals table
is printed at the end with every figure measured in this run.

- `zero`: zero latency, N scenarios x 5, subject + judge through the track (`Track.run_scenario_runs`
  then `Track.run_judge_verdicts`, journal, partition writer), once with `engine.workers: 1` (in
  process) and once with N workers (default: the cores), in the same run. Scored attempts/s = judge
  verdicts with status scored / wall of both materializations; CPU per attempt from the 1-worker run
  (this process's CPU; the workers' CPU is not this process's).
- `latency`: 200 ms and 50 ms simulated latency, 64 in flight per model, subject calls only, the engine
  in process beside a bare `litellm.acompletion` loop on the same calls. Bound = calls x latency / 64.
  Each side is warmed up first in the same process (the first litellm call of a process imports
  provider modules and builds clients: a one-off cost of the order of a second, which a short timed run
  would otherwise divide into its per-call figures), then timed over >= 3 alternating runs; medians.
- `overhead`: the engine's CPU per model call over a bare `litellm.acompletion` on the same calls
  (`--overhead-scenarios` x 5, subject + judge, zero latency, SQLite journal, no tracer provider), in
  one process, `--overhead-runs` alternating pairs, the median of the per-pair difference; then one
  run per side under cProfile (each thread's CPU clock, every thread) split by component (journal,
  spend path, limiter, spans, redaction, prompt rendering, verdict parsing, policy checks, call
  building, gateway, engine flow) and the engine's top hot spots. `--before DIR`: the same, in a
  child process per tree, alternating DIR (a clean clone of main with its own setup) and this tree.
  Goal: <= 0.8 ms. Every side waits for litellm's logging of its own calls inside its timing
  (`drained`).
- `rss`: peak RSS (ru_maxrss) of the `zero` 1-worker path at 1000 and 5000 scenarios, each in a
  fresh process.
- `dagster`: a 10,000 x 5 build through `evaltrack run` (Dagster path, zero latency, default workers)
  on a generated project; wall, and the peak RSS of the largest process (ru_maxrss of the waited-for
  children: the CLI and the Dagster run; worker processes are reported by the forkserver, see below).

- `ahead`: judge ahead vs after, through Dagster: `scenario_runs` then `judge_verdicts` materialized as
  `evaltrack run` does (two runs on a temporary instance), 200 ms latency on subject and judge, 64 in
  flight per model, N scenarios x 5, one judge version; wall of both runs with `engine.judge_ahead` on
  and off (alternating, medians). Goal: ahead <= 0.6 x after.

Wall time includes waiting for a CPU: on a shared machine, read the CPU figures and the load average
printed beside them.

Run: .venv/bin/python benchmarks/throughput.py [--quick] [--only zero,latency,overhead,rss,dagster,ahead,rate]

- `rate`: adaptive concurrency against a local server limited to R requests/s (`--rate-limit R`,
  default 10): sustained ok/s and the 429 share after the first 10 s; goal >= 0.9 R and < 5%.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from _results import Recording

ROOT = Path(os.environ.get("EVAL_BENCH_ROOT") or Path(__file__).resolve().parents[1])
"""The tree measured: this checkout, or another's (`overhead --before DIR` runs a child with it)."""
sys.path.insert(0, str(ROOT))

from litellm_floor import bare_completion  # noqa: E402  (benchmarks/, this script's folder)

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs  # noqa: E402
from eval_assets.capability.track import Track  # noqa: E402
from eval_assets.config import (  # noqa: E402
    BuildManifest,
    EngineSettings,
    Project,
    Scenario,
    Spend,
    load_project,
)
from eval_assets.engine import Engine, Limiters, SubjectResult, judge_spec, subject_spec  # noqa: E402
from eval_assets.fence import fence_nonce  # noqa: E402
from eval_assets.home import EvalHome  # noqa: E402
from eval_assets.providers.gateway import CallSpec, ModelGateway  # noqa: E402
from eval_assets.spend import AttemptRef, SpendPath, open_journal  # noqa: E402

PROJECT = load_project(ROOT)
FENCE = b"throughput benchmark: fence secret"
JUDGE = PROJECT.judges["helpfulness-v1"]
RUBRIC = PROJECT.rubric_for(JUDGE)
PRICES = PROJECT.settings.price_table()
TIMEOUT_S = 30
T = TypeVar("T")


def scenarios(n: int) -> list[Scenario]:
    template = PROJECT.scenarios_judged_by(JUDGE)[0]
    return [template.model_copy(update={"id": f"bench.s{i:05d}", "repeats": 5}) for i in range(n)]


def build(latency_ms: int = 0) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "bench",
            "milestone": 1,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": 0.7, "seed": 1, "latency_ms": latency_ms},
            },
        }
    )


def engine(tmp: Path, concurrency: int) -> Engine:
    journal = open_journal(f"sqlite:///{tmp / f'journal-{time.time_ns()}.sqlite'}")
    settings = EngineSettings(concurrency_per_model=concurrency, timeout_s=TIMEOUT_S, max_tries=3)
    spend = SpendPath(journal, ModelGateway(PRICES), run_id="bench")
    return Engine(spend=spend, settings=settings, jitter=random.Random(0), fence_secret=FENCE)


async def drained(work: Awaitable[T]) -> T:
    """`work`, then litellm's own logging of its calls: litellm queues a success handler per call
    (its `LoggingWorker`, on this event loop, about 0.5 ms of CPU per call even with no callback) and
    carries what is still queued when a loop ends over to the next loop. Without this a side that
    finishes fast leaves its logging to be paid (and timed) by whatever runs next: in alternating runs,
    the other side."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    value = await work
    await GLOBAL_LOGGING_WORKER.flush()
    return value


def run_engine(
    n: int, tmp: Path, concurrency: int = 256, latency_ms: int = 0, judge: bool = True
) -> dict[str, Any]:
    """One engine run (fresh journal). `calls` counts model calls (subject + judge, tries included)."""
    eng = engine(tmp, concurrency)
    scen = scenarios(n)
    wall, cpu = time.perf_counter(), time.process_time()
    if judge:
        subjects, verdicts = asyncio.run(
            drained(eng.run_and_judge(build(latency_ms), scen, [(JUDGE, RUBRIC)]))
        )
        scored = sum(v.status == "scored" for v in verdicts[JUDGE.version_id])
        calls = sum(s.call.tries for s in subjects) + sum(v.tries for v in verdicts[JUDGE.version_id])
    else:
        subjects = asyncio.run(drained(eng.run_subjects(build(latency_ms), scen)))
        scored, calls = 0, sum(s.call.tries for s in subjects)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    eng.spend.journal.close()  # and its drain thread
    return {
        "attempts": len(subjects),
        "scored": scored,
        "calls": calls,
        "wall_s": wall,
        "cpu_s": cpu,
        "subjects": subjects,
    }


def raw_workload(n: int, subjects: list[SubjectResult], latency_ms: int, judge: bool) -> list[list[CallSpec]]:
    """The engine's own calls, per attempt in order: the subject spec, then (if any) the judge spec
    for that attempt's output, built with the engine's spec builder and the one prompt renderer."""
    b = build(latency_ms)
    by_key = {(s.scenario.id, s.repeat): s for s in subjects}
    work = []
    for scenario in scenarios(n):
        for repeat in range(1, scenario.repeats + 1):
            calls = [subject_spec(b.subject, scenario, build=b.id, repeat=repeat, timeout_s=TIMEOUT_S)]
            done = by_key[(scenario.id, repeat)]
            if judge and done.call.status == "ok" and done.call.text is not None:
                ref = AttemptRef(b.id, scenario.id, repeat, "judge", JUDGE.version_id)
                nonce = fence_nonce(FENCE, ref.fence_id)  # the engine's nonce for this attempt
                calls.append(
                    judge_spec(
                        JUDGE,
                        RUBRIC,
                        scenario,
                        done.call.text,
                        nonce=nonce,
                        build=b.id,
                        repeat=repeat,
                        timeout_s=TIMEOUT_S,
                    )
                )
            work.append(calls)
    return work


def run_raw(work: list[list[CallSpec]], concurrency: int = 256) -> dict[str, Any]:
    """Bare litellm.acompletion calls (the gateway's request, `litellm_floor.bare_completion`), a
    semaphore per model like the engine's."""
    ModelGateway(PRICES).ready()  # registers the sim providers and the prices, as the engine's gateway does

    async def main() -> None:
        limits: dict[str, asyncio.Semaphore] = {}

        async def attempt(calls: list[CallSpec]) -> None:
            for spec in calls:
                await bare_completion(spec, limits, concurrency)  # the gateway's request

        await asyncio.gather(*(attempt(calls) for calls in work))

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(drained(main()))
    return {
        "calls": sum(len(c) for c in work),
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


@dataclass
class Series:
    """Repeated measurements of one side; medians printed with the range."""

    runs: list[dict[str, Any]]

    def med(self, key: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(key(r) for r in self.runs)

    def show(self, key: Callable[[dict[str, Any]], float], fmt: str) -> str:
        values = [key(r) for r in self.runs]
        return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def alternate(
    runs: int, engine_run: Callable[[], dict[str, Any]], raw_run: Callable[[], dict[str, Any]]
) -> tuple[Series, Series]:
    eng, raw = [], []
    for _ in range(runs):
        eng.append(engine_run())
        raw.append(raw_run())
    return Series(eng), Series(raw)


def rate(r: dict[str, Any]) -> float:
    return float(r["calls"] / r["wall_s"])


def cpu_ms_per_call(r: dict[str, Any]) -> float:
    return float(1000 * r["cpu_s"] / r["calls"])


def cpu_share(r: dict[str, Any]) -> float:
    """CPU seconds per wall second: near 1 when CPU-bound on an idle core; far below 1 when the run
    waited (for latency, or for a CPU other processes held)."""
    return float(r["cpu_s"] / r["wall_s"])


# --- case zero: the track, 1 worker and N workers ----------------------------------------------


def bench_project(n: int, workers: int) -> Project:
    """The shipped project with `n` generated scenarios (helpfulness judge, 5 repeats, no ceilings)."""
    template = PROJECT.scenarios["support.password-reset"]
    scen = {
        f"bench.s{i:05d}": template.model_copy(
            update={"id": f"bench.s{i:05d}", "suite": "bench", "repeats": 5, "ceiling_usd": None}
        )
        for i in range(n)
    }
    s = PROJECT.settings
    settings = s.model_copy(
        update={
            "engine": s.engine.model_copy(update={"workers": workers, "concurrency_per_model": 256}),
            "spend": Spend(),
            "bounds": s.bounds.model_copy(update={"max_attempts_per_run": 10_000_000}),
        }
    )
    return dataclasses.replace(PROJECT, scenarios=scen, settings=settings)


BUILD_YAML = """id: bench
milestone: 1
subject:
  model: sim/agent
  family: sim
  params: {skill: 0.75, noise: 0.12, seed: 7, error_rate: 0.0}
judges: [helpfulness-v1]
"""


def run_track(n: int, workers: int, tmp: Path) -> dict[str, Any]:
    """scenario_runs + judge_verdicts [helpfulness-v1] of an n x 5 build on a fresh home."""
    home = Path(tempfile.mkdtemp(dir=tmp))
    track = Track(bench_project(n, workers), EvalHome(home))
    (home / "bench.yaml").write_text(BUILD_YAML)
    track.register_build(home / "bench.yaml")
    wall, cpu = time.perf_counter(), time.process_time()
    subjects = materialize_scenario_runs(track, "bench", "bench-run")
    verdicts = materialize_judge_verdicts(track, "bench", JUDGE.version_id, "bench-run-judge")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "attempts": subjects["attempts"],
        "scored": verdicts["scored"],
        "workers": subjects["workers"],
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def case_zero(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    n = 100 if args.quick else args.scenarios
    workers = args.workers or (os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as d:
        run_track(min(n, 50), 1, Path(d))  # warm-up (not counted): imports, first litellm calls
        one = run_track(n, 1, Path(d))
        many = run_track(n, workers, Path(d))
    r1, rn = one["scored"] / one["wall_s"], many["scored"] / many["wall_s"]
    cpu_ms = 1000 * one["cpu_s"] / one["attempts"]
    print(f"zero latency, {n} x 5, subject + judge through the track (load {os.getloadavg()[0]:.1f}):")
    for name, r, rate in (("1 worker", one, r1), (f"{many['workers']} workers", many, rn)):
        print(
            f"   {name}: {r['scored']} scored of {r['attempts']} attempts in {r['wall_s']:.1f} s = "
            f"{rate:.0f} scored attempts/s"
        )
    print(f"   1 worker: CPU {one['cpu_s']:.1f} s = {cpu_ms:.2f} ms CPU per attempt (subject + judge)")
    goals.append(
        (
            f"zero latency {n}x5, subject+judge",
            ">= 350 scored/s, >= 1.8x one worker",
            f"{r1:.0f}/s (1 worker, {cpu_ms:.2f} ms CPU per attempt), {rn:.0f}/s ({many['workers']} "
            f"workers), ratio {rn / r1:.2f}",
            rn >= 350 and rn / r1 >= 1.8,
        )
    )


# --- case latency: the engine and bare litellm at 200 ms and 50 ms ------------------------------


def latency_case(n: int, runs: int, tmp: Path, latency: int, conc: int) -> tuple[float, float, float]:
    """(engine wall / bound, raw wall / bound, engine CPU ms per call), medians."""

    def engine_run() -> dict[str, Any]:
        return run_engine(n, tmp, concurrency=conc, latency_ms=latency, judge=False)

    warm = engine_run()  # warms the latency path (not counted)
    work = raw_workload(n, warm["subjects"], latency, judge=False)
    run_raw(work, concurrency=conc)  # warm-up (not counted)
    eng, raw = alternate(runs, engine_run, lambda: run_raw(work, concurrency=conc))
    bound = len(work) * latency / 1000 / conc
    print(
        f"{latency} ms latency, {conc} in flight, {len(work)} subject calls; bound calls x latency / "
        f"in flight = {bound:.2f} s; {runs} alternating runs after a warm-up per side; median (min-max)"
    )
    for name, side in (("engine", eng), ("raw litellm", raw)):
        print(
            f"   {name}: wall {side.show(lambda r: r['wall_s'], '.2f')} s = "
            f"{side.med(lambda r: r['wall_s']) / bound:.2f}x the bound; CPU {side.show(cpu_ms_per_call, '.2f')} "
            f"ms per call, CPU/wall {side.show(cpu_share, '.2f')}"
        )
    return (
        eng.med(lambda r: r["wall_s"]) / bound,
        raw.med(lambda r: r["wall_s"]) / bound,
        eng.med(cpu_ms_per_call),
    )


def case_rate_limited(
    rate: float,
    seconds: float,
    latency_s: float = 1.0,
    conc: int = 64,
    form: str = "seconds+ms",
    warmup_s: float = 10.0,
    decrease: float | None = None,
) -> dict[str, float]:
    """Adaptive concurrency against a server limited to `rate` requests/s (tests/openai_stub.py on
    127.0.0.1: a token bucket of one second's worth, 429 + Retry-After beyond it, `latency_s` per
    answer). 2 x `conc` workers keep calling through the engine (spend path, SQLite journal,
    `openai/local-test` through litellm's OpenAI path) for `seconds`; the engine starts at `conc` in
    flight. Measured from the server's answer log after the first `warmup_s`: answered 200s per
    second (sustained throughput) and the share of answers that were 429. Goal: >= 0.9 R, < 5%.
    """
    import os

    sys.path.insert(0, str(ROOT / "tests"))
    from openai_stub import OpenAIStub

    model = "openai/local-test"
    os.environ.setdefault("OPENAI_API_KEY", "sk-" + secrets.token_urlsafe(24))  # a fresh, fake key
    with tempfile.TemporaryDirectory() as d, OpenAIStub() as stub:
        stub.latency_s = latency_s
        stub.rate_limit(rate, retry_after=form)  # type: ignore[arg-type]
        journal = open_journal(f"sqlite:///{Path(d) / 'journal.sqlite'}")
        settings = EngineSettings(
            concurrency_per_model=conc, timeout_s=TIMEOUT_S, max_tries=10, backoff_max_s=2.0
        )
        eng = Engine(
            spend=SpendPath(journal, ModelGateway({model: (2e-6, 8e-6)}), run_id="bench-rate"),
            settings=settings,
            jitter=random.Random(0),
            fence_secret=FENCE,
            limiters=None if decrease is None else Limiters(conc, decrease=decrease),
        )
        spec = CallSpec(
            model=model,
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=16,
            timeout_s=TIMEOUT_S,
            api_base=stub.base_url,
            metadata={"role": "subject"},
        )
        counter = iter(range(10**9))

        async def worker(stop_at: float) -> None:
            while time.monotonic() < stop_at:
                await eng.call(AttemptRef("bench-rate", f"s{next(counter):07d}", 1, "subject"), spec)

        started = time.monotonic()

        async def drive() -> None:
            await asyncio.gather(*(worker(started + seconds) for _ in range(2 * conc)))

        wall, cpu = time.perf_counter(), time.process_time()
        asyncio.run(drive())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        journal.close()
        assert eng.limiters is not None
        limit = eng.limiters.for_call(model, stub.base_url).limit
        window = [(t, code) for t, code in stub.answers if started + warmup_s <= t < started + seconds]
        oks = sum(code == 200 for _, code in window)
        limited = sum(code == 429 for _, code in window)
        total_429 = stub.rate_limited_count
    span = seconds - warmup_s
    out = {
        "rate": rate,
        "ok_per_s": oks / span,
        "share_429": limited / max(1, len(window)),
        "all_429": float(total_429),
        "lowest_limit": limit.lowest,
        "final_limit": limit.limit,
        "decreases": float(limit.decreases),
        "wall_s": wall,
        "cpu_s": cpu,
    }
    print(
        f"R. adaptive concurrency vs a server limited to R={rate:g} requests/s ({latency_s * 1000:.0f} ms per "
        f"answer, Retry-After as {form}; start {conc} in flight; decrease x{limit.decrease:g}; {seconds:g} s, "
        f"measured after the first {warmup_s:g} s)"
    )
    print(
        f"   sustained {out['ok_per_s']:.1f} ok/s = {out['ok_per_s'] / rate:.3f} R (goal >= 0.9: "
        f"{'met' if out['ok_per_s'] >= 0.9 * rate else 'NOT met'}); 429 share {out['share_429'] * 100:.2f}% "
        f"(goal < 5%: {'met' if out['share_429'] < 0.05 else 'NOT met'}); {total_429} 429s in all; "
        f"limit: lowest {limit.lowest:.1f}, final {limit.limit:.1f}, {limit.decreases} decreases; "
        f"CPU {cpu:.1f} s"
    )
    return out


def judge_ahead_run(
    n: int, tmp: Path, ahead: bool, latency_ms: int = 200, concurrency: int = 64
) -> dict[str, float]:
    """One build through Dagster (scenario_runs, then judge_verdicts), with `engine.judge_ahead` = `ahead`."""
    import dataclasses
    import os
    from functools import cached_property

    import dagster as dg

    from eval_assets.capability.builds import Builds
    from eval_assets.capability.track import Track
    from eval_assets.defs.capability.assets import capability_assets
    from eval_assets.defs.partitions import Partitions
    from eval_assets.defs.resources import TrackResource
    from eval_assets.home import EvalHome

    home = EvalHome(tmp / f"home-{time.time_ns()}").ensure()
    judge = JUDGE.model_copy(update={"params": {**JUDGE.params, "latency_ms": latency_ms}})
    settings = PROJECT.settings.model_copy(
        update={
            "engine": PROJECT.settings.engine.model_copy(
                update={"concurrency_per_model": concurrency, "judge_ahead": ahead}
            ),
            "spend": PROJECT.settings.spend.model_copy(
                update={"suite_ceiling_usd": None, "day_ceiling_usd": None}
            ),
        }
    )
    project = dataclasses.replace(
        PROJECT,
        settings=settings,
        judges={**PROJECT.judges, judge.version_id: judge},
        scenarios={s.id: s for s in scenarios(n)},
    )
    manifest = build(latency_ms).model_dump(mode="json", exclude_none=True)
    manifest["judges"] = [judge.version_id]
    path = tmp / f"bench-{time.time_ns()}.yaml"
    path.write_text(json.dumps(manifest))
    track = Track(project, home)
    build_id = track.register_build(path).id

    scenario_runs, judge_verdicts, _ledger = capability_assets(
        project.asset_pools(), Builds(project, home), Partitions.of(project)
    )

    class BenchTrack(TrackResource):
        @cached_property
        def _opened(self) -> Track:
            return track

    resources = {"track": BenchTrack(eval_home=str(home.root), project_root=str(ROOT))}
    os.environ["DAGSTER_HOME"] = str(home.dagster)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("build", [build_id])
        key = dg.MultiPartitionKey({"build": build_id, "judge_version": judge.version_id})
        start = time.perf_counter()
        runs = dg.materialize([scenario_runs], instance=instance, partition_key=build_id, resources=resources)
        mid = time.perf_counter()
        verdicts = dg.materialize([judge_verdicts], instance=instance, partition_key=key, resources=resources)
        end = time.perf_counter()
    assert runs.success and verdicts.success
    meta = verdicts.asset_materializations_for_node("judge_verdicts")[0].metadata
    reused = next(v.value for k, v in meta.items() if k.startswith("reused_from_journal"))
    return {"runs_s": mid - start, "verdicts_s": end - mid, "wall_s": end - start, "reused": float(reused)}  # type: ignore[arg-type]


def judge_ahead_case(n: int, runs: int, tmp: Path, concurrency: int = 64) -> float:
    print(
        f"4. judge ahead vs after through Dagster: {n} scenarios x 5, 200 ms per call, "
        f"{concurrency} in flight per model"
    )
    judge_ahead_run(max(2, n // 10), tmp, True, concurrency=concurrency)  # warm-up, not counted
    judge_ahead_run(max(2, n // 10), tmp, False, concurrency=concurrency)
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(runs):
        for ahead in (False, True):
            results[ahead].append(judge_ahead_run(n, tmp, ahead, concurrency=concurrency))
    med = {a: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for a, rs in results.items()}
    for ahead in (False, True):
        m = med[ahead]
        print(
            f"   judge {'ahead' if ahead else 'after'}: scenario_runs {m['runs_s']:.2f} s + judge_verdicts "
            f"{m['verdicts_s']:.2f} s = {m['wall_s']:.2f} s (min-max {min(r['wall_s'] for r in results[ahead]):.2f}-"
            f"{max(r['wall_s'] for r in results[ahead]):.2f}), judge calls reused {m['reused']:.0f}"
        )
    ratio = med[True]["wall_s"] / med[False]["wall_s"]
    print(f"   ratio ahead / after: {ratio:.2f}   goal <= 0.6")
    return ratio


def case_latency(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    n = 64 if args.quick else args.latency_scenarios
    runs = 3
    print(f"latency (load {os.getloadavg()[0]:.1f}):")
    with tempfile.TemporaryDirectory() as d:
        for latency, target in ((200, 1.15), (50, 1.5)):
            eng, raw, cpu = latency_case(n, runs, Path(d), latency, 64)
            goals.append(
                (
                    f"{latency} ms per call, 64 in flight",
                    f"<= {target}x the bound",
                    f"engine {eng:.2f}x, bare litellm {raw:.2f}x ({cpu:.2f} ms CPU per call)",
                    eng <= target,
                )
            )


# --- case overhead: the engine's CPU per call over bare litellm, and where it goes --------------

# Where a function's own CPU goes: the first rule whose path part matches (and whose names hold the
# function's, when it names any). Functions matching none (the standard library, builtins, pydantic)
# pass their own CPU up to their callers, split as the calls were; what reaches no caller is the
# event loop's.
JOURNAL = "journal reserve/settle (SQLite, group commit)"
OWN = "litellm + sim provider (both sides)"
LOOP = "event loop, tasks, threads (unattributed)"
HARNESS = "benchmark loop (bare side: its semaphore)"
PROMPT = ("render_judge_prompt", "judge_instructions", "example_verdict", "scale_spec", "cached")
PROMPT += ("_describe_scale", "_placeholder", "fence", "fence_nonce")
POLICY = ("policy_failures", "policy_failures_stored", "policy_views", "_fold", "_base64_decoded")
COMPONENTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("eval_assets/spend/_path.py", (), "spend path (reserve/settle glue, on the loop)"),
    ("eval_assets/spend/", (), JOURNAL),
    ("sqlalchemy/", (), JOURNAL),
    ("eval_assets/engine/_limiter.py", (), "limiter"),
    ("eval_assets/tracing.py", (), "spans/tracing"),
    ("eval_assets/engine/_spans.py", (), "spans/tracing"),
    ("opentelemetry/", (), "spans/tracing"),
    ("eval_assets/redact.py", (), "redaction"),
    ("eval_assets/judging.py", PROMPT, "prompt rendering"),
    ("eval_assets/fence.py", (), "prompt rendering"),
    ("eval_assets/judging.py", POLICY, "policy checks"),
    ("eval_assets/judging.py", (), "verdict parsing"),
    ("eval_assets/engine/_calls.py", (), "litellm call building (specs)"),
    ("eval_assets/providers/gateway.py", (), "gateway (kwargs, cost, outcome)"),
    ("eval_assets/providers/sim", (), OWN),
    ("litellm/", (), OWN),
    ("eval_assets/engine/", (), "engine flow (attempts, results, rows)"),
    ("benchmarks/throughput.py", (), HARNESS),
)


def _component(func: tuple[str, int, str]) -> str | None:
    path, _, name = func
    for part, names, component in COMPONENTS:
        if part in path and (not names or name in names):
            return component
    return None


def attributed(stats: Any) -> tuple[dict[str, float], dict[tuple[str, int, str], tuple[str, float]]]:
    """(seconds per component, seconds per function with its component): every function's own time,
    a neutral function's passed up to its callers (`COMPONENTS`)."""
    table = stats.stats  # func -> (cc, nc, tt, ct, callers{caller: (cc, nc, tt, ct)})
    memo: dict[tuple[str, int, str], dict[str, float]] = {}

    def shares(func: tuple[str, int, str], seen: frozenset[tuple[str, int, str]]) -> dict[str, float]:
        """How `func`'s own time splits over components (fractions summing to 1)."""
        if (own := _component(func)) is not None:
            return {own: 1.0}
        if func in memo:
            return memo[func]
        callers = table[func][4] if func in table else {}
        weights = {c: edge[3] for c, edge in callers.items() if c not in seen and c in table}
        total = sum(weights.values())
        if total <= 0:
            out = {LOOP: 1.0}
        else:
            out = {}
            for caller, w in weights.items():
                for comp, f in shares(caller, seen | {func}).items():
                    out[comp] = out.get(comp, 0.0) + f * w / total
        if not seen:
            memo[func] = out
        return out

    per_component: dict[str, float] = {}
    per_function: dict[tuple[str, int, str], tuple[str, float]] = {}
    for func, (_, _, tt, _, _) in table.items():
        for comp, f in shares(func, frozenset()).items():
            per_component[comp] = per_component.get(comp, 0.0) + tt * f
        per_function[func] = (max(shares(func, frozenset()).items(), key=lambda kv: kv[1])[0], tt)
    return per_component, per_function


def profiled(run: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], Any]:
    """`run()` under cProfile with each thread's CPU clock, in every thread the run uses: the event
    loop's, the journal's drain thread and the default executor's (where litellm makes each
    call's synchronous part); `run` must open its own journal (its drain thread starts in the run).
    Returns the run's result and the merged pstats.Stats."""
    import cProfile
    import pstats
    import threading

    profiles: list[cProfile.Profile] = []

    def start_thread_profile(*_: Any) -> None:
        prof = cProfile.Profile(time.thread_time)
        profiles.append(prof)
        prof.enable()  # replaces this hook for the thread

    # A tree from before the journal's drain thread (`--before`) waits on a process-wide pool of
    # journal threads, started before this run: a fresh pool for the run, shut down after it.
    path_module: Any = sys.modules.get("eval_assets.spend._path")
    pool = getattr(path_module, "_journal_threads", None)
    if pool is not None:
        path_module._journal_threads = None
    threading.setprofile(start_thread_profile)  # threads started from now on, each with its own profile
    main = cProfile.Profile(time.thread_time)
    try:
        main.enable()
        result = run()
        main.disable()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        if pool is not None:
            if path_module._journal_threads is not None:
                path_module._journal_threads.shutdown(wait=True)
            path_module._journal_threads = pool
    stats = pstats.Stats(main)
    for prof in profiles:
        prof.disable()  # their threads ended; this only closes their tables
        stats.add(prof)
    return result, stats


def case_overhead(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    """The overhead measured here, or (`--before DIR`) alternately in a child process on DIR's tree
    (a clean clone of main with its own setup) and on this one, `--before-rounds` times each."""
    if not args.before:
        out = measure_overhead(args)
    else:
        out = overhead_before_after(args)
    goals.append(
        (
            "engine CPU per call over bare litellm",
            "<= 0.8 ms",
            f"{out['overhead_ms']:.2f} ms ({out['engine_ms']:.2f} vs {out['raw_ms']:.2f} ms per call)",
            out["overhead_ms"] <= 0.8,
        )
    )


def overhead_before_after(args: argparse.Namespace) -> dict[str, Any]:
    before = Path(args.before).resolve()
    here = Path(__file__).resolve()
    sides = {"before": (str(before / ".venv/bin/python"), str(before)), "after": (sys.executable, str(ROOT))}
    flags = ["--only", "overhead", "--overhead-json", "--overhead-top", "0"]
    flags += [
        "--overhead-scenarios",
        str(args.overhead_scenarios),
        "--overhead-runs",
        str(args.overhead_runs),
    ]
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    print(
        f"engine overhead before ({before}) and after ({ROOT}): {args.before_rounds} rounds, each a child "
        f"process per tree, alternating (load {os.getloadavg()[0]:.1f})"
    )
    for i in range(args.before_rounds):
        for name, (python, root) in sides.items():
            env = {**os.environ, "EVAL_BENCH_ROOT": root}
            done = subprocess.run(
                [python, str(here), *flags], capture_output=True, text=True, env=env, check=True
            )
            line = next(ln for ln in done.stdout.splitlines() if ln.startswith("OVERHEAD-JSON "))
            out = json.loads(line.removeprefix("OVERHEAD-JSON "))
            results[name].append(out)
            print(
                f"   round {i + 1} {name:6s}: engine {out['engine_ms']:.3f}, bare {out['raw_ms']:.3f}, "
                f"overhead {out['overhead_ms']:.3f} ms CPU per call (load {out['load']:.1f})"
            )
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in ("engine_ms", "raw_ms", "overhead_ms")}
        for name, rs in results.items()
    }
    for name in ("before", "after"):
        m = med[name]
        print(
            f"   {name:6s} median: engine {m['engine_ms']:.3f}, bare {m['raw_ms']:.3f}, overhead "
            f"{m['overhead_ms']:.3f} ms CPU per call"
        )
    comps = sorted(
        set(results["before"][-1]["components"]) | set(results["after"][-1]["components"]),
        key=lambda c: -results["before"][-1]["components"].get(c, 0.0),
    )
    print("   extra profiled ms per call by component (last round), before | after:")
    for comp in comps:
        b = results["before"][-1]["components"].get(comp, 0.0)
        a = results["after"][-1]["components"].get(comp, 0.0)
        print(f"     {comp:52s} {b:+7.3f} | {a:+7.3f}")
    return med["after"]


def measure_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """CPU per model call, the engine (journal, limiter, spans, redaction, prompts, rows) vs bare
    litellm.acompletion on the same calls, same process, alternating; then a cProfile of one run of
    each side, split by component (ms of thread CPU per call, profiled)."""
    n = 100 if args.quick else args.overhead_scenarios
    runs = 3 if args.quick else args.overhead_runs
    print(
        f"engine overhead: {n} x 5 attempts, subject + judge each, zero latency, SQLite journal, no tracer "
        f"provider (load {os.getloadavg()[0]:.1f})"
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        warm = run_engine(min(n, 50), tmp)  # warm-up, not counted: imports, clients, first calls
        run_raw(raw_workload(min(n, 50), warm["subjects"], 0, judge=True))
        first = run_engine(n, tmp)
        work = raw_workload(n, first["subjects"], 0, judge=True)
        eng, raw = alternate(runs, lambda: run_engine(n, tmp), lambda: run_raw(work))
        deltas = sorted(
            cpu_ms_per_call(e) - cpu_ms_per_call(r) for e, r in zip(eng.runs, raw.runs, strict=True)
        )
        over = statistics.median(deltas)
        print(
            f"   {runs} alternating runs per side after a warm-up; CPU of the whole process (every thread); median (min-max)"
        )
        for name, side in (("engine", eng), ("bare litellm", raw)):
            print(
                f"   {name}: {side.med(lambda r: r['calls']):.0f} calls, CPU {side.show(cpu_ms_per_call, '.3f')} ms "
                f"per call, wall {side.show(lambda r: r['wall_s'], '.2f')} s"
            )
        print(
            f"   overhead (engine - bare, per pair): {over:.3f} ms CPU per call (pairs {deltas[0]:.3f}-{deltas[-1]:.3f})"
        )
        pn = max(20, n // 4)
        e_res, e_stats = profiled(lambda: run_engine(pn, tmp))
        pwork = raw_workload(pn, e_res["subjects"], 0, judge=True)
        r_res, r_stats = profiled(lambda: run_raw(pwork))
    e_comp, e_funcs = attributed(e_stats)
    r_comp, _ = attributed(r_stats)
    e_calls, r_calls = e_res["calls"], r_res["calls"]
    print(
        f"   cProfile, thread CPU in every thread, one run per side ({pn} x 5: {e_calls} calls); "
        f"profiled ms per call (cProfile inflates them), engine | bare | extra:"
    )
    total_e, total_r = sum(e_comp.values()), sum(r_comp.values())
    for comp in sorted(set(e_comp) | set(r_comp), key=lambda c: -(e_comp.get(c, 0) - r_comp.get(c, 0))):
        e_ms, r_ms = 1000 * e_comp.get(comp, 0.0) / e_calls, 1000 * r_comp.get(comp, 0.0) / r_calls
        print(f"     {comp:52s} {e_ms:7.3f} | {r_ms:7.3f} | {e_ms - r_ms:+7.3f}")
    print(
        f"     {'all':52s} {1000 * total_e / e_calls:7.3f} | {1000 * total_r / r_calls:7.3f} | "
        f"{1000 * (total_e / e_calls - total_r / r_calls):+7.3f}"
    )
    engine_only = [
        (func, comp, tt) for func, (comp, tt) in e_funcs.items() if comp not in (OWN, LOOP, HARNESS)
    ]
    print("   hot spots of the engine's own components (own time of a function, callees not included):")
    for (path, line, name), comp, tt in sorted(engine_only, key=lambda x: -x[2])[: args.overhead_top]:
        where = path.split("/site-packages/")[-1].replace(str(ROOT) + "/", "")
        print(f"     {1000 * tt / e_calls:6.3f} ms  {name} ({where}:{line}) [{comp}]")
    out = {
        "engine_ms": eng.med(cpu_ms_per_call),
        "raw_ms": raw.med(cpu_ms_per_call),
        "overhead_ms": over,
        "load": os.getloadavg()[0],
        "components": {
            c: 1000 * (e_comp.get(c, 0.0) / e_calls - r_comp.get(c, 0.0) / r_calls)
            for c in set(e_comp) | set(r_comp)
        },
    }
    if args.overhead_json:
        print("OVERHEAD-JSON " + json.dumps(out))
    return out


# --- case rss: peak RSS at two suite sizes, each in a fresh process ----------------------------


def rss_child(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        result = run_track(n, 1, Path(d))
    print(json.dumps(result))


def case_rss(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    sizes = (100, 500) if args.quick else (1000, 5000)
    peaks = []
    print(f"peak RSS, the track with 1 worker, a fresh process per size (load {os.getloadavg()[0]:.1f}):")
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True, check=True
        )
        child = json.loads(out.stdout.strip().splitlines()[-1])
        peaks.append(child["peak_rss_mb"])
        print(
            f"   {n} x 5: {child['peak_rss_mb']:.0f} MB peak RSS (wall {child['wall_s']:.1f} s, "
            f"CPU {child['cpu_s']:.1f} s)"
        )
    growth = peaks[1] / peaks[0] - 1
    goals.append(
        (
            f"peak RSS {sizes[0]} vs {sizes[1]} scenarios",
            "<= 700 MB, +15% at most",
            f"{peaks[0]:.0f} MB vs {peaks[1]:.0f} MB ({100 * growth:+.1f}%)",
            max(peaks) <= 700 and growth <= 0.15,
        )
    )


# --- case dagster: a big build through `evaltrack run` -----------------------------------------


def generated_project(dest: Path, n: int) -> None:
    """A project directory: the shipped rubrics and judges, `n` generated scenarios, no ceilings."""
    for sub in ("rubrics", "judges"):
        shutil.copytree(ROOT / sub, dest / sub)
    template = (ROOT / "scenarios/support/support.password-reset.yaml").read_text()
    (dest / "scenarios/bench").mkdir(parents=True)
    for i in range(n):
        sid = f"bench.s{i:05d}"
        text = template.replace("id: support.password-reset", f"id: {sid}").replace(
            "suite: support", "suite: bench"
        )
        (dest / "scenarios/bench" / f"{sid}.yaml").write_text(text)
    ceilings = ("scenario_ceiling_usd", "suite_ceiling_usd", "day_ceiling_usd")
    lines = (ROOT / "evaltrack.yaml").read_text().splitlines()
    text = "\n".join(ln for ln in lines if not ln.strip().startswith(ceilings))
    text = text.replace("spend:\n", "spend: {}\n", 1)
    text += "\nbounds:\n  max_attempts_per_run: 10000000\nengine:\n  concurrency_per_model: 256\n"
    (dest / "evaltrack.yaml").write_text(text)
    (dest / "bench.yaml").write_text(BUILD_YAML)


def case_dagster(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    n = 200 if args.quick else args.dagster_scenarios
    exe = str(Path(sys.executable).with_name("evaltrack"))
    with tempfile.TemporaryDirectory() as d:
        project, home = Path(d) / "project", Path(d) / "home"
        generated_project(project, n)
        base = [exe, "--project", str(project), "--home", str(home)]
        subprocess.run([*base, "build", "add", str(project / "bench.yaml")], check=True, capture_output=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        wall = time.perf_counter()
        out = subprocess.run([*base, "run", "--build", "bench", "--format", "json"], capture_output=True, text=True)
        wall = time.perf_counter() - wall
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    ok = out.returncode in (0, 1, 2)  # a decision (allow, block, none), not an internal error
    print(
        f"evaltrack run, {n} x 5, zero latency (Dagster path, default workers; load "
        f"{os.getloadavg()[0]:.1f}): exit {out.returncode}, wall {wall:.0f} s, peak RSS of the largest "
        f"waited-for process {peak:.0f} MB (before the run: {before / 1024:.0f} MB, `build add`)"
    )
    if out.returncode != 2:  # no baseline: the decision is none
        print("   " + (out.stderr.strip().splitlines() or ["(no stderr)"])[-1])
    goals.append(
        (
            f"{n}x5 through evaltrack run",
            "completes, peak RSS <= 1 GB, wall reported",
            f"exit {out.returncode}, wall {wall:.0f} s, peak RSS {peak:.0f} MB",
            ok and peak <= 1024,
        )
    )


def case_ahead(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    n = 8 if args.quick else args.ahead_scenarios
    with tempfile.TemporaryDirectory() as d:
        ratio = judge_ahead_case(n, 3, Path(d), args.ahead_concurrency)
    goals.append(
        (
            f"judge ahead vs after through Dagster, {n} x 5 at 200 ms",
            "<= 0.6x the sequential path",
            f"{ratio:.2f}x",
            ratio <= 0.6,
        )
    )


def case_rate(args: argparse.Namespace, goals: list[tuple[str, str, str, bool | None]]) -> None:
    rate = args.rate_limit
    out = case_rate_limited(
        rate,
        20.0 if args.quick else args.rate_seconds,
        latency_s=args.rate_latency,
        form=args.rate_retry_after,
        decrease=args.rate_decrease,
    )
    goals.append(
        (
            f"adaptive concurrency vs a server limited to R={rate:g}/s",
            ">= 0.9 R sustained, < 5% 429 after 10 s",
            f"{out['ok_per_s'] / rate:.2f} R, {out['share_429'] * 100:.1f}% 429",
            out["ok_per_s"] >= 0.9 * rate and out["share_429"] < 0.05,
        )
    )


CASES = {
    "zero": case_zero,
    "latency": case_latency,
    "overhead": case_overhead,
    "rss": case_rss,
    "dagster": case_dagster,
    "ahead": case_ahead,
    "rate": case_rate,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(CASES), help=f"cases, comma-separated: {', '.join(CASES)}")
    ap.add_argument("--quick", action="store_true", help="smoke sizes (minutes, not the goals' sizes)")
    ap.add_argument("--scenarios", type=int, default=1000, help="zero: scenarios (x 5 repeats)")
    ap.add_argument("--workers", type=int, default=0, help="zero: the N of N workers (default: cores)")
    ap.add_argument("--latency-scenarios", type=int, default=256)
    ap.add_argument("--overhead-scenarios", type=int, default=400, help="overhead: scenarios (x 5)")
    ap.add_argument("--overhead-runs", type=int, default=5, help="overhead: alternating runs per side")
    ap.add_argument("--overhead-top", type=int, default=15, help="overhead: hot spots printed")
    ap.add_argument("--overhead-json", action="store_true", help="overhead: also print the figures as JSON")
    ap.add_argument(
        "--before",
        help="overhead: a clean clone of main with its own setup, measured alternately with this tree",
    )
    ap.add_argument("--before-rounds", type=int, default=3, help="overhead --before: child runs per tree")
    ap.add_argument("--dagster-scenarios", type=int, default=10_000)
    ap.add_argument("--rss-child", type=int)
    ap.add_argument("--ahead-scenarios", type=int, default=40)
    ap.add_argument("--ahead-concurrency", type=int, default=64, help="case 4: calls in flight per model")
    ap.add_argument("--rate-limit", type=float, default=10.0, help="case rate: the server's requests/s")
    ap.add_argument("--rate-seconds", type=float, default=40.0)
    ap.add_argument("--rate-retry-after", choices=["seconds+ms", "seconds", "date"], default="seconds+ms")
    ap.add_argument("--rate-latency", type=float, default=1.0, help="seconds the server takes per answer")
    ap.add_argument(
        "--rate-decrease", type=float, help="the limiter's multiplicative decrease (default: its own)"
    )
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    chosen = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    goals: list[tuple[str, str, str, bool | None]] = []
    wall = time.perf_counter()
    for name in chosen:
        recording, first = Recording(f"throughput_{name}"), len(goals)
        CASES[name](args, goals)
        recording.table(
            "goals",
            [{"goal": g, "target": t, "measured": m, "met": met} for g, t, m, met in goals[first:]],
        )
        if not args.overhead_json:  # a child of `--before`: its parent records the comparison
            recording.write()
    print()
    print("| goal | target | measured | met |")
    print("| --- | --- | --- | --- |")
    for goal, target, measured, met in goals:
        print(f"| {goal} | {target} | {measured} | {'yes' if met else 'NO'} |")
    print(
        f"total wall {time.perf_counter() - wall:.0f} s, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
