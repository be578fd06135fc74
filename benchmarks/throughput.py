"""Engine throughput beside bare litellm on the same calls, measured side by side in one process.

1. Zero latency, N scenarios x 5 repeats, subject + helpfulness judge, pipelined (each attempt is
   judged as soon as it finishes). Engine: `Engine.run_and_judge` (spend path, SQLite journal,
   verdict parsing). Raw: the SAME calls (same models, roles, messages, params, metadata: the subject
   specs `eval_assets.engine.subject_spec` builds and the judge prompts `render_judge_prompt` renders from the
   warm-up run's subject outputs), pipelined the same way, each a bare `litellm.acompletion` with a
   per-model semaphore, no engine, no journal. Printed per side: calls, wall, calls/s, CPU ms per
   call. Goal (as stated before this rewrite): engine calls/s >= 0.8 x raw calls/s.
2. 200 ms simulated latency, concurrency 64, subject calls only, engine and raw. A single event loop
   runs every call's CPU work serially, so the bound is not calls x latency / concurrency but
       ideal = calls x (latency / concurrency + CPU per call)
   (wall / latency-only bound ~= 1 + concurrency x CPU per call / latency). Both ratios are printed,
   with CPU per call measured on the same run. The latency path is warmed first (one run per side).
3. Peak RSS of case 1 at 1000 and 5000 scenarios (each in a fresh process). Goal <= 700 MB and flat.

Cases 1 and 2 alternate engine and raw runs (A B A B ...; `--runs` pairs, >= 3) after one warm-up
run per side that is not counted, and print medians (min-max beside them). Wall time includes any
time this process waited for a CPU: on a shared machine, compare the CPU figures too.

Run: .venv/bin/python benchmarks/throughput.py [--scenarios 300] [--runs 3] [--rss-scenarios 1000,5000]

R. (own run: `--rate-limit R [--rate-seconds 40] [--rate-retry-after seconds+ms|seconds|date]`)
   adaptive concurrency against a local server limited to R requests/s: sustained ok/s and the 429
   share after the first 10 s; goal >= 0.9 R and < 5% (`case_rate_limited`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.config import (  # noqa: E402
    BuildManifest,
    EngineSettings,  # noqa: E402
    Scenario,
    load_project,
)
from eval_assets.engine import Engine, Limiters, SubjectResult, judge_spec, subject_spec  # noqa: E402
from eval_assets.fence import fence_nonce  # noqa: E402
from eval_assets.providers.gateway import CallSpec, ModelGateway  # noqa: E402
from eval_assets.spend import AttemptRef, SpendPath, open_journal  # noqa: E402

PROJECT = load_project(ROOT)
FENCE = b"throughput benchmark: fence secret"
JUDGE = PROJECT.judges["helpfulness-v1"]
RUBRIC = PROJECT.rubric_for(JUDGE)
PRICES = PROJECT.settings.price_table()
TIMEOUT_S = 30


def scenarios(n: int) -> list[Scenario]:
    template = PROJECT.scenarios_for(JUDGE)[0]
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


def run_engine(
    n: int, tmp: Path, concurrency: int = 256, latency_ms: int = 0, judge: bool = True
) -> dict[str, Any]:
    """One engine run (fresh journal). `calls` counts model calls (subject + judge, tries included)."""
    eng = engine(tmp, concurrency)
    scen = scenarios(n)
    wall, cpu = time.perf_counter(), time.process_time()
    if judge:
        subjects, verdicts = asyncio.run(eng.run_and_judge(build(latency_ms), scen, [(JUDGE, RUBRIC)]))
        scored = sum(v.status == "scored" for v in verdicts[JUDGE.version_id])
        calls = sum(s.call.tries for s in subjects) + sum(v.tries for v in verdicts[JUDGE.version_id])
    else:
        subjects = asyncio.run(eng.run_subjects(build(latency_ms), scen))
        scored, calls = 0, sum(s.call.tries for s in subjects)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
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
    """Bare litellm.acompletion calls, the gateway's kwargs, a semaphore per model like the engine's."""
    import litellm

    ModelGateway(PRICES)  # registers the sim providers

    async def main() -> None:
        limits: dict[str, asyncio.Semaphore] = {}

        async def call(spec: CallSpec) -> None:
            sem = limits.setdefault(spec.model, asyncio.Semaphore(concurrency))
            async with sem:
                await litellm.acompletion(
                    model=spec.model,
                    messages=spec.messages,
                    max_tokens=spec.max_tokens,
                    timeout=spec.timeout_s,
                    num_retries=0,
                    max_retries=0,
                    metadata={**spec.metadata, "try_no": 1},
                    **({"api_base": spec.api_base} if spec.api_base else {}),  # as the gateway sends it
                    **dict(spec.params),
                )

        async def attempt(calls: list[CallSpec]) -> None:
            for spec in calls:
                await call(spec)

        await asyncio.gather(*(attempt(calls) for calls in work))

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(main())
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


def rss_child(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        result = run_engine(n, Path(d))
    result.pop("subjects")
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def case1(n: int, runs: int, tmp: Path) -> None:
    warm = run_engine(n, tmp)  # warm-up (not counted); its subject outputs give the raw side's judge prompts
    work = raw_workload(n, warm["subjects"], 0, judge=True)
    run_raw(work)  # warm-up (not counted)
    eng, raw = alternate(runs, lambda: run_engine(n, tmp), lambda: run_raw(work))
    judge_calls = sum(len(c) - 1 for c in work)
    print(
        f"1. zero latency, {n} scenarios x 5 repeats, subject + judge, pipelined; {runs} ABAB pairs after "
        f"one warm-up run per side; median (min-max)"
    )
    print(
        f"   the same {len(work)} subject + {judge_calls} judge calls on both sides "
        f"(engine calls, tries included: {eng.show(lambda r: r['calls'], '.0f')})"
    )
    print(
        f"   engine: wall {eng.show(lambda r: r['wall_s'], '.2f')} s, {eng.show(rate, '.0f')} calls/s, "
        f"CPU {eng.show(lambda r: r['cpu_s'], '.2f')} s = {eng.show(cpu_ms_per_call, '.2f')} ms per call, "
        f"CPU/wall {eng.show(cpu_share, '.2f')}"
    )
    print(
        f"   raw litellm: wall {raw.show(lambda r: r['wall_s'], '.2f')} s, {raw.show(rate, '.0f')} calls/s, "
        f"CPU {raw.show(lambda r: r['cpu_s'], '.2f')} s = {raw.show(cpu_ms_per_call, '.2f')} ms per call, "
        f"CPU/wall {raw.show(cpu_share, '.2f')}"
    )
    ratio = eng.med(rate) / raw.med(rate)
    cpu_ratio = eng.med(cpu_ms_per_call) / raw.med(cpu_ms_per_call)
    print(
        f"   engine/raw calls/s (medians): {ratio:.2f}   goal >= 0.80: {'met' if ratio >= 0.8 else 'NOT met'}; "
        f"engine/raw CPU per call: {cpu_ratio:.2f}"
    )


def case2(n: int, runs: int, tmp: Path, latency: int = 200, conc: int = 64) -> None:
    def engine_run() -> dict[str, Any]:
        return run_engine(n, tmp, concurrency=conc, latency_ms=latency, judge=False)

    warm = engine_run()  # warms the latency path (not counted)
    work = raw_workload(n, warm["subjects"], latency, judge=False)
    run_raw(work, concurrency=conc)  # warm-up (not counted)
    eng, raw = alternate(runs, engine_run, lambda: run_raw(work, concurrency=conc))
    calls = len(work)
    bound = calls * latency / 1000 / conc
    print(
        f"2. {latency} ms latency, concurrency {conc}, {calls} subject calls; {runs} ABAB pairs after one warm-up "
        f"run per side; median (min-max)"
    )
    print(f"   latency-only bound calls x latency / concurrency = {bound:.2f} s")
    for name, side in (("engine", eng), ("raw litellm", raw)):
        ideal = [bound + r["cpu_s"] for r in side.runs]  # + serial CPU: calls x CPU per call
        ratios = [r["wall_s"] / i for r, i in zip(side.runs, ideal, strict=True)]
        predicted = [1 + conc * (r["cpu_s"] / r["calls"]) / (latency / 1000) for r in side.runs]
        print(
            f"   {name}: wall {side.show(lambda r: r['wall_s'], '.2f')} s, CPU {side.show(lambda r: r['cpu_s'], '.2f')} s "
            f"({side.show(cpu_ms_per_call, '.2f')} ms per call, CPU/wall {side.show(cpu_share, '.2f')}); "
            f"wall / latency-only bound "
            f"{side.med(lambda r: r['wall_s']) / bound:.2f} (1 + conc x CPU per call / latency predicts "
            f"{statistics.median(predicted):.2f}); wall / (bound + CPU) {statistics.median(ratios):.2f}"
        )
    eng_ratio = statistics.median(r["wall_s"] / (bound + r["cpu_s"]) for r in eng.runs)
    print(
        f"   goal engine wall / (latency bound + serial CPU) <= 1.15: {'met' if eng_ratio <= 1.15 else 'NOT met'} "
        f"({eng_ratio:.2f})"
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
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-not-a-key")
    with tempfile.TemporaryDirectory() as d, OpenAIStub() as stub:
        stub.latency_s = latency_s
        stub.rate_limit(rate, retry_after=form)  # type: ignore[arg-type]
        journal = open_journal(f"sqlite:///{Path(d) / 'journal.sqlite'}")
        settings = EngineSettings(concurrency_per_model=conc, timeout_s=TIMEOUT_S, max_tries=10, backoff_max_s=2.0)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3, help="ABAB pairs per case (>= 3)")
    ap.add_argument("--rss-scenarios", default="1000,5000")
    ap.add_argument("--latency-scenarios", type=int, default=256)
    ap.add_argument("--rss-child", type=int)
    ap.add_argument("--rate-limit", type=float, help="only case R: a server limited to this many requests/s")
    ap.add_argument("--rate-seconds", type=float, default=40.0)
    ap.add_argument("--rate-retry-after", choices=["seconds+ms", "seconds", "date"], default="seconds+ms")
    ap.add_argument("--rate-latency", type=float, default=1.0, help="seconds the server takes per answer")
    ap.add_argument("--rate-decrease", type=float, help="the limiter's multiplicative decrease (default: its own)")
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    if args.rate_limit:
        case_rate_limited(
            args.rate_limit,
            args.rate_seconds,
            latency_s=args.rate_latency,
            form=args.rate_retry_after,
            decrease=args.rate_decrease,
        )
        return
    if args.runs < 3:
        ap.error("--runs must be at least 3 (medians of >= 3 alternating runs)")
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as d:
        case1(args.scenarios, args.runs, Path(d))
        case2(args.latency_scenarios, args.runs, Path(d))

    if args.rss_scenarios:
        print("3. peak RSS of case 1 (fresh process each):")
        for n in [int(x) for x in args.rss_scenarios.split(",")]:
            out = subprocess.run(
                [sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True, check=True
            )
            child = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"   {n} scenarios: {child['peak_rss_mb']:.0f} MB peak RSS ({child['calls']} calls, "
                f"wall {child['wall_s']:.1f} s, CPU {child['cpu_s']:.1f} s)   goal <= 700 MB, flat"
            )
    print(
        f"total: wall {time.perf_counter() - wall:.0f} s, CPU {time.process_time() - cpu:.0f} s (this process)"
    )


if __name__ == "__main__":
    main()
