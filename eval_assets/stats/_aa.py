"""Every report's own false-alarm rate: A/A simulation through the report's decision rules.

An unchanged build is simulated from the BASELINE's own figures, scenario by scenario, and compared
with a fresh draw of the same baseline, `replications` times, through `_rules.evaluate` (the code the
report itself decided with). Per scenario and build, with the suite's missing share p_miss:

- scored repeats n ~ Binomial(K_i, 1 - p_miss), K_i the scenario's verdict rows;
- mean ~ N(mu_i, s_i^2 / n) clipped to [0, 1], variance ~ s_i^2 chi2(n-1) / (n-1) (NaN below 2);
  s_i^2 is the scenario's sample variance (the suite's median where it has none);
- repeats below the floor ~ Binomial(n, b_i), b_i = (observed below + Phi((floor - mu_i)/s_i)) / (n_i + 1);
- policy failures ~ Binomial(attempts with output, the baseline's rate): any one blocks, as in the report;
- a pass/fail scenario (every baseline repeat 0 or 1) instead draws passes ~ Binomial(n, mu_i), so the
  rules see 0/1 repeats and test it with the exact test the report used.

With adaptive repeats (`design`, the design the candidate's run looked under) the simulated candidate
runs as the run did: its first `design.start` repeats of every scenario (K_i at most), the first look
(`plan_top_ups`, the run's own plan), its remaining K_i - start repeats only in the scenarios topped up
(drawn as a second sample and pooled with the first), and the two looks' rules (`design.looks`); the
rates are those of that procedure, not of the fixed count.

The rates are the shares of replications that block / flag (block or investigate). Seeded
(`AA_SEED`), vectorised in chunks of replications so that memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd
from scipy import stats

from ._adaptive import AdaptiveDesign, plan_top_ups
from ._rules import Budget, Moments, RuleOutcome, binary_repeats, evaluate

AA_SEED: Final = 20_261_202
AA_REPLICATIONS: Final = 500
_ELEMENTS_PER_CHUNK: Final = 100_000  # ~1 MB per array: faster than larger chunks (cache)


@dataclass(frozen=True)
class AARates:
    """Simulated A/A rates of one report's procedure on its suite's shape."""

    block: float
    flag: float
    replications: int
    seed: int


def aa_rates(
    base: pd.DataFrame,
    floor: float | None,
    budget: Budget,
    *,
    between: float = 0.0,
    between_df: int = 0,
    replications: int = AA_REPLICATIONS,
    seed: int = AA_SEED,
    design: AdaptiveDesign | None = None,
) -> AARates | None:
    """A/A block and flag rates from the baseline's per-scenario table (`scenario_table` rows of the
    compared scenarios). None when there is nothing to simulate (no scenario or no replication).
    `design`: the candidate ran with adaptive repeats under it (simulated as it ran); None: fixed count."""
    if replications < 1 or len(base) == 0:
        return None
    rng = np.random.default_rng(seed)
    mu = base["mean"].to_numpy(dtype=float)
    var = base["variance"].to_numpy(dtype=float)
    fallback = float(np.nanmedian(var)) if np.isfinite(var).any() else 0.0
    var = np.where(np.isfinite(var), var, fallback)
    k = np.maximum(base["n_rows"].to_numpy(dtype=np.int64), 1)
    rows = float(base["n_rows"].sum())
    p_miss = 1.0 - float(base["n_scored"].sum()) / rows if rows else 0.0
    below = _below_rates(base, mu, var, floor)
    pass_fail = _pass_fail(base)
    outputs = int(base["n_output"].sum())
    policy_rate = float(base["attempts_with_policy_failure"].sum()) / outputs if outputs else 0.0
    chunk = max(1, _ELEMENTS_PER_CHUNK // len(mu))
    blocks = flags = 0
    for start in range(0, replications, chunk):
        size = min(chunk, replications - start)
        draws = _Draws(rng, size, mu, var, p_miss, below, pass_fail, floor)
        if design is None:
            sims = [draws.of(k) for _ in range(2)]
            outcome = evaluate(sims[0], sims[1], floor, budget, between=between, between_df=between_df)
        else:
            outcome = _adaptive_outcome(draws, k, design, budget, between, between_df)
        policy = rng.binomial(outputs, policy_rate, size) > 0 if policy_rate > 0 else np.zeros(size, bool)
        blocks += int(np.sum(outcome.block | policy))
        flags += int(np.sum(outcome.flag | policy))
    return AARates(blocks / replications, flags / replications, replications, seed)


@dataclass(frozen=True)
class _Draws:
    """One chunk's simulated builds of the baseline's shape, `of(k)`: each scenario at k_i repeats."""

    rng: np.random.Generator
    size: int
    mu: np.ndarray
    var: np.ndarray
    p_miss: float
    below: np.ndarray
    pass_fail: np.ndarray
    floor: float | None

    def of(self, k: np.ndarray) -> Moments:
        return _draw(
            self.rng, self.size, self.mu, self.var, k, self.p_miss, self.below, self.pass_fail, self.floor
        )


def _adaptive_outcome(
    draws: _Draws, k: np.ndarray, design: AdaptiveDesign, budget: Budget, between: float, between_df: int
) -> RuleOutcome:
    """An unchanged candidate run with adaptive repeats against a fresh baseline at its K_i repeats:
    first look at min(K_i, start), the run's plan, the top-ups' K_i - start repeats pooled in."""
    base = draws.of(k)
    first_k = np.minimum(k, design.start)
    interim = draws.of(first_k)
    plan = plan_top_ups(base, interim, draws.floor, budget, design, between=between, between_df=between_df)
    rest_k = k - first_k
    topped = (plan.repeats > 0) & (rest_k[None, :] > 0)
    final = interim
    if rest_k.any():
        final = pooled(interim, draws.of(np.maximum(rest_k, 1)), topped)
    looks = design.looks(interim, topped, budget)
    return evaluate(base, final, draws.floor, budget, between=between, between_df=between_df, looks=looks)


def pooled(first: Moments, more: Moments, where: np.ndarray) -> Moments:
    """The moments of `first`'s repeats and `more`'s together where `where` (R, m), else `first`'s:
    counts and below-floor counts add, means are weighted by scored repeats, and the sums of squares
    add with the between-sample term n1 n2 / n (mean1 - mean2)^2 (exact for pooled samples)."""
    n1, n2 = first.n, np.where(where, more.n, 0.0)
    n = n1 + n2
    m1, m2 = np.nan_to_num(first.mean), np.nan_to_num(more.mean)
    ss1 = np.where(n1 >= 2, np.nan_to_num(first.var) * (n1 - 1.0), 0.0)
    ss2 = np.where(n2 >= 2, np.nan_to_num(more.var) * (n2 - 1.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n >= 1, (n1 * m1 + n2 * m2) / n, np.nan)
        ss = ss1 + ss2 + np.where(n >= 1, n1 * n2 / n * (m1 - m2) ** 2, 0.0)
        var = np.where(n >= 2, ss / (n - 1.0), np.nan)
    below = np.nan_to_num(first.below) + np.where(where, np.nan_to_num(more.below), 0.0)
    return Moments(n, mean, var, below, first.rows + np.where(where, more.rows, 0.0))


def _below_rates(base: pd.DataFrame, mu: np.ndarray, var: np.ndarray, floor: float | None) -> np.ndarray:
    if floor is None:
        return np.zeros(len(mu))
    with np.errstate(divide="ignore", invalid="ignore"):
        model = stats.norm.cdf((floor - mu) / np.sqrt(var))
    model = np.where(var > 0, model, (mu < floor).astype(float))
    observed = base["n_below_floor"].to_numpy(dtype=float)
    return np.asarray((observed + model) / (base["n_scored"].to_numpy(dtype=float) + 1.0))


def _pass_fail(base: pd.DataFrame) -> np.ndarray:
    """(m,) bool: the baseline's scenarios whose scored repeats are all 0 or 1 (`binary_repeats`)."""
    n, mean, var, below, rows = (
        base[c].to_numpy(dtype=float)[None, :]
        for c in ("n_scored", "mean", "variance", "n_below_floor", "n_rows")
    )
    table = Moments(n, mean, var, below, rows)
    return np.asarray(binary_repeats(table)[0])


