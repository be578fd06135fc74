"""Judge-human agreement with a cluster-bootstrap interval (clusters = scenarios).

The warehouse views `judge_agreement` and `judge_agreement_criteria` compute the same thing in DuckDB
SQL; this module is their reference (a test holds the two to the same numbers) and what the coverage
benchmark (`benchmarks/agreement_coverage.py`) measures.

alpha is Krippendorff's interval alpha for two coders with every pair complete, from six sums over
the pairs (n, sum j, sum h, sum j^2, sum h^2, sum (j - h)^2):
    alpha = 1 - msd / (2 s^2),  msd = sum (j - h)^2 / n,
    s^2 = (sum j^2 + sum h^2 - (sum j + sum h)^2 / (2n)) / (2n - 1)   (the pooled variance of 2n values),
undefined (NaN / None) when n < 2 or s^2 <= 1e-12.

The bootstrap resamples SCENARIOS with replacement: replicate b draws G clusters, draw j being
cluster `bootstrap_draw(seed, b, j) % G` of the scenarios sorted by id, where draw is the first 15 hex digits of
sha256("agreement-bootstrap/<seed>/<b>/<j>") read as an integer: a hash both Python and DuckDB
compute, so the view and this module draw the same clusters. A replicate's sums are the drawn
clusters' sums (a cluster drawn twice counts twice). `n_boot` counts the replicates whose alpha is
defined; the interval is built from those.

The interval is bias-corrected with a t quantile, not the percentile interval: with the replicates'
mean m and standard deviation s (n - 1 denominator), it is
    (2 alpha - m) -/+ t(0.975, G - 1) s,  the upper end capped at 1 (alpha's maximum).
alpha is biased low in few scenarios and its bootstrap distribution is skewed, so the percentile
interval sits too low: measured coverage 82-86% at 10 scenarios and 89-92% at 30, against 94-96% and
93% for this one (benchmarks/agreement_coverage.py, docs/methods.md). The t quantile for G - 1
degrees of freedom (G scenarios, as the project's other cluster intervals use) is exact for
df <= 4 and the four-term Cornish-Fisher expansion beyond (relative error <= 1.1e-4 at df 5, below
1e-8 from df 30), because DuckDB has no t quantile: the views compute the same expression.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final, Literal

import numpy as np

AGREEMENT_SEED: Final = 25  # the bootstrap's named seed (the views hold the same number)
AGREEMENT_N_BOOT: Final = 1000
AGREEMENT_LEVEL: Final = 0.95
DRAW_LABEL: Final = "agreement-bootstrap"
_MIN_VAR: Final = 1e-12
_Z975: Final = NormalDist().inv_cdf(0.975)
_T975_SMALL: Final = {
    1: 12.706204736174694,
    2: 4.302652729749462,
    3: 3.1824463052837078,
    4: 2.7764451051977934,
}
_CF: Final = (
    (_Z975**3 + _Z975) / 4,
    (5 * _Z975**5 + 16 * _Z975**3 + 3 * _Z975) / 96,
    (3 * _Z975**7 + 19 * _Z975**5 + 17 * _Z975**3 - 15 * _Z975) / 384,
    (79 * _Z975**9 + 776 * _Z975**7 + 1482 * _Z975**5 - 1920 * _Z975**3 - 945 * _Z975) / 92160,
)


@dataclass(frozen=True)
class AgreementInterval:
    """alpha on the pairs with its cluster-bootstrap interval (bias-corrected t, or percentile).

    `low`/`high` are None when alpha is undefined or there are fewer than two scenarios; `n_boot` is
    the number of replicates whose alpha was defined (of `n_drawn`)."""

    alpha: float | None
    low: float | None
    high: float | None
    n_pairs: int
    n_scenarios: int
    n_boot: int
    n_drawn: int


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` >= 1 degrees of freedom, as the views compute it:
    exact up to df 4, the Cornish-Fisher expansion in 1/df (four terms) beyond."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df in _T975_SMALL:
        return _T975_SMALL[df]
    return _Z975 + sum(g / df ** (i + 1) for i, g in enumerate(_CF))


def bootstrap_draw(seed: int, b: int, j: int) -> int:
    """The hash behind draw j of replicate b (a non-negative 60-bit integer); the cluster is `% G`."""
    key = f"{DRAW_LABEL}/{seed}/{b}/{j}".encode()
    return int(hashlib.sha256(key).hexdigest()[:15], 16)


_RAW: dict[tuple[int, int], np.ndarray] = {}


def _raw_draws(seed: int, n_boot: int, g: int) -> np.ndarray:
    """(n_boot, >= g) hashes `bootstrap_draw(seed, b, j)`; kept per (seed, n_boot) and grown as wider ones are asked."""
    have = _RAW.get((seed, n_boot))
    if have is None or have.shape[1] < g:
        width = max(g, 0 if have is None else 2 * have.shape[1])
        have = np.array(
            [[bootstrap_draw(seed, b, j) for j in range(width)] for b in range(n_boot)], dtype=np.int64
        )
        _RAW[(seed, n_boot)] = have
    return have


def draw_matrix(seed: int, n_boot: int, g: int) -> np.ndarray:
    """(n_boot, g) cluster indices: row b is replicate b's g draws, `bootstrap_draw(seed, b, j) % g`."""
    if g < 1 or n_boot < 1:
        raise ValueError(f"need g >= 1 and n_boot >= 1, got g={g}, n_boot={n_boot}")
    return _raw_draws(seed, n_boot, g)[:, :g] % g


