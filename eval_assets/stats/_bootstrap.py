"""Bootstrap intervals over scenarios (each value is one scenario: a cluster bootstrap).

The mean's interval is BCa via `scipy.stats.bootstrap` up to `SCIPY_BCA_MAX_N` values. Above that,
scipy's jackknife for the acceleration costs O(n^2), so a vectorised BCa with the same formulas is used instead: bootstrap
means from chunked index draws and the jackknife of the mean in closed form ((sum - x_i) / (n - 1)),
O(n * B).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
from scipy import special, stats

SCIPY_BCA_MAX_N: Final = 2_000
_ELEMENTS_PER_CHUNK: Final = 4_000_000  # bounds working memory of a resampling chunk (~32 MB)


@dataclass(frozen=True)
class Interval:
    """A confidence interval and how it was computed (e.g. 'BCa', 'percentile (BCa degenerate)')."""

    low: float
    high: float
    method: str


def mean_interval(
    values: np.ndarray,
    *,
    n_resamples: int,
    level: float,
    rng: np.random.Generator,
    scipy_max_n: int = SCIPY_BCA_MAX_N,
) -> Interval | None:
    """BCa interval for the mean of `values`; None with fewer than two values.

    Every value equal: the interval is that value, method 'degenerate (every value equal)', without
    resampling. Otherwise falls back to the percentile interval when BCa cannot be computed (e.g.
    every bootstrap mean on one side of the estimate) and says so in `method`.
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None
    if np.ptp(values) == 0.0:
        return Interval(float(values[0]), float(values[0]), "degenerate (every value equal)")
    if len(values) <= scipy_max_n:
        bca = _scipy_interval(values, np.mean, "BCa", n_resamples, level, rng)
        if bca is not None:
            return Interval(bca[0], bca[1], "BCa")
        pct = _scipy_interval(values, np.mean, "percentile", n_resamples, level, rng)
        return None if pct is None else Interval(pct[0], pct[1], "percentile (BCa degenerate)")
    return _vectorised_mean_interval(values, n_resamples, level, rng)


def quantile_interval(
    values: np.ndarray, prob: float, *, n_resamples: int, level: float, rng: np.random.Generator
) -> Interval | None:
    """Percentile-bootstrap interval for the `prob` quantile of `values`; None with fewer than two.

    The quantile is the linear (Hyndman-Fan 7) one, as `scipy.stats.quantile` computes it by default;
    numpy's implementation is used inside the resampling loop because it is ~3x faster there.
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None

    def quantile(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.quantile(x, prob, axis=axis)

    pct = _scipy_interval(values, quantile, "percentile", n_resamples, level, rng)
    return None if pct is None else Interval(pct[0], pct[1], "percentile")


def _scipy_interval(
    values: np.ndarray,
    statistic: Callable[..., np.ndarray],
    method: str,
    n_resamples: int,
    level: float,
    rng: np.random.Generator,
) -> tuple[float, float] | None:
    batch = max(1, _ELEMENTS_PER_CHUNK // len(values))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate BCa is detected from its NaN result below
        result = stats.bootstrap(
            (values,),
            statistic,
            method=method,
            n_resamples=n_resamples,
            confidence_level=level,
            batch=batch,
            vectorized=True,
            rng=rng,
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return (low, high) if np.isfinite(low) and np.isfinite(high) else None


def _vectorised_mean_interval(
    values: np.ndarray, n_resamples: int, level: float, rng: np.random.Generator
) -> Interval:
    """BCa for the mean (Efron & Tibshirani 14.3, as scipy computes it) in O(n * n_resamples)."""
    n = len(values)
    estimate = float(values.mean())
    boot = np.concatenate(
        [
            values[rng.integers(0, n, size=(size, n))].mean(axis=1)
            for size in _chunk_sizes(n_resamples, max(1, _ELEMENTS_PER_CHUNK // n))
        ]
    )
    tail = (1.0 - level) / 2.0
    share_below = (np.count_nonzero(boot < estimate) + np.count_nonzero(boot <= estimate)) / (2 * len(boot))
    z0 = special.ndtri(share_below)
    leave_one_out = (values.sum() - values) / (n - 1)
    deviation = leave_one_out.mean() - leave_one_out
    spread = np.sum(deviation**2)
    accel = np.sum(deviation**3) / (6.0 * spread**1.5) if spread > 0 else np.nan
    probs = [_bca_prob(z0, accel, special.ndtri(tail)), _bca_prob(z0, accel, special.ndtri(1.0 - tail))]
    if np.all(np.isfinite(probs)):
        low, high = np.quantile(boot, probs)
        return Interval(float(low), float(high), "BCa (vectorised)")
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return Interval(float(low), float(high), "percentile (BCa degenerate)")


def _bca_prob(z0: float, accel: float, z_alpha: float) -> float:
    shifted = z0 + z_alpha
    return float(special.ndtr(z0 + shifted / (1.0 - accel * shifted)))


def _chunk_sizes(total: int, chunk: int) -> list[int]:
    return [min(chunk, total - start) for start in range(0, total, chunk)]
