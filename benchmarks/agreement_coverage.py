"""Coverage of the judge-human agreement interval (`eval_assets.stats.cluster_bootstrap_alpha`, the
reference the `judge_agreement` views are tested against) at 10, 30 and 100 scenarios.

    .venv/bin/python benchmarks/agreement_coverage.py [--reps 1000] [--seed 20261204]

Generative model (one replication = one set of reviewed outputs): G scenarios, each with m outputs
reviewed (m uniform on 1..8, so scenarios weigh unequally). Scenario level u ~ N(0, 1), output quality
t = u + N(0, 0.5^2); the human scores h = t + N(0, 0.4^2); the judge scores j = t + b + c + N(0, 0.4^2)
with a constant bias b = 0.2 and a scenario-specific disagreement c ~ N(0, 0.4^2) shared by every output
of the scenario (what makes pairs of one scenario dependent). Shapes: `continuous` (as drawn) and
`5-level` (both scores cut into five levels at the quantiles 0.1, 0.3, 0.6, 0.85 of t and mapped to
0, 0.25, .., 1, as a 1-5 rubric criterion). The true alpha is the population value, computed on
2,000,000 scenarios of the same model (continuous: also in closed form, printed beside it).

A cell's coverage is the share of replications whose 95% interval holds the true alpha, with its Monte
Carlo SE; "true below" / "true above": the share of intervals lying wholly above / below the truth.
`views` is the interval the warehouse views compute (bias-corrected t over the scenario bootstrap);
the other columns are what was measured against it, from the same replicates: `percentile` (the
replicates' 2.5% and 97.5% quantiles), `rows` (the views' interval resampling pairs instead of
scenarios: what the views must not do) and `BCa` (bias-corrected and accelerated, jackknife over
scenarios). Replications whose alpha is undefined count as misses. Goal: >= 93% (the project's bar
for intervals) in every cluster cell.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _results import Recording
from scipy import special

from eval_assets.stats import (
    AGREEMENT_N_BOOT,
    AGREEMENT_SEED,
    alpha_from_sums,
    cluster_bootstrap_alpha,
    cluster_sums,
    draw_matrix,
)

SIZES = (10, 30, 100)
SHAPES = ("continuous", "5-level")
BIAS, SD_SCENARIO, SD_OUTPUT, SD_HUMAN, SD_JUDGE, SD_CLUSTER = 0.2, 1.0, 0.5, 0.4, 0.4, 0.4
CUTS = np.array([0.1, 0.3, 0.6, 0.85])
MAX_M = 8


def _draw(rng: np.random.Generator, g: int, shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = rng.integers(1, MAX_M + 1, size=g)
    cluster = np.repeat(np.arange(g), m)
    u = rng.normal(0.0, SD_SCENARIO, g)[cluster]
    c = rng.normal(0.0, SD_CLUSTER, g)[cluster]
    t = u + rng.normal(0.0, SD_OUTPUT, len(cluster))
    h = t + rng.normal(0.0, SD_HUMAN, len(cluster))
    j = t + BIAS + c + rng.normal(0.0, SD_JUDGE, len(cluster))
    if shape == "5-level":
        sd_t = math.hypot(SD_SCENARIO, SD_OUTPUT)
        edges = np.quantile(rng.normal(0.0, sd_t, 1_000_000), CUTS)
        h = np.searchsorted(edges, h) / 4.0
        j = np.searchsorted(edges, j) / 4.0
    return j, h, cluster


def _true_alpha(shape: str, seed: int) -> float:
    j, h, _ = _draw(np.random.default_rng([seed, 1, SHAPES.index(shape)]), 2_000_000, shape)
    sums = np.array([len(j), j.sum(), h.sum(), (j * j).sum(), (h * h).sum(), ((j - h) ** 2).sum()])
    return float(alpha_from_sums(sums))


def _closed_form() -> float:
    var_t = SD_SCENARIO**2 + SD_OUTPUT**2
    msd = BIAS**2 + SD_CLUSTER**2 + SD_JUDGE**2 + SD_HUMAN**2
    expected = (var_t + SD_CLUSTER**2 + SD_JUDGE**2) + (var_t + SD_HUMAN**2) + BIAS**2 / 2
    return 1.0 - msd / expected


def _bca(j: np.ndarray, h: np.ndarray, cluster: np.ndarray) -> tuple[float, float] | None:
    """BCa 95% from the views' replicates (same draws), acceleration from the leave-one-scenario-out
    jackknife."""
    _, sums = cluster_sums(j, h, cluster)
    g, total = len(sums), sums.sum(axis=0)
    point = float(alpha_from_sums(total))
    if g < 3 or math.isnan(point):
        return None
    idx = draw_matrix(AGREEMENT_SEED, AGREEMENT_N_BOOT, g)
    flat = (np.arange(AGREEMENT_N_BOOT)[:, None] * g + idx).ravel()
    counts = np.bincount(flat, minlength=AGREEMENT_N_BOOT * g).reshape(AGREEMENT_N_BOOT, g)
    reps = alpha_from_sums(counts.astype(float) @ sums)
    reps = reps[~np.isnan(reps)]
    z0 = special.ndtri((np.sum(reps < point) + 0.5 * np.sum(reps == point)) / len(reps))
    jack = alpha_from_sums(total[None, :] - sums)
    jack = jack[~np.isnan(jack)]
    dev = jack.mean() - jack
    accel = np.sum(dev**3) / (6.0 * np.sum(dev**2) ** 1.5) if np.sum(dev**2) > 0 else 0.0
    z = special.ndtri(np.array([0.025, 0.975]))
    probs = special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    if not np.all(np.isfinite(probs)):
        return None
    low, high = np.quantile(reps, probs)
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261204)
    args = parser.parse_args()
    start = time.perf_counter()
    recording = Recording("agreement_coverage")
    rows = []
    print(
        f"replications {args.reps} per cell, bootstrap {AGREEMENT_N_BOOT} replicates (seed {AGREEMENT_SEED}), "
        f"95% interval, outputs per scenario U{{1..{MAX_M}}}, bias {BIAS}, sd scenario {SD_SCENARIO}, "
        f"output {SD_OUTPUT}, human {SD_HUMAN}, judge {SD_JUDGE}, scenario disagreement {SD_CLUSTER}; "
        f"benchmark seed {args.seed}"
    )
    print(
        "| shape | true alpha | scenarios | pairs (mean) | mean alpha | views: coverage | true below | true above "
        "| mean width | percentile: coverage | width | rows: coverage | BCa: coverage |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        truth = _true_alpha(shape, args.seed)
        label = f"{truth:.4f}" + (f" (closed form {_closed_form():.4f})" if shape == "continuous" else "")
        for g in SIZES:
            rng = np.random.default_rng([args.seed, g, SHAPES.index(shape)])
            hit = below = above = hit_rows = hit_bca = hit_pct = 0
            widths, widths_pct, alphas, pairs = [], [], [], []
            for _ in range(args.reps):
                j, h, cluster = _draw(rng, g, shape)
                got = cluster_bootstrap_alpha(j, h, cluster)
                rows = cluster_bootstrap_alpha(j, h, cluster, resample="rows")
                pct = cluster_bootstrap_alpha(j, h, cluster, interval="percentile")
                if pct.low is not None and pct.high is not None:
                    hit_pct += pct.low <= truth <= pct.high
                    widths_pct.append(pct.high - pct.low)
                pairs.append(len(j))
                if got.alpha is not None:
                    alphas.append(got.alpha)
                if got.low is not None and got.high is not None:
                    widths.append(got.high - got.low)
                    hit += got.low <= truth <= got.high
                    below += truth < got.low
                    above += truth > got.high
                if rows.low is not None and rows.high is not None:
                    hit_rows += rows.low <= truth <= rows.high
                if (bca := _bca(j, h, cluster)) is not None:
                    hit_bca += bca[0] <= truth <= bca[1]
            cov = hit / args.reps
            se = math.sqrt(cov * (1 - cov) / args.reps)
            cov_rows = hit_rows / args.reps
            print(
                f"| {shape} | {label} | {g} | {np.mean(pairs):.1f} | {np.mean(alphas):.4f} | "
                f"{100 * cov:.1f}% ± {100 * se:.1f} | {100 * below / args.reps:.1f}% | "
                f"{100 * above / args.reps:.1f}% | {np.mean(widths):.3f} | {100 * hit_pct / args.reps:.1f}% | "
                f"{np.mean(widths_pct):.3f} | {100 * cov_rows:.1f}% | "
                f"{100 * hit_bca / args.reps:.1f}% |"
            )
            rows.append(
                {"shape": shape, "true_alpha": round(truth, 4), "scenarios": g, "pairs_mean": round(float(np.mean(pairs)), 1),
                 "mean_alpha": round(float(np.mean(alphas)), 4), "coverage": round(cov, 4), "coverage_se": round(se, 4),
                 "true_below": below / args.reps, "true_above": above / args.reps, "mean_width": round(float(np.mean(widths)), 3),
                 "percentile_coverage": hit_pct / args.reps, "percentile_width": round(float(np.mean(widths_pct)), 3),
                 "rows_coverage": cov_rows, "bca_coverage": hit_bca / args.reps}
            )
    print(f"runtime {time.perf_counter() - start:.1f} s")
    recording.figure("replications", args.reps)
    recording.figure("seed", args.seed)
    recording.table("coverage", rows)
    recording.write()


if __name__ == "__main__":
    main()