def alpha_from_sums(sums: np.ndarray) -> np.ndarray:
    """alpha for each row of `sums` (..., 6): n, sum j, sum h, sum j^2, sum h^2, sum (j - h)^2; NaN
    where undefined (n < 2 or no pooled variance)."""
    s = np.asarray(sums, dtype=float)
    n, sj, sh, sjj, shh, sdd = (s[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = (sjj + shh - (sj + sh) ** 2 / (2.0 * n)) / (2.0 * n - 1.0)
        alpha = 1.0 - (sdd / n) / (2.0 * pooled)
    return np.where((n >= 2) & (pooled > _MIN_VAR), alpha, np.nan)


def cluster_sums(judge: np.ndarray, human: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted cluster labels, (G, 6) sums per cluster) of the pairs."""
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    labels, codes = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
    g = len(labels)
    cols = [np.ones_like(j), j, h, j * j, h * h, (j - h) ** 2]
    sums = np.stack([np.bincount(codes, weights=c, minlength=g) for c in cols], axis=1)
    return labels, sums


def cluster_bootstrap_alpha(
    judge: np.ndarray,
    human: np.ndarray,
    clusters: np.ndarray,
    *,
    seed: int = AGREEMENT_SEED,
    n_boot: int = AGREEMENT_N_BOOT,
    level: float = AGREEMENT_LEVEL,
    resample: Literal["clusters", "rows"] = "clusters",
    interval: Literal["bias-corrected-t", "percentile"] = "bias-corrected-t",
) -> AgreementInterval:
    """Krippendorff's interval alpha of the (judge, human) pairs with its cluster-bootstrap interval.

    `clusters` gives each pair's scenario. `resample="rows"` treats every pair as its own cluster (the
    naive bootstrap) and `interval="percentile"` takes the replicates' quantiles: both only for the
    coverage benchmark, to show what the views' choices buy. Raises ValueError when the arrays differ
    in length or hold a non-finite value."""
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    c = np.asarray(clusters)
    if not (len(j) == len(h) == len(c)):
        raise ValueError(f"judge, human and clusters differ in length: {len(j)}, {len(h)}, {len(c)}")
    if not (np.isfinite(j).all() and np.isfinite(h).all()):
        raise ValueError("judge and human scores must be finite")
    if resample == "rows":
        c = np.array([f"{i:012d}" for i in range(len(j))])
    _, sums = cluster_sums(j, h, c)
    point = alpha_from_sums(sums.sum(axis=0)) if len(j) else np.float64(np.nan)
    alpha = None if np.isnan(point) else float(point)
    g = len(sums)
    if alpha is None or g < 2:
        return AgreementInterval(alpha, None, None, len(j), g, 0, 0)
    idx = draw_matrix(seed, n_boot, g)
    flat = (np.arange(n_boot)[:, None] * g + idx).ravel()
    counts = np.bincount(flat, minlength=n_boot * g).reshape(n_boot, g).astype(float)
    reps = alpha_from_sums(counts @ sums)
    ok = reps[~np.isnan(reps)]
    if len(ok) < 2:
        return AgreementInterval(alpha, None, None, len(j), g, len(ok), n_boot)
    if interval == "percentile":
        tail = (1.0 - level) / 2.0
        low, high = np.quantile(ok, [tail, 1.0 - tail])
        return AgreementInterval(alpha, float(low), float(high), len(j), g, len(ok), n_boot)
    if level != AGREEMENT_LEVEL:
        raise ValueError(f"the bias-corrected t interval is computed at level {AGREEMENT_LEVEL} only")
    centre = 2.0 * alpha - float(ok.mean())
    half = t975(g - 1) * float(ok.std(ddof=1))
    return AgreementInterval(alpha, centre - half, min(1.0, centre + half), len(j), g, len(ok), n_boot)
