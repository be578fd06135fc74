"""The deterministic suite's cost per build, as the demo and the daemon pay it: one process, the three
example builds in a row, each after a warm-up of nothing but imports; with `--before DIR`, the same
for another checkout, side by side in one run.

    .venv/bin/python benchmarks/suite.py [--rounds 1] [--before DIR]

Prints, per build run: wall seconds, CPU seconds of the process and of its waited-for children, and
the five gates that took the most wall. The first run pays what a process pays once (litellm's first
import through the config gates, the first parse of each source file); later runs show the per-build cost the demo's
second and third builds pay. DIR is another checkout (e.g. `git worktree add /tmp/before main`), run
with this checkout's virtual environment: each side runs in a fresh process of its own, alternating
which goes first per round, and the medians per build and their ratio (after / before) are printed.
The goal (issue 29) is <= 3 s per build on an idle 2-core machine; `uptime` is printed before and
after, and a figure measured under load says so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
BUILDS = ("baseline", "rebuild", "candidate")


def cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def one_side(rounds: int) -> list[dict[str, object]]:
    """Run the three builds' suites `rounds` times in this process (the checkout on sys.path)."""
    from eval_assets.config import load_build, load_project
    from eval_assets.gates import read_registry, run_suite
    from eval_assets.home import project_root

    root = project_root()
    project = load_project(root)
    import eval_assets.capability.track  # noqa: F401  (what a materializing process has imported already)

    registry = read_registry(root)
    out: list[dict[str, object]] = []
    for round_ in range(rounds):
        for name in BUILDS:
            manifest = load_build(root / "examples" / "builds" / f"{name}.yaml", project)
            (own0, kids0), wall0 = cpu(), time.perf_counter()
            result = run_suite(
                registry, milestone=manifest.milestone, build=manifest.id, root=root, subject=manifest.subject
            )
            (own1, kids1), wall = cpu(), time.perf_counter() - wall0
            slowest = sorted(result.results, key=lambda r: -r.duration_s)[:5]
            out.append(
                {
                    "round": round_,
                    "build": name,
                    "wall": wall,
                    "cpu": own1 - own0,
                    "children": kids1 - kids0,
                    "rows": len(result.results),
                    "blocking": len(result.blocking),
                    "statuses": sorted((r.gate_id, r.status) for r in result.results),
                    "slowest": [(r.gate_id, r.duration_s) for r in slowest],
                }
            )
    return out


def run_side(checkout: Path, rounds: int, home: Path) -> list[dict[str, object]]:
    env = {
        **os.environ,
        "EVAL_HOME": str(home),
        "EVAL_PROJECT_ROOT": str(checkout),
        "PYTHONPATH": str(checkout),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--side", "--rounds", str(rounds)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the suite of {checkout} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def show(name: str, runs: list[dict[str, object]]) -> None:
    for r in runs:
        print(
            f"{name:>6} round {r['round']} {r['build']:>9}: wall {r['wall']:6.2f} s  cpu {r['cpu']:6.2f} s  "
            f"children {r['children']:5.2f} s  rows {r['rows']}  blocking {r['blocking']}"
        )
        print("    slowest: " + ", ".join(f"{g} {d:.2f}s" for g, d in r["slowest"]))  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="times to run the three builds per process")
    parser.add_argument("--before", type=Path, help="another checkout, measured side by side")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(one_side(args.rounds)))
        return
    recording = Recording("suite")
    print(f"load before: {uptime()}")
    sides = {"after": ROOT} if args.before is None else {"before": args.before.resolve(), "after": ROOT}
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="evaltrack-suite-bench-") as tmp:
        passes = 2 if args.before is not None else 1
        for n in range(passes):
            for name in list(sides) if n % 2 == 0 else list(reversed(sides)):
                got = run_side(sides[name], args.rounds, Path(tmp) / f"{name}-{n}")
                show(name, got)
                runs[name] += got
    recording.table("runs", [{"side": name, **r} for name, got in runs.items() for r in got])
    if args.before is not None:
        print()
        print(
            f"{'build':>9} {'before wall':>12} {'after wall':>11} {'before cpu':>11} {'after cpu':>10} {'cpu ratio':>10}"
        )
        for name in BUILDS:
            row = {
                side: (
                    statistics.median(float(r["wall"]) for r in runs[side] if r["build"] == name),  # type: ignore[arg-type]
                    statistics.median(
                        float(r["cpu"]) + float(r["children"]) for r in runs[side] if r["build"] == name
                    ),  # type: ignore[arg-type]
                )
                for side in sides
            }
            print(
                f"{name:>9} {row['before'][0]:12.2f} {row['after'][0]:11.2f} {row['before'][1]:11.2f} "
                f"{row['after'][1]:10.2f} {row['after'][1] / row['before'][1]:10.2f}"
            )
        same = [r["statuses"] for r in runs["before"]] == [r["statuses"] for r in runs["after"]]
        print(f"every gate's status the same on both sides: {'yes' if same else 'NO'}")
        recording.figure("statuses_same", same)
    print(f"load after: {uptime()}")
    recording.write()


if __name__ == "__main__":
    main()
