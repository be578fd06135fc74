"""How `redact` grows with the length of one long run of text: linear, or worse.

    .venv/bin/python benchmarks/redact_scaling.py [--size 32768] [--runs 3]

A stored output can be megabytes of one word (an over-cap answer, a base64 blob). For every unit a
shape can start from (each printable ASCII character, each shape's prefix), the unit is repeated into
a run of `--size` characters and of 8 times that, and `redact` is timed on both (process CPU, the
median of `--runs`). The ratio is printed per unit, worst first: about 8 is linear, 64 is quadratic.
"""

from __future__ import annotations

import argparse
import statistics
import string
import sys
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.redact import redact  # noqa: E402

PREFIXES = [
    "sk-", "pk_", "sk_live_", "bearer ", "Bearer x1", "token=", "token: ", "x-key: ", "authorization: ",
    "cookie: a=", "a://", "a://b:", "/a://b:c", "-----BEGIN PRIVATE KEY-----\n", "hooks.slack.com/services/",
    "eyJ", "eyJabcdefghij.", "AIza", "xoxb-", "ghp_", "github_pat_", "AKIA", "a@", "a@b.", "+1 ", "(555) ",
    "1-", "a1", "x-",
]  # fmt: skip


def cpu(text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        redact(text)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32768)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    recording = Recording("redact_scaling")
    rows = []
    for unit in list(string.printable[:95]) + PREFIXES:
        small = unit * max(1, args.size // len(unit))
        big = unit * max(1, 8 * args.size // len(unit))
        a, b = cpu(small, args.runs), cpu(big, args.runs)
        rows.append((b / max(a, 1e-6), a, b, unit))
    rows.sort(reverse=True)
    print(
        f"redact on one run of a repeated unit: {args.size} vs {8 * args.size} characters, CPU median of {args.runs}"
    )
    print(f"{'ratio':>7} {'small s':>9} {'8x s':>9}  unit")
    for ratio, a, b, unit in rows[:12]:
        print(f"{ratio:7.1f} {a:9.4f} {b:9.4f}  {unit!r}")
    worst = rows[0]
    total = sum(r[2] for r in rows)
    print(
        f"worst ratio {worst[0]:.1f} ({worst[3]!r}); {len(rows)} units; all 8x runs together {total:.2f} s CPU"
    )
    print("linear is ~8, quadratic ~64")
    recording.figure("worst_ratio", round(worst[0], 2))
    recording.figure("worst_unit", worst[3])
    recording.table(
        "worst_units", [{"ratio": round(r, 2), "small_s": a, "big_s": b, "unit": u} for r, a, b, u in rows[:12]]
    )
    recording.write()


if __name__ == "__main__":
    main()
