"""Intervals that hold at small suites: suite means, per-scenario pass rates and pass^k (docs/methods.md).

The unit of inference is the scenario (docs/methods.md: unit of inference), so a suite figure's interval
is taken over the scenarios' own estimates with a t quantile on G - 1 degrees of freedom (G scenarios;
the few-cluster rule of Cameron & Miller 2015), never over pooled repeats. A scenario's pass rate from
its K repeats is binomial and gets the exact Clopper-Pearson interval, which covers at least `level` at
every pass rate (Wilson and Wald undercover at K = 3-5 near 0 and 1); suite pass rates and pass^k (the
one definition: `_reliability`), means of proportions, get a Korn-Graubard interval (`proportion_interval`). Coverage of each is measured by
`benchmarks/interval_coverage.py` at 5-200 scenarios. A repeat "passes" when it is scored and not below
the rubric floor; a rubric without a floor has no pass rate (None, never a default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from ._bootstrap import Interval
from ._reliability import pass_figures


@dataclass(frozen=True)
class SuiteIntervals:
    """A build's suite figures with their intervals (None where the data cannot support one)."""

    level: float
    n_scenarios: int
    mean: float | None
    mean_interval: Interval | None
    pass_rate: float | None
    pass_rate_interval: Interval | None
    k: int | None  # the k of pass^k: the smallest repeat count over the scenarios
    pass_hat_k: float | None
    pass_hat_k_interval: Interval | None


def suite_mean_interval(values: np.ndarray, level: float = 0.95) -> Interval | None:
    """The mean of per-scenario `values` with a t interval on G - 1 df, clipped to [0, 1].

    None with fewer than two scenarios; every value equal gives that value (method 'degenerate').
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return None
    mean = float(v.mean())
    if np.ptp(v) == 0.0:
        return Interval(mean, mean, "degenerate (every scenario equal)")
    half = float(special.stdtrit(len(v) - 1, 0.5 + level / 2.0)) * float(v.std(ddof=1)) / np.sqrt(len(v))
    return Interval(max(0.0, mean - half), min(1.0, mean + half), f"t on {len(v) - 1} df over scenarios")


def proportion_interval(values: np.ndarray, trials: float, level: float = 0.95) -> Interval | None:
    """The mean of per-scenario proportions `values` with a Korn-Graubard interval (Korn & Graubard 1998).

    Clopper-Pearson on an effective sample size: n* = p(1 - p) / v with v = s^2 / G the variance of the
    mean over scenarios, capped at `trials` (the Bernoulli trials behind the mean: G K repeats for a pass
    rate, G for pass^K) and scaled by (z / t(G - 1))^2 for the few scenarios; x* = p n*. Unlike the t
    interval it does not shrink to a point when every scenario passed every repeat (a pass rate near 1
    seen as exactly 1 at small G), which is where the t interval covered 41-92%. None for G < 2.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    g = len(v)
    if g < 2:
        return None
    p = float(v.mean())
    var = float(v.var(ddof=1)) / g
    n_star = min(float(trials), p * (1.0 - p) / var) if var > 0 else float(trials)
    z = float(special.ndtri(0.5 + level / 2.0))
    n_star *= (z / float(special.stdtrit(g - 1, 0.5 + level / 2.0))) ** 2
    x_star = p * n_star
    tail = (1.0 - level) / 2.0
    low = float(stats.beta.ppf(tail, x_star, n_star - x_star + 1.0)) if x_star > 0 else 0.0
    high = float(stats.beta.ppf(1.0 - tail, x_star + 1.0, n_star - x_star)) if x_star < n_star else 1.0
    return Interval(low, high, f"Korn-Graubard (effective n {n_star:.1f}, {g} scenarios)")


def pass_rate_intervals(
    passes: np.ndarray, n: np.ndarray, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson (exact) interval of each scenario's pass rate from `passes` of `n` repeats.

    (low, high) arrays; NaN where n is 0. Covers at least `level` whatever the true pass rate.
    """
    x = np.asarray(passes, dtype=float)
    m = np.asarray(n, dtype=float)
    tail = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x > 0, stats.beta.ppf(tail, x, m - x + 1.0), 0.0)
        high = np.where(x < m, stats.beta.ppf(1.0 - tail, x + 1.0, m - x), 1.0)
    bad = ~(m > 0)
    return np.where(bad, np.nan, low), np.where(bad, np.nan, high)


def suite_intervals(
    means: np.ndarray,
    passes: np.ndarray | None,
    n: np.ndarray,
    level: float = 0.95,
    *,
    failed: np.ndarray | None = None,
    unknown: np.ndarray | None = None,
) -> SuiteIntervals:
    """The suite mean, pass rate and pass^k of one build, each with its interval over scenarios.

    `means` and `n` are per scenario (scored repeats); `passes` None: the rubric has no floor, so there
    is no pass rate and no pass^k. pass^k is the share of scenarios whose every repeat passed, by the one
    definition (`_reliability.pass_figures`) from each scenario's repeats passed, `failed` (default: its
    scored repeats that did not pass) and `unknown` (default none): None when one is unknown. k is the
    smallest repeat count over the scenarios.
    """
    means = np.asarray(means, dtype=float)
    n = np.asarray(n, dtype=float)
    scored = np.isfinite(means) & (n > 0)
    mean_ci = suite_mean_interval(means[scored], level)
    mean = float(means[scored].mean()) if scored.any() else None
    if passes is None or not scored.any():
        return SuiteIntervals(level, int(scored.sum()), mean, mean_ci, None, None, None, None, None)
    passes = np.asarray(passes, dtype=float)
    c, m = passes[scored], n[scored]
    rate = c / m
    fails = n - passes if failed is None else np.asarray(failed, dtype=float)
    unknowns = np.zeros_like(n) if unknown is None else np.asarray(unknown, dtype=float)
    repeats = passes + fails + unknowns
    tried = repeats > 0
    _at, hat = pass_figures(passes[tried], fails[tried], unknowns[tried])
    known = bool(np.all(np.isfinite(hat)))
    return SuiteIntervals(
        level=level,
        n_scenarios=int(scored.sum()),
        mean=mean,
        mean_interval=mean_ci,
        pass_rate=float(rate.mean()),
        pass_rate_interval=proportion_interval(rate, float(m.sum()), level),
        k=int(repeats[tried].min()),
        pass_hat_k=float(hat.mean()) if known else None,
        pass_hat_k_interval=proportion_interval(hat, float(len(hat)), level) if known else None,
    )
