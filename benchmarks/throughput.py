"""Engine throughput against the floor litellm itself imposes, measured side by side in one run.

1. Zero-latency sim, N scenarios × 5 repeats, subject + judge (pipelined, journaled): scored attempts/s
   and CPU ms per attempt; then the same number of raw `litellm.acompletion` calls on the same sim
   provider in a bare asyncio loop. Goal: engine rate ≥ 0.8 × raw rate.
2. 200 ms simulated latency, concurrency 64: wall ÷ (calls × latency ÷ concurrency). Goal ≤ 1.15.
3. Peak RSS of case 1 at 1000 and 5000 scenarios (each in a fresh process). Goal ≤ 700 MB and flat.

Run: .venv/bin/python benchmarks/throughput.py [--scenarios 1000] [--rss-scenarios 1000,5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.config import BuildManifest, Scenario, load_project  # noqa: E402
from eval_assets.config import Engine as EngineSettings  # noqa: E402
from eval_assets.engine import Engine  # noqa: E402
from eval_assets.journal import open_journal  # noqa: E402
from eval_assets.providers.gateway import ModelGateway  # noqa: E402
from eval_assets.spend import SpendPath  # noqa: E402

PROJECT = load_project(ROOT)
JUDGE = PROJECT.judges["helpfulness-v1"]
RUBRIC = PROJECT.rubric_for(JUDGE)
PRICES = {m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in PROJECT.settings.prices.items()}


def scenarios(n: int) -> list[Scenario]:
    template = PROJECT.scenarios_for(JUDGE)[0]
    return [template.model_copy(update={"id": f"bench.s{i:05d}", "repeats": 5}) for i in range(n)]


def build(latency_ms: int = 0) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "bench",
            "milestone": 1,
            "subject": {"model": "sim/agent", "family": "sim", "params": {"skill": 0.7, "seed": 1, "latency_ms": latency_ms}},
        }
    )


def engine(tmp: Path, concurrency: int) -> Engine:
    journal = open_journal(f"sqlite:///{tmp / f'journal-{time.time_ns()}.sqlite'}")
    settings = EngineSettings(concurrency_per_model=concurrency, timeout_s=30, max_tries=3)
    spend = SpendPath(journal, ModelGateway(PRICES), run_id="bench")
    return Engine(spend=spend, settings=settings, jitter=random.Random(0))


def run_engine(n: int, tmp: Path, concurrency: int = 256, latency_ms: int = 0, judge: bool = True) -> dict:
    eng = engine(tmp, concurrency)
    scen = scenarios(n)
    wall, cpu = time.perf_counter(), time.process_time()
    if judge:
        subjects, verdicts = asyncio.run(eng.run_and_judge(build(latency_ms), scen, [(JUDGE, RUBRIC)]))
        scored = sum(v.status == "scored" for v in verdicts[JUDGE.version_id])
    else:
        subjects = asyncio.run(eng.run_subjects(build(latency_ms), scen))
        scored = 0
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"attempts": len(subjects), "scored": scored, "calls": eng.progress.done, "wall_s": wall, "cpu_s": cpu}


def run_raw(calls: int, concurrency: int = 256, latency_ms: int = 0) -> dict:
    """The floor: bare litellm.acompletion calls on the same sim provider, no engine, no journal."""
    import litellm

    ModelGateway(PRICES)  # registers the sim providers
    sem = asyncio.Semaphore(concurrency)
    messages = [{"role": "user", "content": "benchmark prompt " * 20}]

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(
                model="sim/agent", messages=messages, max_tokens=256, skill=0.7, seed=1, latency_ms=latency_ms,
                metadata={"build": "raw", "scenario_id": f"s{i // 5}", "repeat": i % 5},
            )

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(calls)))

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(main())
    return {"calls": calls, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


def rss_child(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        result = run_engine(n, Path(d))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", type=int, default=1000)
    ap.add_argument("--rss-scenarios", default="1000,5000")
    ap.add_argument("--latency-scenarios", type=int, default=256)
    ap.add_argument("--rss-child", type=int)
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        run_raw(200)  # warm litellm's lazy imports and caches for both sides
        run_engine(20, tmp)
        eng = run_engine(args.scenarios, tmp)
        raw = run_raw(eng["calls"])
        eng_rate = eng["calls"] / eng["wall_s"]
        raw_rate = raw["calls"] / raw["wall_s"]
        print(f"1. zero latency, {args.scenarios} scenarios x 5 repeats, subject + judge ({eng['calls']} calls)")
        print(f"   engine: {eng['scored']} scored attempts in {eng['wall_s']:.2f}s = {eng['attempts'] / eng['wall_s']:.0f} attempts/s, "
              f"{eng_rate:.0f} calls/s, CPU {1000 * eng['cpu_s'] / eng['attempts']:.2f} ms per attempt")
        print(f"   raw litellm: {raw['calls']} calls in {raw['wall_s']:.2f}s = {raw_rate:.0f} calls/s, "
              f"CPU {1000 * raw['cpu_s'] / raw['calls']:.2f} ms per call")
        print(f"   ratio engine/raw (calls/s): {eng_rate / raw_rate:.2f}   goal >= 0.80")

        latency, conc = 200, 64
        lat = run_engine(args.latency_scenarios, tmp, concurrency=conc, latency_ms=latency, judge=False)
        ideal = lat["calls"] * latency / 1000 / conc
        raw_lat = run_raw(lat["calls"], concurrency=conc, latency_ms=latency)
        print(f"2. {latency} ms latency, concurrency {conc}, {lat['calls']} subject calls: wall {lat['wall_s']:.2f}s, "
              f"ideal {ideal:.2f}s, ratio {lat['wall_s'] / ideal:.3f}   goal <= 1.15")
        print(f"   raw litellm, same calls, latency and concurrency: wall {raw_lat['wall_s']:.2f}s, "
              f"ratio {raw_lat['wall_s'] / ideal:.3f} (the floor litellm's async path imposes here)")

    print("3. peak RSS of case 1 (fresh process each):")
    for n in [int(x) for x in args.rss_scenarios.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True, check=True)
        child = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"   {n} scenarios: {child['peak_rss_mb']:.0f} MB peak RSS ({child['calls']} calls, {child['wall_s']:.1f}s)   goal <= 700 MB, flat")


if __name__ == "__main__":
    main()
