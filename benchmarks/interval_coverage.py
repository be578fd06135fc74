"""Coverage of the suite intervals (`eval_assets.stats.suite_intervals`) at 5-200 scenarios.

    .venv/bin/python benchmarks/interval_coverage.py [--reps 2000] [--seed 20261202]

Every replication draws a suite (G scenarios x K repeats) and computes its intervals through
`suite_intervals` and `pass_rate_intervals` (the code reports use); a cell's coverage is the share of
replications whose 95% interval holds the true value, printed with its Monte Carlo SE (±, points of
percent) and, below 93%, its Wilson 95% interval. Conditions:
- suite mean: the mean over the scenario population of each scenario's expected score;
- pass rate: the same for the chance a repeat passes (scored and not below the floor 0.2);
- pass^k: the same for the chance all k repeats pass, k = K;
- per-scenario pass rate: each scenario's own pass rate, coverage over every scenario of every replication.
Shapes: binary (pass/fail, pass rates U(0.55, 0.95)); binary-wide (pass/fail, pass rates U(0.05, 0.95),
a tenth always passing and a tenth always failing, at least one of each); graded (normal sd 0.15 around
skills U(0.3, 0.95), clipped to [0, 1], floor 0.2). Goal: coverage >= 93% in every cell.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from _results import Recording
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decision_calibration import skills_for, wilson  # noqa: E402

from eval_assets.stats import pass_rate_intervals, suite_intervals  # noqa: E402

FLOOR = 0.2
SIZES = (5, 12, 22, 50, 200)
REPEATS = (3, 5)
SHAPES = ("binary", "binary-wide", "graded")
_SD = 0.15


def _population(shape: str, rng: np.random.Generator, reps: int, g: int) -> np.ndarray:
    if shape == "graded":
        return rng.uniform(0.3, 0.95, (reps, g))
    return skills_for(rng, shape, reps, g)  # the binary populations decision_calibration draws


def _truth(shape: str, g: int, k: int) -> tuple[float, float, float]:
    """(suite mean, pass rate, pass^k) of the scenario population, by quadrature over its skills."""
    if shape == "graded":
        skills = np.linspace(0.3, 0.95, 20_001)
        a, b = -skills / _SD, (1.0 - skills) / _SD
        expected = skills * (stats.norm.cdf(b) - stats.norm.cdf(a)) + _SD * (
            stats.norm.pdf(a) - stats.norm.pdf(b)
        )
        expected += stats.norm.sf(b)
        passing = stats.norm.sf((FLOOR - skills) / _SD)
        return float(expected.mean()), float(passing.mean()), float((passing**k).mean())
    low, high = (0.55, 0.95) if shape == "binary" else (0.05, 0.95)
    moment = lambda j: (high ** (j + 1) - low ** (j + 1)) / ((j + 1) * (high - low))  # noqa: E731
    if shape == "binary":
        return moment(1), moment(1), moment(k)
    fixed = max(1, g // 10)
    share = (g - 2 * fixed) / g
    mean = share * moment(1) + fixed / g
    return mean, mean, share * moment(k) + fixed / g


def _cell(shape: str, g: int, k: int, reps: int, rng: np.random.Generator) -> dict[str, float]:
    skill = _population(shape, rng, reps, g)
    if shape == "graded":
        x = np.clip(skill[:, :, None] + _SD * rng.standard_normal((reps, g, k)), 0.0, 1.0)
        passed = x >= FLOOR
        true_rate = stats.norm.sf((FLOOR - skill) / _SD)
    else:
        passed = rng.random((reps, g, k)) < skill[:, :, None]
        x = passed.astype(float)
        true_rate = skill
    means, passes = x.mean(axis=2), passed.sum(axis=2).astype(float)
    n = np.full(passes.shape, float(k))
    truth = _truth(shape, g, k)
    hits = np.zeros(3)
    for r in range(reps):
        s = suite_intervals(means[r], passes[r], n[r])
        for j, (interval, target) in enumerate(
            ((s.mean_interval, truth[0]), (s.pass_rate_interval, truth[1]), (s.pass_hat_k_interval, truth[2]))
        ):
            hits[j] += interval is not None and interval.low - 1e-12 <= target <= interval.high + 1e-12
    low, high = pass_rate_intervals(passes, n)
    per = float(np.mean((low - 1e-12 <= true_rate) & (true_rate <= high + 1e-12)))
    return {
        "mean": hits[0] / reps,
        "pass_rate": hits[1] / reps,
        "pass_k": hits[2] / reps,
        "per_scenario": per,
    }


# the recorded table's columns, in `_cell`'s order: coverage ± Monte Carlo SE, in percent
COLUMNS = ("suite mean", "pass rate", "pass^k", "per scen.")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=2000, help="replications per cell (default 2000)")
    parser.add_argument("--seed", type=int, default=20_261_202)
    args = parser.parse_args()
    print("Conditions: " + __doc__.split("Conditions:")[1].strip())
    print(f"replications per cell: {args.reps}; seed {args.seed} (one child seed per cell); 95% intervals")
    started, cpu = time.perf_counter(), time.process_time()
    recording = Recording("interval_coverage")
    rows = []
    grid = [(shape, g, k) for shape in SHAPES for g in SIZES for k in REPEATS]
    seeds = np.random.SeedSequence(args.seed).spawn(len(grid))
    print(
        f"{'shape':<12} {'scen':>5} {'K':>2} {'suite mean':>11} {'pass rate':>11} {'pass^k':>11} {'per scen.':>11}"
    )
    misses = []
    for (shape, g, k), seed in zip(grid, seeds, strict=True):
        row = _cell(shape, g, k, args.reps, np.random.default_rng(seed))
        cells = []
        for name, value in row.items():
            reps = args.reps * (g if name == "per_scenario" else 1)
            cells.append(f"{100 * value:.1f}±{100 * np.sqrt(value * (1 - value) / reps):.1f}")
            if value < 0.93:
                lo, hi = wilson(value, reps)
                misses.append(f"{shape} {g}x{k} {name}: {value:.1%} [{lo:.1%}, {hi:.1%}] vs goal 93%")
        print(f"{shape:<12} {g:>5} {k:>2} " + " ".join(f"{c:>11}" for c in cells), flush=True)
        rows.append({"shape": shape, "scenarios": g, "repeats": k, **dict(zip(COLUMNS, cells, strict=True))})
    print(f"wall {time.perf_counter() - started:.0f} s, CPU {time.process_time() - cpu:.0f} s")
    print("goals missed (coverage, Wilson 95% interval):" if misses else "every cell covers >= 93%")
    for miss in misses:
        print(f"  {miss}")
    recording.figure("replications", args.reps)
    recording.figure("seed", args.seed)
    recording.table("goals_missed", [{"miss": miss} for miss in misses])
    recording.table("coverage", rows)
    recording.write()


if __name__ == "__main__":
    main()
