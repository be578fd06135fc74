"""What the OpenTelemetry spans cost with no SDK installed (the API's no-op proxy tracer), and with one.

    .venv/bin/python benchmarks/tracing_overhead.py [--calls 200000] [--scenarios 200] [--runs 3]

1. Per span: an async function decorated with `eval_assets.tracing.traced` (attributes from its
   arguments and result, as the engine's spans) against the same function undecorated, `--calls`
   awaits each, alternating halves; the difference per call is the span's cost. Measured first with no
   tracer provider (what every run of the project gets), then with the SDK's TracerProvider and a
   span processor that drops every span (the cost of recording, without any exporter's I/O).
2. A 200 x 5 run (subject + judge on the zero-latency sim provider, `run_engine` of
   benchmarks/throughput.py): wall time with the engine's span decorators in place and with them
   removed (`__wrapped__`, and the model-call span replaced by a bare context), `--runs` alternating
   pairs, no provider installed. 4 spans per attempt (attempt, its call, verdict, its call). Shares of
   the run's wall time are printed beside the per-span figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from eval_assets.engine import Engine  # noqa: E402
from eval_assets.tracing import traced  # noqa: E402


async def plain(build: str, scenario: str, repeat: int) -> int:
    return repeat


spanned = traced(
    "bench",
    lambda a: {"eval.build": a["build"], "eval.scenario": a["scenario"], "eval.repeat": a["repeat"]},
    lambda r: {"eval.status": "ok"},
)(plain)


def per_call_us(calls: int) -> tuple[float, float]:
    """(plain, spanned) microseconds per await, best of 3 alternating rounds."""

    async def loop(fn: Callable[..., Awaitable[int]], n: int) -> float:
        started = time.perf_counter()
        for i in range(n):
            await fn("b", "s", i)
        return (time.perf_counter() - started) / n * 1e6

    async def main() -> tuple[float, float]:
        a, b = [], []
        for _ in range(3):
            a.append(await loop(plain, calls // 3))
            b.append(await loop(spanned, calls // 3))
        return min(a), min(b)

    return asyncio.run(main())


def engine_run(n: int, with_spans: bool) -> float:
    from throughput import run_engine

    import eval_assets.tracing as tracing_module
    from eval_assets.tracing import CallSpan

    @contextmanager
    def bare_call(operation: str, model: str, attributes: Any) -> Iterator[CallSpan]:
        yield CallSpan(None)

    decorated = {name: getattr(Engine, name) for name in ("run_subject", "_judge_verdict")}
    spanned_call = tracing_module.model_call
    try:
        if not with_spans:
            for name, fn in decorated.items():
                setattr(Engine, name, fn.__wrapped__)
            tracing_module.model_call = bare_call  # type: ignore[assignment]
        with tempfile.TemporaryDirectory() as tmp:
            result: dict[str, Any] = run_engine(n, Path(tmp))
        return float(result["wall_s"])
    finally:
        for name, fn in decorated.items():
            setattr(Engine, name, fn)
        tracing_module.model_call = spanned_call  # type: ignore[assignment]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--scenarios", type=int, default=200)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    recording = Recording("tracing_overhead")

    base, spans = per_call_us(args.calls)
    noop = spans - base
    print(f"no provider: plain {base:.2f} us/await, with span {spans:.2f} us/await -> {noop:.2f} us per span")

    walls: dict[bool, list[float]] = {True: [], False: []}
    engine_run(20, True)  # warm-up (imports, litellm's first call)
    for _ in range(args.runs):
        for flag in (False, True):
            walls[flag].append(engine_run(args.scenarios, flag))
    n_spans = args.scenarios * 5 * 4  # attempt, its call, verdict, its call
    off, on = statistics.median(walls[False]), statistics.median(walls[True])
    print(
        f"{args.scenarios}x5 run, subject + judge, no provider: median wall {off:.2f} s without spans, "
        f"{on:.2f} s with ({n_spans} spans; runs without {[round(w, 2) for w in walls[False]]}, "
        f"with {[round(w, 2) for w in walls[True]]})"
    )
    recording.figure("no_provider_us_per_span", round(noop, 3))
    recording.figure("run_wall_s", {"without_spans": round(off, 3), "with_spans": round(on, 3), "spans": n_spans})
    print(
        f"per-span cost x spans = {noop * n_spans / 1e3:.1f} ms = "
        f"{noop * n_spans / 1e6 / off * 100:.2f}% of the run's wall time"
    )

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    base, spans = per_call_us(args.calls)
    print(f"SDK provider (spans recorded, then dropped): {spans - base:.2f} us per span")
    recording.figure("sdk_provider_us_per_span", round(spans - base, 3))
    recording.write()


if __name__ == "__main__":
    main()