def _draw(
    rng: np.random.Generator,
    size: int,
    mu: np.ndarray,
    var: np.ndarray,
    k: np.ndarray,
    p_miss: float,
    below: np.ndarray,
    pass_fail: np.ndarray,
    floor: float | None,
) -> Moments:
    """One simulated build. Pass/fail scenarios (0/1 repeats in the baseline) are drawn as passes ~
    Binomial(n, mu), so their moments are 0/1 moments and the rules test them as they test the report's."""
    shape = (size, len(mu))
    kk = np.broadcast_to(k[None, :].astype(float), shape)
    n = kk - binomial_draws(rng, kk, np.full(len(mu), p_miss)) if p_miss > 0 else kk.copy()
    safe = np.maximum(n, 1.0)
    mean = np.clip(mu[None, :] + np.sqrt(var[None, :] / safe) * rng.standard_normal(shape), 0.0, 1.0)
    sample_var = chi_square_variance_draws(rng, var, n, k)
    count_below = binomial_draws(rng, n, below)
    if pass_fail.any():
        cols = np.flatnonzero(pass_fail)
        nb = n[:, cols]
        passes = binomial_draws(rng, nb, np.clip(mu[cols], 0.0, 1.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = passes / np.maximum(nb, 1.0)
            mean[:, cols] = rate
            sample_var[:, cols] = np.where(nb >= 2, nb * rate * (1.0 - rate) / (nb - 1.0), np.nan)
        count_below[:, cols] = nb - passes if floor is not None and floor > 0.0 else 0.0
    mean = np.where(n >= 1, mean, np.nan)
    return Moments(n, mean, sample_var, count_below, kk)


def binomial_draws(rng: np.random.Generator, n: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Binomial(n, prob_i) draws, (R, m) float, by inverse cdf from one uniform each.

    The common outcome 0 (P = (1 - prob)^n) is decided for every draw at once; only the draws above
    it (a few percent: missing verdicts and floor crossings are rare) are located in the cdf, built by
    the pmf recursion pmf(j+1) = pmf(j) (n - j)/(j + 1) prob/(1 - prob).
    """
    u = rng.random(n.shape)
    p = np.broadcast_to(np.clip(prob, 0.0, 1.0)[None, :], n.shape)
    with np.errstate(divide="ignore", invalid="ignore"):  # n = 0 with prob = 1: 0 x -inf, not used
        zero = np.exp(np.where(n > 0, n * np.log1p(-p), 0.0))  # P(X = 0); 1 when n = 0, 0 when prob = 1
    out = np.zeros(n.shape)
    rest = u > zero
    if not rest.any():
        return out
    nr, pr, ur = n[rest], p[rest], u[rest]
    certain = pr >= 1.0
    odds = np.where(certain, 0.0, pr / np.where(certain, 1.0, 1.0 - pr))
    pmf = zero[rest]
    cdf = pmf.copy()
    count = np.zeros(len(nr))
    for j in range(int(nr.max())):
        count += ur > cdf
        pmf = pmf * np.maximum(nr - j, 0.0) / (j + 1.0) * odds
        cdf = cdf + pmf
    out[rest] = np.where(certain, nr, np.clip(count, 1.0, nr))
    return out


def chi_square_variance_draws(
    rng: np.random.Generator, var: np.ndarray, n: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """Sample variances s_i^2 chi2(n-1)/(n-1), NaN below 2 repeats.

    chi2 with d (whole) df is 2 x the sum of d // 2 standard exponentials, plus a squared standard
    normal when d is odd; drawn for the common df (every repeat scored) at once, then per other df.
    """
    dof = np.maximum(n - 1.0, 1.0)
    chi = np.empty(n.shape)
    common = max(float(k.max()) - 1.0, 1.0)
    is_common = dof == common
    chi[is_common] = _chi_square(rng, int(common), int(is_common.sum()))
    for value in np.unique(dof[~is_common]):
        where = dof == value
        chi[where] = _chi_square(rng, int(value), int(where.sum()))
    return np.where(n >= 2, var[None, :] * chi / dof, np.nan)


def _chi_square(rng: np.random.Generator, dof: int, size: int) -> np.ndarray:
    out = 2.0 * rng.standard_exponential((dof // 2, size)).sum(axis=0) if dof >= 2 else np.zeros(size)
    if dof % 2:
        out += rng.standard_normal(size) ** 2
    return np.asarray(out)
