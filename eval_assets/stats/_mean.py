"""The mean-drop test: paired over scenarios, judged against the baseline's noise band (METHODS §3).

With d_i = candidate mean - baseline mean over the scenarios present in both:

- `block` when the drop is significantly BEYOND the band: one-sided `ttest_1samp(d, -band,
  alternative='less')` p < alpha, i.e. the upper confidence bound of the drop clears the band.
- `investigate` (top up repeats) when the drop is significant, `ttest_rel(cand, base,
  alternative='less')` p < alpha, but not significantly beyond the band.
- `ok` otherwise.

Why not "point estimate beyond the band and p < alpha": the band is the 95% half-width of a re-run
difference, so that rule is itself a ~2.5% one-sided test of "no change", and it blocks a true drop
of 0.5 x band in ~16% of runs (Phi(-0.98)); the acceptance limit is 10%. Requiring the drop to be
beyond the band with significance puts the block threshold near band + 1.645 SE = 1.84 x band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._findings import Verdict


@dataclass(frozen=True)
class MeanDropTest:
    """Result of the mean-drop test. Figures the data cannot support are None.

    `p_drop` is the paired t-test p-value (drop vs no change), `p_beyond` the p-value of
    "drop larger than the band". `rule` is 'beyond_band', 'drop_within_noise', 'no_band' or ''.
    """

    n: int
    mean: float | None
    p_drop: float | None
    p_beyond: float | None
    band: float | None
    verdict: Verdict
    rule: str
    note: str


def mean_drop_test(
    candidate_means: np.ndarray, baseline_means: np.ndarray, band: float | None, *, alpha: float
) -> MeanDropTest:
    """Test the paired per-scenario means (same order) against the baseline's suite band.

    Fewer than two scenarios: verdict 'info', no figures (no inference over scenarios). Every
    difference equal (zero spread, t undefined): no p-values; the constant drop is compared to the
    band directly (beyond it: block; below 0: investigate). `band` None (baseline has no usable
    scenario): a significant drop can only be `investigate`.
    """
    cand = np.asarray(candidate_means, dtype=float)
    base = np.asarray(baseline_means, dtype=float)
    diff = cand - base
    n = len(diff)
    if n < 2:
        return MeanDropTest(
            n, None, None, None, band, "info", "", "fewer than 2 scenarios in common: no test"
        )
    mean = float(diff.mean())
    if np.ptp(diff) == 0.0:
        return _constant_drop(n, mean, band)
    p_drop = float(stats.ttest_rel(cand, base, alternative="less").pvalue)
    p_beyond = None if band is None else float(stats.ttest_1samp(diff, -band, alternative="less").pvalue)
    if p_beyond is not None and p_beyond < alpha:
        return MeanDropTest(
            n,
            mean,
            p_drop,
            p_beyond,
            band,
            "block",
            "beyond_band",
            "drop significantly beyond the noise band",
        )
    if p_drop < alpha:
        rule = "no_band" if band is None else "drop_within_noise"
        note = (
            "significant drop, no noise band to judge it by"
            if band is None
            else "significant drop, not significantly beyond the noise band"
        )
        return MeanDropTest(n, mean, p_drop, p_beyond, band, "investigate", rule, note)
    return MeanDropTest(n, mean, p_drop, p_beyond, band, "ok", "", "no significant drop")


def _constant_drop(n: int, mean: float, band: float | None) -> MeanDropTest:
    note = "every scenario moved by the same amount: t-test undefined, compared to the band directly"
    if band is not None and mean < -band:
        return MeanDropTest(n, mean, None, None, band, "block", "beyond_band", note)
    if mean < 0:
        return MeanDropTest(n, mean, None, None, band, "investigate", "drop_within_noise", note)
    return MeanDropTest(n, mean, None, None, band, "ok", "", note)
