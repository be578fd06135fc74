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

4. Judge ahead vs after, through Dagster (`judge_ahead_case`): `scenario_runs` then `judge_verdicts`
   materialized as `evaltrack run` does (two runs on a temporary instance), 200 ms latency on subject
   and judge, 64 in flight per model, N scenarios x 5, one judge version; wall of both runs with
   `engine.judge_ahead` on and off (alternating, medians). Goal: ahead <= 0.6 x after.

Run: .venv/bin/python benchmarks/throughput.py [--scenarios 300] [--runs 3] [--rss-scenarios 1000,5000]
     .venv/bin/python benchmarks/throughput.py --judge-ahead-only [--ahead-scenarios 40] [--runs 3]
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
from eval_assets.engine import Engine, SubjectResult, judge_spec, subject_spec  # noqa: E402
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


def judge_ahead_run(
    n: int, tmp: Path, ahead: bool, latency_ms: int = 200, concurrency: int = 64
) -> dict[str, float]:
    """One build through Dagster (scenario_runs, then judge_verdicts), with `engine.judge_ahead` = `ahead`."""
    import dataclasses
    import os
    from functools import cached_property

    import dagster as dg

    from eval_assets.capability.track import Track
    from eval_assets.defs.capability.assets import judge_verdicts, scenario_runs
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

    class BenchTrack(TrackResource):
        @cached_property
        def instance(self) -> Track:
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


def judge_ahead_case(n: int, runs: int, tmp: Path, concurrency: int = 64) -> None:
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
    print(f"   ratio ahead / after: {med[True]['wall_s'] / med[False]['wall_s']:.2f}   goal <= 0.6")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3, help="ABAB pairs per case (>= 3)")
    ap.add_argument("--rss-scenarios", default="1000,5000")
    ap.add_argument("--latency-scenarios", type=int, default=256)
    ap.add_argument("--rss-child", type=int)
    ap.add_argument("--ahead-scenarios", type=int, default=40)
    ap.add_argument("--ahead-concurrency", type=int, default=64, help="case 4: calls in flight per model")
    ap.add_argument("--judge-ahead-only", action="store_true", help="run case 4 only")
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    if args.runs < 3:
        ap.error("--runs must be at least 3 (medians of >= 3 alternating runs)")
    wall, cpu = time.perf_counter(), time.process_time()
    if args.judge_ahead_only:
        with tempfile.TemporaryDirectory() as d:
            judge_ahead_case(args.ahead_scenarios, args.runs, Path(d), args.ahead_concurrency)
        return
    with tempfile.TemporaryDirectory() as d:
        case1(args.scenarios, args.runs, Path(d))
        case2(args.latency_scenarios, args.runs, Path(d))
        judge_ahead_case(args.ahead_scenarios, args.runs, Path(d), args.ahead_concurrency)

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
