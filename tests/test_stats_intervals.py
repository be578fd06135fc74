"""Intervals of suite means, pass rates and pass^k (`eval_assets.stats._intervals`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from eval_assets.stats import (
    compare,
    pass_rate_intervals,
    proportion_interval,
    reliability,
    suite_intervals,
    suite_mean_interval,
    summary_markdown,
)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=1, max_value=8), st.floats(min_value=0.0, max_value=1.0).map(lambda x: round(x, 6))
)
def test_a_scenario_pass_rate_interval_covers_at_least_its_level_at_every_pass_rate(n: int, p: float) -> None:
    passes = np.arange(n + 1, dtype=float)
    low, high = pass_rate_intervals(passes, np.full(n + 1, float(n)))
    coverage = stats.binom.pmf(passes, n, p)[(low <= p + 1e-12) & (p - 1e-12 <= high)].sum()
    assert coverage >= 0.95 - 1e-9


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 2)).filter(lambda t: t[0] + t[1] > 0),
        min_size=2,
        max_size=8,
    )
)
def test_the_intervals_pass_hat_k_is_the_one_definition_of_pass_hat_k(
    scenarios: list[tuple[int, int, int]],
) -> None:
    """The summary's pass^k is `reliability`'s suite pass^k over the same repeats: judge failures on an
    output unknown (the figure None when one leaves a scenario unknown), never a pass, never dropped."""
    passed, failed, unknown = (np.array([t[i] for t in scenarios], dtype=float) for i in range(3))
    scored = passed + failed
    means = np.where(scored > 0, passed / np.maximum(scored, 1), np.nan)
    figures = suite_intervals(means, passed, scored, failed=failed, unknown=unknown)
    rows = [
        (f"s{i}", status, score, True)
        for i, (p, f, u) in enumerate(scenarios)
        for status, score, n in (("scored", 1.0, p), ("scored", 0.0, f), ("failed", None, u))
        for _ in range(n)
    ]
    (suite,) = [
        f
        for f in reliability(
            pd.DataFrame(rows, columns=["scenario_id", "status", "score", "has_output"]), 0.5, {}
        )
        if f.scope == "suite"
    ]
    assert figures.pass_hat_k == suite.pass_hat_k
    assert figures.k == suite.k
    assert (figures.pass_hat_k_interval is None) == (suite.pass_hat_k is None)


def test_a_suite_that_passed_every_repeat_still_gets_an_interval_below_one() -> None:
    # five scenarios, 3 of 3 passes each: the t interval over scenario rates would be [1, 1]
    rates = np.ones(5)
    assert suite_mean_interval(rates) is not None and suite_mean_interval(rates).low == 1.0  # type: ignore[union-attr]
    interval = proportion_interval(rates, trials=15)
    assert interval is not None and 0.5 < interval.low < 0.95 and interval.high == 1.0


def test_suite_mean_interval_is_the_t_interval_over_scenarios() -> None:
    values = np.array([0.4, 0.5, 0.55, 0.7])
    interval = suite_mean_interval(values)
    assert interval is not None
    half = stats.t.ppf(0.975, 3) * values.std(ddof=1) / 2.0
    assert (interval.low, interval.high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert suite_mean_interval(np.array([0.4])) is None


def test_a_rubric_without_a_floor_has_no_pass_rate_rather_than_a_default() -> None:
    figures = suite_intervals(np.array([0.4, 0.6, 0.8]), None, np.array([3.0, 3.0, 3.0]))
    assert figures.mean == pytest.approx(0.6) and figures.mean_interval is not None
    assert (figures.pass_rate, figures.pass_rate_interval, figures.k, figures.pass_hat_k) == (None,) * 4


def test_pass_hat_k_over_a_suite_uses_the_smallest_repeat_count() -> None:
    figures = suite_intervals(
        np.array([1.0, 0.5, 2 / 3]), np.array([3.0, 2.0, 2.0]), np.array([3.0, 4.0, 3.0])
    )
    assert figures.k == 3
    assert figures.pass_hat_k == pytest.approx((1.0 + 0.0 + 0.0) / 3)
    assert figures.pass_rate == pytest.approx((1.0 + 0.5 + 2 / 3) / 3)


def test_the_report_summary_shows_both_builds_intervals() -> None:
    rng = np.random.default_rng(4)
    rows = [(f"s{i}", r, "scored", float(rng.random() < 0.7), 0) for i in range(8) for r in range(3)]
    frame = pd.DataFrame(rows, columns=["scenario_id", "repeat", "status", "score", "policy_failures"])
    report = compare(frame, frame, 0.2, aa_replications=0, n_resamples=100)
    assert report.candidate_intervals is not None and report.baseline_intervals is not None
    assert report.candidate_intervals.k == 3
    text = summary_markdown(report)
    assert "- candidate: suite mean" in text and "pass^3" in text and "- baseline: suite mean" in text
