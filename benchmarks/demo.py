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
`release_decisions` and `release_decision_reasons` without the columns two equal runs
write differently (`eval_assets.warehouse.run_varying`: run ids, timestamps, measured seconds, the
evidence, which names files by run id), compared side by side: counts and whether they match on the
columns both sides have (a column only one side has, a schema change, is named with whether it holds
anything but NULL). The
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

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("scenario_runs", "judge_verdicts", "cost_ledger", "release_decisions", "release_decision_reasons")
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


def stored_rows(home: Path) -> dict[str, dict[str, list[object]]]:
    """Each compared table's columns (compared columns only), each a list of its values in row order
    (the rows sorted by all their values)."""
    import duckdb

    from eval_assets.warehouse import run_varying

    con = duckdb.connect(str(home / "warehouse" / "warehouse.duckdb"), read_only=True)
    try:
        out = {}
        for table in TABLES:
            described = con.execute(f"DESCRIBE {table}").fetchall()
            columns = [name for name, kind, *_ in described if not run_varying(name, kind)]
            rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            ordered = sorted(rows, key=lambda row: json.dumps(list(row), default=str))
            out[table] = {c: [row[i] for row in ordered] for i, c in enumerate(columns)}
        return out
    finally:
        con.close()


def compare_table(before: dict[str, list[object]], after: dict[str, list[object]]) -> str:
    """'identical' when the columns both sides have hold the same rows, else 'DIFFERENT'; a column one
    side adds (a schema change) is named, with whether it holds anything but NULL."""

    def rows(side: dict[str, list[object]], columns: list[str]) -> list[str]:
        n = len(next(iter(side.values()), []))
        return sorted(json.dumps([side[c][i] for c in columns], default=str) for i in range(n))

    common = [c for c in before if c in after]
    verdict = "identical" if rows(before, common) == rows(after, common) else "DIFFERENT"
    for name, side, other in (("before", before, after), ("after", after, before)):
        for column in (c for c in side if c not in other):
            filled = sum(v is not None for v in side[column])
            verdict += f"; only {name} has {column} ({'all NULL' if not filled else f'{filled} set'})"
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (the 'before' side)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": ROOT}
    recording = Recording("demo")
    revisions = {
        name: subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        .stdout.strip() or str(path)
        for name, path in sides.items()
    }
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
        recording.table(
            "medians",
            [
                {"side": n, "commit": revisions[n], "wall_s": round(w, 1), "cpu_s": round(c, 1)}
                for n, (w, c) in med.items()
            ],
        )
        recording.figure("wall_ratio", round(med["after"][0] / med["before"][0], 3))
        recording.figure("cpu_ratio", round(med["after"][1] / med["before"][1], 3))
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
        recording.figure("output_same", same)
        rows = {n: stored_rows(home) for n, (home, _) in last.items()}
        # the printed output first (lines, timings blanked), then each table (rows)
        compared = [
            {
                "table": "(printed output)",
                "before": len(shown["before"]),
                "after": len(shown["after"]),
                "rows": "identical" if same else "DIFFERENT",
            }
        ]
        for table in TABLES:
            b, a = rows["before"][table], rows["after"][table]
            count_b, count_a = (len(next(iter(t.values()), [])) for t in (b, a))
            verdict = compare_table(b, a)
            print(f"{table:26} before {count_b:5}  after {count_a:5}  {verdict}")
            compared.append({"table": table, "before": count_b, "after": count_a, "rows": verdict})
        recording.table("stored_rows", compared)
    recording.write()
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
