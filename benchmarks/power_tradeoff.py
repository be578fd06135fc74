"""Trade-off curves of the release decision: the power goals issue 25 misses against the A/A budget.

    nice -n 5 .venv/bin/python benchmarks/power_tradeoff.py [--reps 1000] [--seed 20261204] [--workers 2]

Two knobs, each a one-parameter family that contains the rule, run through `eval_assets.stats.evaluate`
on the same draws as `benchmarks/decision_calibration.py` (its `cell`; common random numbers: every
variant sees the same seeds, cell by cell, so differences between variants are not Monte Carlo noise
between draws):

- **own-variance tail q**: a scenario noisier than its moderated posterior keeps its own variance only
  when its variance is an outlier of the prior, P(F(d, d0) >= s²/s0²) < q. q = 1 is the rule (always);
  smaller q moderates more scenarios, which raises the power of the collapse and concentrated tests
  and lets a hypervariable scenario look significant under an unchanged build.
- **weights** of the blocking family (weighted Holm): more weight on the concentrated-drop test, taken
  from the mean-drop-beyond-band test or the collapse rule. Holm controls the family-wise error for
  any fixed weights, so A/A cannot leave the budget; the price is the power of the tests that give up
  weight.

Printed per variant: the worst A/A block and flag rate over every cell (and where), the concentrated-drop
power at 22 x 5 per graded shape (goal 80%), the collapse power at 3 repeats per graded shape (goal 95%),
and the lowest 3x-band power (goal 90%). Pass/fail shapes are left out: their per-scenario tests are exact,
the moderated variance does not enter them (docs/methods.md, "Pass/fail scores").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from _results import Recording

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decision_calibration import cell, rate  # noqa: E402

from eval_assets.stats import Budget  # noqa: E402

GRADED = ("normal", "ceiling", "discrete", "t3", "heterogeneous", "judge", "missing", "levels3")
SIZES = (12, 22, 200)
REPEATS = (3, 5)


@dataclass(frozen=True)
class Variant:
    name: str
    budget: Budget
    own_variance_tail: float = 1.0


VARIANTS = (
    Variant("rule (q=1, weights .30/.20/.10/.05/.35)", Budget()),
    Variant("q=0.50", Budget(), 0.50),
    Variant("q=0.20", Budget(), 0.20),
    Variant("q=0.10", Budget(), 0.10),
    Variant("q=0.05", Budget(), 0.05),
    Variant("weights .20/.30/.10/.05/.35", Budget(w_mean=0.20, w_concentrated=0.30)),
    Variant("weights .25/.30/.10/.05/.30", Budget(w_mean=0.25, w_concentrated=0.30, w_collapse=0.30)),
    Variant("weights .15/.40/.10/.05/.30", Budget(w_mean=0.15, w_concentrated=0.40, w_collapse=0.30)),
)


@dataclass(frozen=True)
class Job:
    variant: int
    model: str
    m: int
    k: int
    reps: int
    seed: np.random.SeedSequence


def run(job: Job) -> tuple[Job, dict[str, float]]:
    v = VARIANTS[job.variant]
    rng = np.random.default_rng(job.seed)
    row = cell(rng, job.model, job.m, job.k, job.reps, budget=v.budget, own_variance_tail=v.own_variance_tail)
    return job, row


def summary(v: Variant, rows: dict[tuple[str, int, int], dict[str, float]], reps: int) -> Iterable[str]:
    def worst(key: str) -> str:
        (model, m, k), r = max(rows.items(), key=lambda item: item[1][key])
        return f"{rate(r[key], reps)} ({m}x{k} {model})"

    yield f"{v.name}"
    yield f"  A/A block, worst cell: {worst('aa_block')}; A/A flag, worst cell: {worst('aa_flag')}"
    conc = [f"{model} {rate(rows[(model, 22, 5)]['concentrated'], reps)}" for model in GRADED]
    yield "  concentrated 22x5 (goal 80%): " + ", ".join(conc)
    collapse = [
        f"{model} {min(rows[(model, m, 3)]['collapse'] for m in SIZES) * 100:.1f}" for model in GRADED
    ]
    yield "  collapse at 3 repeats, lowest over sizes (goal 95%): " + ", ".join(collapse)
    (model, m, k), r = min(rows.items(), key=lambda item: item[1]["band3"])
    yield f"  3x band, lowest cell (goal 90%): {rate(r['band3'], reps)} ({m}x{k} {model})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=1000, help="replications per cell (default 1000)")
    parser.add_argument("--seed", type=int, default=20_261_204)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cells = [(model, m, k) for model in GRADED for m in SIZES for k in REPEATS]
    seeds = np.random.SeedSequence(args.seed).spawn(len(cells))
    jobs = [
        Job(i, model, m, k, args.reps, seed)
        for i in range(len(VARIANTS))
        for (model, m, k), seed in zip(cells, seeds, strict=True)
    ]
    print(
        f"replications per cell: {args.reps} (Monte Carlo SE as ±, points of percent); seed {args.seed}, one "
        f"child seed per cell shared by every variant; shapes {', '.join(GRADED)}; sizes {SIZES} x repeats "
        f"{REPEATS}; conditions as benchmarks/decision_calibration.py; load average {os.getloadavg()}",
        flush=True,
    )
    start, cpu = time.perf_counter(), time.process_time()
    recording = Recording("power_tradeoff")
    results: dict[int, dict[tuple[str, int, int], dict[str, float]]] = {i: {} for i in range(len(VARIANTS))}
    with ProcessPoolExecutor(args.workers) as pool:
        for job, row in pool.map(run, jobs, chunksize=4):
            results[job.variant][(job.model, job.m, job.k)] = row
    children = os.times()
    for i, v in enumerate(VARIANTS):
        print("\n".join(summary(v, results[i], args.reps)), flush=True)
        recording.table(
            f"variant_{i}",
            [{"shape": model, "scenarios": m, "repeats": k, **row} for (model, m, k), row in sorted(results[i].items())],
        )
    wall = time.perf_counter() - start
    used = time.process_time() - cpu + children.children_user + children.children_system
    print(f"wall {wall:.0f} s, CPU {used:.0f} s; load average {os.getloadavg()}")
    recording.figure("variants", [str(v) for v in VARIANTS])
    recording.figure("replications", args.reps)
    recording.figure("seed", args.seed)
    recording.write()


if __name__ == "__main__":
    main()
