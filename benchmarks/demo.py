"""`evaltrack demo` before and after a change, side by side in one run: wall, CPU, and whether its
output and stored rows stay the same.

    .venv/bin/python benchmarks/demo.py --before DIR [--rounds 2]

DIR is another checkout of the project (e.g. `git worktree add /tmp/before main`) run with this
checkout's virtual environment (same lock): its package is put first on PYTHONPATH and it is the
project root. Each round runs the demo once per side, alternating which side goes first, each in a
fresh EVAL_HOME (setup is not timed: the virtual environment exists; a fresh home is what a first
demo after setup pays). Per side: wall seconds and the CPU seconds (user + system) of the demo's
process and everything it waited for, medians over the rounds, and the ratio after / before.

Then, for the last round's two homes: the demo's printed lines with timings and rates blanked
(`· 4 s`, `62.2/s`, `0s left`) and the home's path, and the rows of `scenario_runs`, `judge_verdicts`, `cost_ledger`,
`release_decisions` and `release_decision_reasons` without run ids, timestamps, latencies and
evidence (which names files by run id), compared side by side: counts and whether they match. The
machine's load (`uptime`) is printed before and after; a figure measured under load says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("scenario_runs", "judge_verdicts", "cost_ledger", "release_decisions", "release_decision_reasons")
NOT_COMPARED = frozenset({"run_id", "written_at", "latency_s", "evidence"})
# what differs between two identical demos: step durations, rates, time left
TIMINGS = re.compile(r"· \d+ s\b|\d+(?:\.\d+)?/s\b|\b\d+s left\b")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_demo(checkout: Path, home: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of `evaltrack demo` of `checkout` in the fresh home `home`."""
    env = {
        **os.environ,
        "EVAL_HOME": str(home),
        "EVAL_PROJECT_ROOT": str(checkout),
        "PYTHONPATH": str(checkout),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cpu0, wall0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "eval_assets.cli", "demo"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall, cpu = time.perf_counter() - wall0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"the demo of {checkout} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, cpu, proc.stdout


def stored_rows(home: Path) -> dict[str, list[str]]:
    """Each compared table's rows (compared columns only) as sorted JSON lines."""
    import duckdb

    con = duckdb.connect(str(home / "warehouse" / "warehouse.duckdb"), read_only=True)
    try:
        out = {}
        for table in TABLES:
            columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in NOT_COMPARED]
            rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            out[table] = sorted(json.dumps(list(row), default=str) for row in rows)
        return out
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (the 'before' side)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": ROOT}
    print(f"load before: {uptime()}")
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    last: dict[str, tuple[Path, str]] = {}
    with tempfile.TemporaryDirectory(prefix="evaltrack-demo-bench-") as tmp:
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                home = Path(tmp) / f"{name}-{round_}"
                wall, cpu, stdout = run_demo(sides[name], home)
                figures[name].append((wall, cpu))
                last[name] = (home, stdout)
                print(f"round {round_} {name:>6}: wall {wall:6.1f} s  cpu {cpu:6.1f} s   ({uptime()})")
        print()
        print(f"{'':8} {'wall s (median)':>16} {'cpu s (median)':>16}")
        med = {
            n: (statistics.median(w for w, _ in f), statistics.median(c for _, c in f))
            for n, f in figures.items()
        }
        for name, (wall, cpu) in med.items():
            print(f"{name:8} {wall:16.1f} {cpu:16.1f}")
        print(
            f"{'ratio':8} {med['after'][0] / med['before'][0]:16.2f} {med['after'][1] / med['before'][1]:16.2f}"
        )
        print()
        shown = {
            n: TIMINGS.sub("·", out.replace(str(home), "$EVAL_HOME")).splitlines()
            for n, (home, out) in last.items()
        }
        same = shown["before"] == shown["after"]
        print(
            f"demo output (timings blanked): {len(shown['after'])} lines, {'same' if same else 'DIFFERENT'}"
        )
        if not same:
            for a, b in zip(shown["before"], shown["after"], strict=False):
                if a != b:
                    print(f"  before: {a}\n  after:  {b}")
        rows = {n: stored_rows(home) for n, (home, _) in last.items()}
        for table in TABLES:
            b, a = rows["before"][table], rows["after"][table]
            print(f"{table:26} before {len(b):5}  after {len(a):5}  {'identical' if a == b else 'DIFFERENT'}")
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
