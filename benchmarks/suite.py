"""The deterministic suite's cost per build, as the demo and the daemon pay it: one process, the three
example builds in a row, each after a warm-up of nothing but imports.

    .venv/bin/python benchmarks/suite.py [--rounds 1]

Prints, per build run: wall seconds, CPU seconds of this process and of its waited-for children (the
import probe of arch.domain-never-imports-dagster is a child), and the five gates that took the most
wall. The first run pays what a process pays once (the import probe, litellm's first import through
the config gates, the first parse of each source file); later runs show the per-build cost the demo's
second and third builds pay. The goal (issue 29) is <= 3 s per build on an idle 2-core machine; `uptime`
is printed before and after, and a figure measured under load says so.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import time
from pathlib import Path

from eval_assets.config import load_build, load_project
from eval_assets.gates import read_registry, run_suite

ROOT = Path(__file__).resolve().parents[1]
BUILDS = ("baseline", "rebuild", "candidate")


def cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="times to run the three builds")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    project = load_project(ROOT)
    import eval_assets.capability.track  # noqa: F401  (what a materializing process has imported already)

    registry = read_registry(ROOT)
    for round_ in range(args.rounds):
        for name in BUILDS:
            manifest = load_build(ROOT / "examples" / "builds" / f"{name}.yaml", project)
            (own0, kids0), wall0 = cpu(), time.perf_counter()
            result = run_suite(
                registry, milestone=manifest.milestone, build=manifest.id, root=ROOT, subject=manifest.subject
            )
            (own1, kids1), wall = cpu(), time.perf_counter() - wall0
            slowest = sorted(result.results, key=lambda r: -r.duration_s)[:5]
            print(
                f"round {round_} {name:>9}: wall {wall:6.2f} s  cpu {own1 - own0:6.2f} s  children "
                f"{kids1 - kids0:5.2f} s  rows {len(result.results)}  blocking {len(result.blocking)}"
            )
            print("    slowest: " + ", ".join(f"{r.gate_id} {r.duration_s:.2f}s" for r in slowest))
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
