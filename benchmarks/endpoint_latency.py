"""The agent endpoint's connect latency while a burst of agent attempts runs (issue 47).

    .venv/bin/python benchmarks/endpoint_latency.py [--attempts 40] [--old REV] [--repeats 1]

For each design (this checkout, and the checkout at REV, default `main`, in a temporary git worktree)
and each load (idle; a CPU hog on every core), a fresh process starts ATTEMPTS agent attempts at once
on the refund scenario (the example's tool loop over an OpenAI client with the SDK's defaults: a 5 s
connect timeout, no retries) and, from a thread of its own, probes the endpoint all the while: connect,
send a request with an unknown token, read the 401 status line. Prints p50/p99/max of that latency and
how many attempts failed, and writes benchmarks/results/endpoint_latency.json (machine, load, commit,
command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _results import Recording

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


async def burst_agent(task: Any) -> dict[str, Any]:
    """A tool loop over an OpenAI client as a new user builds it (the SDK's timeouts, no retries);
    its own, so the old checkout runs the same agent."""
    import httpx
    from openai import AsyncOpenAI

    key = task.api_key
    client = AsyncOpenAI(
        base_url=task.base_url,
        api_key=key,
        max_retries=0,
        http_client=httpx.AsyncClient(trust_env=False),
    )
    messages: list[dict[str, Any]] = list(task.messages)
    async with client:
        for _ in range(6):
            reply = await client.chat.completions.create(
                model=task.model, messages=messages, **({"tools": task.tools} if task.tools else {})
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return {"output": message.content or ""}
            messages.append(message.model_dump(exclude_none=True))
            messages += [{"role": "tool", "tool_call_id": c.id, "content": "{}"} for c in message.tool_calls]
    return {"output": "no answer within 6 calls"}


def _probe(port: int) -> float:
    """Seconds to connect, send a request with an unknown token and read the status line."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        conn.recv(64)
    return time.perf_counter() - started


def child(root: Path, attempts: int, journal: str) -> None:
    """One burst in this process against the checkout at `root`; prints its figures as JSON."""
    sys.path[:0] = [str(root)]
    sys.path += [str(HERE), str(ROOT / "tests")]  # burst_agent and the burst, whichever checkout runs it
    from agent_burst import burst

    engine, build, scenario = burst(root, journal, attempts, "endpoint_latency:burst_agent")
    samples: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            endpoint = engine._agents
            url = endpoint.base_url if endpoint is not None else ""
            if url:
                try:
                    samples.append(_probe(int(url.rsplit(":", 1)[1].split("/")[0])))
                except OSError:
                    pass  # the endpoint stopped between bursts of sessions
            time.sleep(0.02)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    started = time.perf_counter()
    results = asyncio.run(engine.run_subjects(build, [scenario]))
    seconds = time.perf_counter() - started
    done.set()
    prober.join()
    failed = [f"{r.call.error_kind}: {r.call.error}" for r in results if r.call.status != "ok"]
    print(json.dumps({"samples": samples, "failed": failed, "seconds": seconds}))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _burst(root: Path, attempts: int, hogs: bool) -> dict[str, Any]:
    procs = (
        [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        if hogs
        else []
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(root),
                    "--attempts",
                    str(attempts),
                    "--journal",
                    str(Path(tmp) / "j.sqlite"),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
    finally:
        for p in procs:
            p.kill()
            p.wait()
    data = json.loads(out.stdout.strip().splitlines()[-1])
    samples = data["samples"]
    return {
        "probes": len(samples),
        "p50_ms": None if not samples else round(1000 * _quantile(samples, 0.5), 1),  # type: ignore[operator]
        "p99_ms": None if not samples else round(1000 * _quantile(samples, 0.99), 1),  # type: ignore[operator]
        "max_ms": None if not samples else round(1000 * max(samples), 1),
        "attempts": attempts,
        "failed_attempts": len(data["failed"]),
        "failures": sorted(set(data["failed"]))[:3],
        "seconds": round(data["seconds"], 1),
    }


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=40)
    parser.add_argument("--old", default="main", help="the revision of the old design ('' : none)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child")
    parser.add_argument("--journal")
    args = parser.parse_args()
    if args.child:
        child(Path(args.child), args.attempts, args.journal)
        return
    recording = Recording("endpoint_latency")
    designs = [("new (this checkout)", ROOT, _git("rev-parse", "HEAD"))]
    worktree = None
    if args.old:
        worktree = Path(tempfile.mkdtemp(prefix="endpoint-latency-old-"))
        _git("worktree", "add", "--detach", str(worktree), args.old)
        designs.append((f"old ({args.old})", worktree, _git("rev-parse", args.old)))
    rows = []
    try:
        for _ in range(args.repeats):
            for load in ("idle", "cpu hog on every core"):
                for name, root, commit in designs:
                    row = {
                        "design": name,
                        "commit": commit,
                        "load": load,
                        **_burst(root, args.attempts, load != "idle"),
                    }
                    rows.append(row)
                    print(
                        f"{name:<22} {load:<22} connect p50 {row['p50_ms']} ms · p99 {row['p99_ms']} ms · "
                        f"max {row['max_ms']} ms ({row['probes']} probes) · "
                        f"{row['failed_attempts']}/{row['attempts']} attempts failed · {row['seconds']} s",
                        flush=True,
                    )
    finally:
        if worktree is not None:
            _git("worktree", "remove", "--force", str(worktree))
    recording.table("bursts", rows)
    recording.write()


if __name__ == "__main__":
    main()
