"""Each report's own false-alarm simulation (`eval_assets.stats._aa`): its draws and what it counts.

The simulation must count exactly what the report's rules act on: policy failures block, insufficient
evidence flags, and its binomial and chi-square draws must have the distributions the docstring names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from eval_assets.stats import (
    AA_SEED,
    Budget,
    aa_rates,
    binomial_draws,
    chi_square_variance_draws,
    scenario_table,
    validate_verdicts,
)

FLOOR = 0.2


@pytest.mark.parametrize(("n", "p"), [(5, 0.02), (3, 0.4), (5, 0.97), (4, 0.0), (4, 1.0), (0, 0.3)])
def test_binomial_draws_follow_the_binomial_distribution(n: int, p: float) -> None:
    draws = binomial_draws(np.random.default_rng(1), np.full((20_000, 3), float(n)), np.full(3, p)).ravel()
    observed = np.bincount(draws.astype(int), minlength=n + 1)
    assert len(observed) == n + 1  # never outside 0..n
    expected = stats.binom.pmf(np.arange(n + 1), n, p) * len(draws)
    seen = expected > 0
    assert observed[~seen].sum() == 0
    if seen.sum() > 1:
        assert stats.chisquare(observed[seen], expected[seen]).pvalue > 1e-4


def test_binomial_draws_take_each_scenarios_own_probability() -> None:
    draws = binomial_draws(np.random.default_rng(2), np.full((40_000, 2), 5.0), np.array([0.01, 0.5]))
    assert draws[:, 0].mean() == pytest.approx(0.05, abs=0.01)
    assert draws[:, 1].mean() == pytest.approx(2.5, abs=0.03)


def test_sample_variances_are_scaled_chi_square_on_their_own_degrees_of_freedom() -> None:
    n = np.tile(np.array([[5.0, 3.0, 2.0, 1.0]]), (50_000, 1))
    var = np.array([0.04, 0.04, 0.01, 0.01])
    out = chi_square_variance_draws(np.random.default_rng(3), var, n, np.array([5, 5, 5, 5]))
    assert np.isnan(out[:, 3]).all()  # one scored repeat: no variance
    for column, dof in ((0, 4), (1, 2), (2, 1)):
        scaled = out[:, column] / var[column] * dof
        assert stats.kstest(scaled[:5000], stats.chi2(dof).cdf).pvalue > 1e-4
        assert scaled.mean() == pytest.approx(dof, rel=0.03)


def table(n: int = 30, k: int = 5, failed: float = 0.0, policy: int = 0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    scores = np.clip(rng.uniform(0.5, 0.9, (n, 1)) + 0.1 * rng.standard_normal((n, k)), 0, 1).ravel()
    status = np.where(rng.random(n * k) < failed, "failed", "scored")
    frame = pd.DataFrame(
        {
            "scenario_id": np.repeat([f"s{i:02d}" for i in range(n)], k),
            "repeat": np.tile(np.arange(k), n),
            "status": status,
            "score": np.where(status == "scored", scores, np.nan),
            "policy_failures": 0,
        }
    )
    frame.loc[: policy - 1, "policy_failures"] = 1 if policy else 0
    return scenario_table(validate_verdicts(frame), FLOOR)


def test_aa_rates_are_seeded_and_block_is_part_of_flag() -> None:
    one = aa_rates(table(), FLOOR, Budget())
    assert one is not None and one == aa_rates(table(), FLOOR, Budget())
    assert one.seed == AA_SEED and one.replications == 500
    assert 0.0 <= one.block <= one.flag <= 1.0
    assert one.flag < 0.5


def test_aa_rates_count_insufficient_evidence_as_a_flag() -> None:
    """Half the verdicts failed: every unchanged rebuild is "insufficient evidence" (investigate)."""
    rates = aa_rates(table(failed=0.5), FLOOR, Budget(), replications=200)
    assert rates is not None
    assert rates.flag == 1.0 and rates.block < 0.2


def test_aa_rates_count_a_policy_failure_rate_as_blocks() -> None:
    """1 attempt in 150 with a policy failure: P(an unchanged build shows one) = 1 - (149/150)^150."""
    rates = aa_rates(table(policy=1), FLOOR, Budget(), replications=2000)
    assert rates is not None
    assert rates.block == pytest.approx(1 - (149 / 150) ** 150, abs=0.04)


def test_no_scenarios_or_no_replications_is_not_simulated() -> None:
    assert aa_rates(table().iloc[:0], FLOOR, Budget()) is None
    assert aa_rates(table(), FLOOR, Budget(), replications=0) is None
