"""The decision rules of a capability report, vectorised over replications (docs/methods.md).

Every function takes per-scenario moments as (R, m) arrays: R replications (1 for a real report,
hundreds for the report's own A/A simulation, see `_aa`) of m paired scenarios. NaN marks a
scenario that a replication does not have. The real report and its false-alarm simulation run
exactly this code, so the published `aa_block_rate` / `aa_flag_rate` are rates of this procedure.

Blocking signals share ONE error budget, `Budget.alpha_block` per release, split evenly over the
release's judge versions (Bonferroni) and, within a report, by weighted Holm (Holm 1979) over every
blocking hypothesis: the mean drop beyond the noise band, the concentrated drop, and per scenario the
moderated-t drop, the Fisher floor test and the collapse rule. Only what asks a person to investigate
uses a false-discovery rate (Benjamini-Hochberg) or an unadjusted test.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, replace
from typing import Final, Literal

import numpy as np
from scipy import special, stats

ZERO_VARIANCE: Final = 1e-12  # scores live in [0, 1]: a variance this small is rounding, not spread
ZERO_DIFFERENCE: Final = 1e-9
BINARY_TOLERANCE: Final = 1e-9  # a sample variance this close to the Bernoulli maximum is pass/fail
BinaryTest = Literal["fisher", "barnard", "moderated"]
"""The per-scenario drop test on pass/fail repeats: "fisher" (the rule; one-sided Fisher exact),
"barnard" (Barnard's unconditional exact test) and "moderated" (the moderated t, as on any other
scores) exist for the calibration benchmark's trade-off table (docs/methods.md: pass/fail scores)."""
DRIVER_Z: Final = float(stats.norm.ppf(0.05))  # centred z below this names a concentrated-drop driver


@dataclass(frozen=True)
class Budget:
    """The error budget: `alpha_block` and `alpha_flag` per RELEASE, split over `n_judge_versions`.

    `weights` are the weighted-Holm shares of a report's blocking alpha (they sum to 1): the mean
    drop beyond the band, the concentrated drop, the per-scenario moderated-t drops (shared evenly
    over the scenarios), the per-scenario Fisher floor tests (likewise) and the collapse rule (shared
    over the scenarios whose mean fell below the floor where the baseline's did not).
    """

    alpha_block: float = 0.05
    alpha_flag: float = 0.05
    n_judge_versions: int = 1
    w_mean: float = 0.3
    w_concentrated: float = 0.2
    w_drop: float = 0.1
    w_floor: float = 0.05
    w_collapse: float = 0.35

    def __post_init__(self) -> None:
        if self.n_judge_versions < 1:
            raise ValueError("n_judge_versions must be at least 1")
        total = self.w_mean + self.w_concentrated + self.w_drop + self.w_floor + self.w_collapse
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"the weighted-Holm shares must sum to 1, not {total}")

    @property
    def report_alpha(self) -> float:
        """This report's blocking alpha: the release's, split evenly over its judge versions."""
        return self.alpha_block / self.n_judge_versions

    @property
    def report_flag(self) -> float:
        """This report's alpha (and BH q) for investigate-only signals."""
        return self.alpha_flag / self.n_judge_versions


@dataclass(frozen=True)
class Moments:
    """One build's per-scenario scored-repeat moments, (R, m) arrays (NaN where missing).

    `n` scored repeats, `mean`, `var` (ddof=1; NaN below 2 repeats), `below` scored repeats under the
    rubric floor (0 when there is no floor), `rows` verdict rows (scored, failed or excluded).
    """

    n: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    below: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, scores: np.ndarray, floor: float | None, attempted: np.ndarray | None = None) -> Moments:
        """The moments of (R, m, k) repeat scores (NaN: attempted but not scored); `attempted` (R, m, k)
        marks the repeats run (adaptive repeats: the rest were never paid for), default all. Simulations
        and tests build their builds through this; the report builds its own from verdict rows."""
        rows = np.full(scores.shape[:2], float(scores.shape[2]))
        if attempted is not None:
            scores = np.where(attempted, scores, np.nan)
            rows = attempted.sum(axis=2).astype(float)
        n = np.sum(np.isfinite(scores), axis=2).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, np.nansum(scores, axis=2) / np.maximum(n, 1), np.nan)
            dev = np.where(np.isfinite(scores), scores - mean[:, :, None], 0.0)
            var = np.where(n >= 2, (dev**2).sum(axis=2) / np.maximum(n - 1, 1), np.nan)
        under = np.isfinite(scores) & (scores < floor) if floor is not None else np.zeros(scores.shape, bool)
        return cls(n, mean, var, np.sum(under, axis=2).astype(float), rows)


@dataclass(frozen=True)
class Prior:
    """Empirical-Bayes prior of the per-scenario variances (Smyth 2004): d0 (inf: homogeneous), s0²."""

    d0: np.ndarray  # (R,)
    s0_sq: np.ndarray  # (R,)


def trigamma_inverse(x: np.ndarray) -> np.ndarray:
    """y with trigamma(y) = x, by Newton's method from Smyth's starting value (x > 0)."""
    x = np.asarray(x, dtype=float)
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = special.polygamma(1, y)
        step = tri * (1.0 - tri / x) / special.polygamma(2, y)
        y = y + step
        if np.all(-step / y < 1e-8):
            break
    return np.asarray(y)


def moderated_prior(var: np.ndarray, df: np.ndarray) -> Prior:
    """Fit d0 and s0² to the pooled per-scenario variances of each replication (row).

    Method of moments on log variances (Smyth 2004, §6.2): e = log s² - digamma(d/2) + log(d/2);
    trigamma(d0/2) = Var(e) - mean(trigamma(d/2)); d0 = inf when that is <= 0 (the variances are no
    more spread than sampling alone explains). Zero variances (within `ZERO_VARIANCE`: constant
    repeats, common with discrete or ceiling scores) are left out of the fit, whose log scale they
    would dominate; they are still moderated by the prior fitted to the others.
    """
    usable = np.isfinite(var) & (df >= 1) & (var > ZERO_VARIANCE)
    v = np.where(usable, var, np.nan)
    half = np.where(usable, df, np.nan) / 2.0
    e = np.log(v) - _unique_map(special.digamma, half) + np.log(half)
    count = usable.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows without usable variances give NaN
        emean = np.nanmean(np.where(usable, e, np.nan), axis=1)
        evar = np.nanvar(np.where(usable, e, np.nan), axis=1, ddof=1) - np.nanmean(
            _unique_map(lambda x: special.polygamma(1, x), half), axis=1
        )
    finite = (count >= 3) & np.isfinite(evar) & (evar > 1e-6)
    d0 = np.full(len(count), np.inf)
    if finite.any():
        d0[finite] = 2.0 * trigamma_inverse(evar[finite])
    d0 = np.where(d0 > 1e4, np.inf, d0)
    with np.errstate(invalid="ignore"):
        correction = np.where(np.isfinite(d0), special.digamma(d0 / 2.0) - np.log(d0 / 2.0), 0.0)
    s0_sq = np.where(count >= 1, np.exp(emean + correction), np.nan)
    return Prior(d0, s0_sq)


_TAIL_Z: Final = -1.2815515655446004  # Φ^-1(0.1): below it, scores and p-values are exact


def _wallace(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Wallace's (1959) normal score of t on df (df = inf: t itself), computed in place where it can."""
    finite = np.isfinite(df)
    every = bool(finite.all())
    safe = df if every else np.where(finite, df, 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z = np.square(t)
        z /= safe
        np.log1p(z, out=z)
        z *= safe
        np.sqrt(z, out=z)
        z *= (8.0 * safe + 1.0) / (8.0 * safe + 3.0)
        z = np.copysign(z, t, out=z)
    return z if every else np.where(finite, z, t)


def t_to_normal(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Normal score of a t statistic: Φ^-1(F_t(t; df)), df = inf allowed.

    Exact (`special.stdtr`) in the lower tail, where decisions are made (approximate cdf < 0.1);
    elsewhere Wallace's (1959) normalising transform sign(t) sqrt(df log(1 + t²/df)) (8df+1)/(8df+3),
    within 0.007 of the exact score for df >= 4 there, and 20x cheaper than the exact cdf.
    """
    t = np.asarray(t, dtype=float)
    df = np.broadcast_to(np.asarray(df, dtype=float), t.shape)
    z = _wallace(t, df)
    tail = (z < _TAIL_Z) & np.isfinite(df) & np.isfinite(t)
    if tail.any():
        exact = special.stdtr(df[tail], t[tail])
        z[tail] = np.where(exact > 0.0, special.ndtri(np.maximum(exact, 1e-300)), z[tail])
    return z


def t_cdf(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Student-t cdf (df = inf: the normal cdf); exact wherever it is below 0.1, see `t_to_normal`."""
    t = np.asarray(t, dtype=float)
    df = np.broadcast_to(np.asarray(df, dtype=float), t.shape)
    z = _wallace(t, df)
    tail = (z < _TAIL_Z) & np.isfinite(df) & np.isfinite(t)
    out = special.ndtr(z)
    if tail.any():
        out[tail] = special.stdtr(df[tail], t[tail])
    return np.asarray(out)


def _unique_map(f: object, values: np.ndarray) -> np.ndarray:
    """f applied to the distinct values only (degrees of freedom take a handful of values).

    Halves of whole degrees of freedom (the common case) are looked up in a table indexed by 2x the
    value, without sorting; anything else goes through `np.unique`.
    """
    finite = np.isfinite(values)
    out = np.full(values.shape, np.nan)
    if not finite.any():
        return out
    doubled = 2.0 * values[finite]
    index = np.rint(doubled)
    if index.min() >= 0 and index.max() <= 4096 and np.array_equal(index, doubled):
        table = np.asarray(f(np.arange(int(index.max()) + 1) / 2.0))  # type: ignore[operator]
        out[finite] = table[index.astype(np.intp)]
        return out
    distinct, inverse = np.unique(values[finite], return_inverse=True)
    out[finite] = np.asarray(f(distinct))[inverse]  # type: ignore[operator]
    return out


@dataclass(frozen=True)
class ScenarioTests:
    """Per-scenario results, (R, m) arrays. NaN p where a scenario could not be tested."""

    difference: np.ndarray
    se: np.ndarray  # moderated standard error of the difference
    df: np.ndarray  # degrees of freedom of the moderated t (d + d0)
    p_drop: np.ndarray  # one-sided moderated t: candidate lower
    p_floor: np.ndarray  # one-sided Fisher exact: more candidate repeats below the floor
    collapse: np.ndarray  # bool: candidate mean below the floor where the baseline's was not
    prior: Prior


def scenario_tests(
    base: Moments,
    cand: Moments,
    floor: float | None,
    binary_test: BinaryTest = "fisher",
    own_variance_tail: float = 1.0,
) -> ScenarioTests:
    """Moderated t per scenario (variances borrowed across scenarios), Fisher floor test, collapse flag.

    Pass/fail scenarios (`pass_fail_scenarios`) get the exact `binary_test` instead of the moderated t.
    A scenario noisier than its posterior keeps its own variance when its variance's upper tail under the
    prior, P(F(d, d0) >= s²/s0²), is below `own_variance_tail`; the rule is 1.0 (always), smaller values
    only for the calibration benchmark's trade-off curve (`benchmarks/power_tradeoff.py`).
    """
    d_each = np.where(np.isfinite(base.var), base.n - 1, 0) + np.where(np.isfinite(cand.var), cand.n - 1, 0)
    pooled_ss = np.nan_to_num(base.var * (base.n - 1)) + np.nan_to_num(cand.var * (cand.n - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.where(d_each >= 1, pooled_ss / d_each, np.nan)
    prior = moderated_prior(pooled, d_each.astype(float))
    d0 = prior.d0[:, None]
    s0 = prior.s0_sq[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        post = np.where(
            np.isfinite(d0),
            (d0 * s0 + d_each * np.nan_to_num(pooled)) / (d0 + d_each),
            np.broadcast_to(s0, pooled.shape),
        )
        # moderation only ever raises a variance: a scenario noisier than the prior keeps its own
        # (one inverse-chi-squared prior cannot describe a suite with a few very noisy scenarios)
        own_wins = np.nan_to_num(pooled) > post
        if own_variance_tail < 1.0:
            ratio = np.nan_to_num(pooled) / s0
            tail = np.where(
                np.isfinite(d0),
                stats.f.sf(ratio, np.maximum(d_each, 1), np.where(np.isfinite(d0), d0, 1.0)),
                stats.chi2.sf(ratio * d_each, np.maximum(d_each, 1)),
            )
            own_wins &= tail < own_variance_tail
        post = np.where(own_wins, pooled, post)
        scale = np.sqrt(1.0 / base.n + 1.0 / cand.n)
        se = np.sqrt(post) * scale
        difference = cand.mean - base.mean
        t = difference / se
    df = np.where(own_wins, d_each, d_each + d0)
    testable = (base.n >= 1) & (cand.n >= 1) & (d_each + np.where(np.isfinite(d0), d0, 1.0) >= 1)
    testable &= np.isfinite(difference)
    degenerate = testable & ~(post > ZERO_VARIANCE)
    p = np.where(testable & ~degenerate, t_cdf(np.where(degenerate, 0.0, t), df), np.nan)
    if degenerate.any():
        exact = exact_separation_p(cand.n[degenerate], base.n[degenerate])
        p[degenerate] = np.where(difference[degenerate] < -ZERO_DIFFERENCE, exact, 1.0)
    # pass/fail repeats: the moderated t is anti-conservative on 0/1 scores (their variance is a
    # function of the mean: passing 3 of 5 times then 0 of 5 gives t ~ -2.4, p ~ 0.015, where an exact
    # test says 0.03-0.08), so they get an exact test of their own repeats instead
    binary = testable & pass_fail_scenarios(base, cand, pooled)
    if binary_test != "moderated" and binary.any():
        p[binary] = binary_drop_p(base, cand, binary, barnard=binary_test == "barnard")
    p_floor, collapse = _floor_tests(base, cand, floor, testable)
    return ScenarioTests(difference, np.where(testable, se, np.nan), df, p, p_floor, collapse, prior)


def binary_repeats(moments: Moments) -> np.ndarray:
    """(R, m) bool: every scored repeat of the scenario is exactly 0 or 1 (a pass/fail rubric).

    Read from the moments alone: for scores in [0, 1], Σx² <= Σx with equality iff every x is 0 or 1,
    so the sample variance reaches the Bernoulli maximum n p(1 - p)/(n - 1) exactly then (a single
    repeat: its mean is 0 or 1). Passes = mean * n must be a whole number. Tolerance `BINARY_TOLERANCE`.
    """
    n, mean = moments.n, moments.mean
    with np.errstate(invalid="ignore", divide="ignore"):
        passes = mean * n
        whole = np.abs(passes - np.rint(passes)) <= BINARY_TOLERANCE * np.maximum(n, 1.0)
        bernoulli = np.where(n >= 2, n * mean * (1.0 - mean) / (n - 1.0), np.nan)
        at_max = np.where(
            n >= 2,
            np.abs(moments.var - bernoulli) <= BINARY_TOLERANCE,
            (np.abs(mean) <= BINARY_TOLERANCE) | (np.abs(mean - 1.0) <= BINARY_TOLERANCE),
        )
    return np.asarray((n >= 1) & whole & at_max)


def pass_fail_scenarios(base: Moments, cand: Moments, pooled: np.ndarray) -> np.ndarray:
    """(R, m) bool: the scenarios tested on their pass counts rather than by the moderated t.

    A scenario whose repeats are all 0 or 1 in both builds (`binary_repeats`) qualifies when its repeats
    vary, or when some other scenario of the replication has varying 0/1 repeats: the rubric then yields
    pass/fail scenarios, and 3 passes of 3 followed by 0 of 3 is a 1-in-64 event for a scenario passing
    half the time, not the impossibility the graded scenarios' variances would make it. A constant 0/1
    scenario in a suite without any varying 0/1 scenario (a graded rubric that hit its ends, e.g. 1, 1, 1
    then 0, 0, 0) keeps the moderated t, which borrows the graded scenarios' variance.
    """
    binary = binary_repeats(base) & binary_repeats(cand)
    varies = np.nan_to_num(pooled) > ZERO_VARIANCE
    suite_pass_fail = (varies & binary).any(axis=1)
    return np.asarray(binary & (varies | suite_pass_fail[:, None]))


def binary_drop_p(base: Moments, cand: Moments, where: np.ndarray, *, barnard: bool = False) -> np.ndarray:
    """One-sided exact p that the candidate passes less often, for the (R, m) cells `where`.

    Fisher's exact test, conditional on the scenario's total passes (hypergeometric): its size is at
    most alpha whatever the pass rate, always-pass and always-fail scenarios included (p = 1 there).
    It is conservative, and at 3 + 3 repeats its smallest p is 1/20. `barnard`: Barnard's unconditional
    exact test (pooled Wald statistic, p maximised over the common pass rate; 1/64 at 3/3 -> 0/3), kept
    for the benchmark's trade-off table: the collapse rule's share of alpha, given to the scenarios that
    fell, makes it block an unchanged pass/fail suite too often (docs/methods.md).
    A candidate passing at least as often as the baseline gets p = 1.
    """
    key = np.stack(
        [
            base.n[where],
            cand.n[where],
            np.rint(base.mean[where] * base.n[where]),
            np.rint(cand.mean[where] * cand.n[where]),
        ]
    ).astype(np.int64)
    distinct, inverse = np.unique(key, axis=1, return_inverse=True)
    values = np.array([_exact_drop(*(int(v) for v in column), barnard) for column in distinct.T])
    return np.asarray(values[np.ravel(inverse)])


@functools.lru_cache(maxsize=4096)
def _exact_drop(n_b: int, n_c: int, pass_b: int, pass_c: int, barnard: bool) -> float:
    if pass_c * n_b >= pass_b * n_c:  # the candidate's pass rate is not lower: no drop
        return 1.0
    table = [[pass_b, pass_c], [n_b - pass_b, n_c - pass_c]]  # columns: baseline, candidate
    test = stats.barnard_exact if barnard else stats.fisher_exact
    return float(min(1.0, test(table, alternative="greater").pvalue))


def exact_separation_p(n_c: np.ndarray | float, n_b: np.ndarray | float) -> np.ndarray:
    """Smallest one-sided p an exact two-sample test can give: 1 / C(n_c + n_b, n_c)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1.0 / special.comb(np.asarray(n_c, dtype=float) + n_b, n_c))


def _floor_tests(
    base: Moments, cand: Moments, floor: float | None, testable: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    if floor is None:
        return np.where(testable, 1.0, np.nan), np.zeros(testable.shape, dtype=bool)
    bc = np.nan_to_num(cand.below).astype(np.int64)
    bb = np.nan_to_num(base.below).astype(np.int64)
    nc = np.nan_to_num(cand.n).astype(np.int64)
    nb = np.nan_to_num(base.n).astype(np.int64)
    # one-sided Fisher: P(X >= bc), X ~ hypergeometric(total nc+nb, successes bc+bb, draws nc);
    # 1 wherever the candidate has no more repeats below the floor than the baseline
    p = np.where(testable, 1.0, np.nan)
    some = testable & (bc > bb)
    if some.any():
        p[some] = stats.hypergeom.sf(bc[some] - 1, (nc + nb)[some], (bc + bb)[some], nc[some])
    # "fell below the floor": the scenario's mean below it, or most of its repeats and at least 3
    cand_below = (cand.mean < floor) | ((bc > nc / 2.0) & (bc >= 3))
    base_above = (base.mean >= floor) & (bb <= nb / 2.0)
    collapse = testable & cand_below & base_above
    return np.asarray(p), np.asarray(collapse)


@dataclass(frozen=True)
class MeanTest:
    """The suite mean drop, (R,) arrays. `p_drop`: paired one-sided t; `p_beyond`: drop beyond the band."""

    n: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    p_drop: np.ndarray
    p_beyond: np.ndarray
    band: np.ndarray  # half-width of the band over the compared scenarios (NaN: no band)
    band_df: np.ndarray  # Welch-Satterthwaite degrees of freedom of the band
    constant: np.ndarray  # bool: every difference equal (zero spread by tolerance): no p-values


def band_terms(base: Moments, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sum of per-scenario variance terms u_i = 2 s_i²/K_i over usable scenarios, Σ u_i²/(K_i-1), count)."""
    usable = mask & (base.n >= 2) & np.isfinite(base.var)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(usable, 2.0 * base.var / base.n, 0.0)
        u2 = np.where(usable, u**2 / (base.n - 1), 0.0)
    return u.sum(axis=1), u2.sum(axis=1), usable.sum(axis=1)


def band_half_width(
    sum_u: np.ndarray, sum_u2: np.ndarray, n_usable: np.ndarray, between: float, between_df: int, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Suite band half-width, its Welch-Satterthwaite df and the standard error of the half-width.

    Variance of the difference of two re-runs' suite means: V = Σ u_i / n² + 2 τ² (τ² the
    between-build variance of a suite mean, from a registered unchanged rebuild; 0 without one).
    ν = V² / (Σ (u_i/n²)²/(K_i-1) + (2τ²)²/between_df); half-width t(level, ν) sqrt(V). The
    half-width's own standard error is t sqrt(Var V̂ / (4 V)) with Var V̂ = 2 Σ (term²/df) (delta method).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        n2 = np.where(n_usable > 0, n_usable.astype(float) ** 2, np.nan)
        var = sum_u / n2 + 2.0 * between
        denominator = sum_u2 / n2**2 + ((2.0 * between) ** 2 / between_df if between_df else 0.0)
        nu = np.where(denominator > 0, var**2 / denominator, np.inf)
        quantile = np.where(
            np.isfinite(nu), stats.t.ppf(0.5 + level / 2.0, np.where(np.isfinite(nu), nu, 1)), 0
        )
        quantile = np.where(np.isfinite(nu), quantile, stats.norm.ppf(0.5 + level / 2.0))
        half = np.where(var > 0, quantile * np.sqrt(var), np.where(n_usable > 0, 0.0, np.nan))
        se_half = np.where(var > 0, quantile * np.sqrt(2.0 * denominator / (4.0 * var)), 0.0)
    return half, nu, np.where(np.isfinite(half), se_half, np.nan)


def mean_test(tests: ScenarioTests, base: Moments, between: float, between_df: int, level: float) -> MeanTest:
    """Paired one-sided t on the per-scenario differences, and the drop-beyond-the-band test.

    p_beyond tests H0 "the drop is no larger than the band" with the band's own uncertainty:
    T = (mean + half) / sqrt(se² + se_half²) on n-1 df. Every difference equal (within 1e-9): no
    p-values; the drop is compared to the band directly (p 0 when beyond it, else 1 for the rule).
    """
    d = tests.difference
    valid = np.isfinite(d)
    n = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(np.where(valid, d, 0.0), axis=1) / np.where(n > 0, n, np.nan)
        dev = np.where(valid, d - mean[:, None], 0.0)
        sd = np.sqrt((dev**2).sum(axis=1) / np.where(n > 1, n - 1, np.nan))
        se = sd / np.sqrt(n)
        spread = np.where(valid, d, np.nan)
        constant = (n >= 2) & ((np.nanmax(spread, axis=1) - np.nanmin(spread, axis=1)) <= ZERO_DIFFERENCE)
        sum_u, sum_u2, n_usable = band_terms(base, valid)
        half, band_df, se_half = band_half_width(sum_u, sum_u2, n_usable, between, between_df, level)
        df = np.where(n > 1, n - 1, np.nan)
        p_drop = np.where(constant | (n < 2), np.nan, t_cdf(mean / se, df))
        beyond_t = (mean + half) / np.sqrt(se**2 + se_half**2)
        p_beyond = np.where(constant | (n < 2) | ~np.isfinite(half), np.nan, t_cdf(beyond_t, df))
    return MeanTest(n, mean, se, p_drop, p_beyond, half, band_df, constant)


def mean_rule_p(test: MeanTest) -> tuple[np.ndarray, np.ndarray]:
    """p-values the rules act on: a constant drop beyond the band is 0 (certain), else 1; NaN -> 1."""
    beyond_constant = test.constant & np.isfinite(test.band) & (test.mean < -test.band - ZERO_DIFFERENCE)
    drop_constant = test.constant & (test.mean < -ZERO_DIFFERENCE)
    p_beyond = np.where(
        test.constant, np.where(beyond_constant, 0.0, 1.0), np.nan_to_num(test.p_beyond, nan=1.0)
    )
    p_drop = np.where(test.constant, np.where(drop_constant, 0.0, 1.0), np.nan_to_num(test.p_drop, nan=1.0))
    return p_beyond, p_drop


@dataclass(frozen=True)
class Concentrated:
    """Concentrated-drop test, (R,) arrays: S = Σ min(u_i, 0)² and its p-value; `u` is (R, m)."""

    statistic: np.ndarray
    p: np.ndarray
    count: np.ndarray
    u: np.ndarray


def concentrated_test(
    tests: ScenarioTests, exclude: np.ndarray | None = None, centre_from: ScenarioTests | None = None
) -> Concentrated:
    """Do some scenarios drop more than the rest, whatever the mean did?

    Each difference is centred on the suite's MEDIAN difference (robust to the compensating gains),
    divided by its moderated standard error and mapped through its t distribution to a normal score
    u_i. Under "every scenario moved alike" the u_i are about N(0, 1), so S = Σ min(u_i, 0)² is a
    chi-bar-squared: χ² with k df, k ~ Binomial(m, 1/2). The p-value is that mixture's tail, exactly.
    `exclude` (R, m) leaves scenarios out (those already blocked on their own, see `compare`).
    `centre_from`: take the median from these tests' differences instead (adaptive repeats: the first
    look's, where every scenario had its first repeats; at the second look the scenarios left at the
    first look keep the differences that stopped them, which would bias the median up).
    """
    d = tests.difference
    valid = np.isfinite(d) & np.isfinite(tests.se) & (tests.se > np.sqrt(ZERO_VARIANCE))
    if exclude is not None:
        valid &= ~exclude
    source = d if centre_from is None else centre_from.difference
    usable = valid & np.isfinite(source)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row without a valid scenario has no centre
        centre = (
            np.median(source, axis=1)
            if usable.all()
            else np.nanmedian(np.where(usable, source, np.nan), axis=1)
        )
        z = np.where(valid, (d - centre[:, None]) / tests.se, 0.0)
        u = np.where(valid, t_to_normal(z, tests.df), 0.0)
    u = np.where(valid, np.clip(u, -40.0, 40.0), np.nan)
    statistic = np.nansum(np.minimum(np.nan_to_num(u), 0.0) ** 2, axis=1)
    count = valid.sum(axis=1)
    return Concentrated(statistic, chi_bar_sf(statistic, count), count, u)


def chi_bar_sf(statistic: np.ndarray, m: np.ndarray) -> np.ndarray:
    """P(Σ_{i<=m} min(Z_i, 0)² >= s) for iid N(0,1) Z_i: Σ_k Bin(k; m, 1/2) χ²_k.sf(s) (χ²_0 = point 0)."""
    statistic = np.asarray(statistic, dtype=float)
    m = np.asarray(m, dtype=np.int64)
    out = np.ones(statistic.shape)
    for size in np.unique(m):
        rows = m == size
        if size == 0:
            continue
        spread = int(np.ceil(8.0 * np.sqrt(size) / 2.0)) + 2
        k = np.arange(max(1, size // 2 - spread), min(size, size // 2 + spread) + 1)
        weights = stats.binom.pmf(k, size, 0.5)
        tail = stats.chi2.sf(statistic[rows][:, None], k[None, :]) @ weights
        zero = stats.binom.pmf(0, size, 0.5) * (statistic[rows] <= 0.0)
        out[rows] = np.clip(tail + zero, 0.0, 1.0)
    return out


# A p-value at its threshold in exact arithmetic (p = alpha w / total) is rejected however the floats
# of w and total rounded: weighted_holm and holm_blocks sum the same weights in different orders.
TIE = 1e-9


def weighted_holm(p: np.ndarray, w: np.ndarray, alpha: float) -> np.ndarray:
    """Weighted Holm (Holm 1979) per row: (R, h) p-values and weights -> (R, h) bool rejections.

    Order hypotheses by p/w; the j-th is rejected when p_(j) <= alpha w_(j) / Σ_{k>=j} w_(k) and every
    earlier one was. Hypotheses with weight 0 or a NaN p are never rejected. FWER <= alpha.
    """
    p = np.where(np.isfinite(p) & (w > 0), p, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(w > 0, p / w, np.inf)
    order = np.argsort(ratio, axis=1, kind="stable")
    ws = np.take_along_axis(w, order, axis=1)
    rs = np.take_along_axis(ratio, order, axis=1)
    remaining = np.cumsum(ws[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        passes = (rs <= alpha / remaining * (1 + TIE)) & np.isfinite(rs)  # inf: weight 0 or no p, never rejected
    rejected_sorted = np.cumprod(passes, axis=1).astype(bool)
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, rejected_sorted, axis=1)
    return out


def bh_any(p: np.ndarray, q: float) -> np.ndarray:
    """Whether Benjamini-Hochberg at level q makes any discovery in each row (NaN p not tested)."""
    tested = np.isfinite(p)
    m = tested.sum(axis=1)
    ordered = np.sort(np.where(tested, p, np.inf), axis=1)
    ranks = np.arange(1, p.shape[1] + 1)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            ((ordered <= ranks * q / np.maximum(m, 1)[:, None]) & (ranks <= m[:, None])).any(axis=1)
        )


@dataclass(frozen=True)
class Sufficiency:
    """Evidence sufficiency per replication (R,): the reasons a report cannot be trusted to allow."""

    n_scenarios: np.ndarray
    thin_share: np.ndarray  # share of compared scenarios with < MIN_REPEATS scored repeats in a build
    unscored_share_base: np.ndarray
    unscored_share_cand: np.ndarray
    thin_share_base: np.ndarray  # the same share in each build alone: which build is thin
    thin_share_cand: np.ndarray

    def insufficient(self) -> np.ndarray:
        return np.asarray(
            (self.n_scenarios < MIN_SCENARIOS)
            | (self.thin_share > MAX_THIN_SHARE)
            | (self.unscored_share_base > MAX_UNSCORED_SHARE)
            | (self.unscored_share_cand > MAX_UNSCORED_SHARE)
        )


MIN_SCENARIOS: Final = 5  # fewer compared scenarios: the mean test has < 4 df, the prior < 5 variances
MIN_REPEATS: Final = 2  # scored repeats a scenario needs in each build to carry a variance
MAX_THIN_SHARE: Final = 0.10  # more compared scenarios than this below MIN_REPEATS: insufficient
MAX_UNSCORED_SHARE: Final = 0.20  # more failed/excluded verdict rows than this in a build: insufficient


def evidence(base: Moments, cand: Moments, paired: np.ndarray) -> Sufficiency:
    """Sufficiency figures over the (R, m) paired mask, the shares over every verdict row of a build."""
    n_pairs = paired.sum(axis=1)
    thin_base, thin_cand = paired & (base.n < MIN_REPEATS), paired & (cand.n < MIN_REPEATS)
    with np.errstate(invalid="ignore", divide="ignore"):
        thin_shares = [
            np.where(n_pairs > 0, thin.sum(axis=1) / n_pairs, 1.0)
            for thin in (thin_base | thin_cand, thin_base, thin_cand)
        ]
        shares = [
            1.0
            - np.nansum(b.n, axis=1)
            / np.where(np.nansum(b.rows, axis=1) > 0, np.nansum(b.rows, axis=1), np.nan)
            for b in (base, cand)
        ]
    return Sufficiency(
        n_pairs,
        thin_shares[0],
        np.nan_to_num(shares[0], nan=1.0),
        np.nan_to_num(shares[1], nan=1.0),
        thin_shares[1],
        thin_shares[2],
    )


@dataclass(frozen=True)
class RuleOutcome:
    """Everything the rules decided, per replication. (R,) unless noted."""

    tests: ScenarioTests
    mean: MeanTest
    concentrated: Concentrated
    evidence: Sufficiency
    p_beyond: np.ndarray  # as the rules use it (see mean_rule_p)
    p_drop: np.ndarray
    block_scores: np.ndarray  # bool: any blocking hypothesis rejected
    flag_mean: np.ndarray  # bool: mean drop significant, not blocked (investigate)
    flag_bh: np.ndarray  # bool: a BH discovery among the scenario drops
    insufficient: np.ndarray
    first: ScenarioTests | None = None  # the first look's own tests (adaptive repeats), p uncombined
    looks: Looks | None = None

    @property
    def block(self) -> np.ndarray:
        return self.block_scores

    @property
    def flag(self) -> np.ndarray:
        return np.asarray(self.block_scores | self.flag_mean | self.flag_bh | self.insufficient)


def holm_inputs(
    tests: ScenarioTests, p_beyond: np.ndarray, conc: Concentrated, budget: Budget
) -> tuple[np.ndarray, np.ndarray]:
    """The blocking family as (R, 2 + 3m) p-values and weights, columns: mean, concentrated, drops,
    floor tests, collapses (m each). Per-scenario weights are shared over the tested scenarios. A
    hypothesis without a p-value (no mean test, a concentrated test without p, a floor test where the
    rubric has no floor) weighs 0: it is not in the family, exactly as `holm_blocks` (the decision's
    path) leaves it out, so the findings a report names are the ones that decided it."""
    tested = np.isfinite(tests.p_drop)
    m = np.maximum(tested.sum(axis=1, keepdims=True), 1)
    eligible = tests.collapse & tested
    m_collapse = np.maximum(eligible.sum(axis=1, keepdims=True), 1)
    w_drop = np.where(tested, budget.w_drop / m, 0.0)
    w_floor = np.where(tested & np.isfinite(tests.p_floor), budget.w_floor / m, 0.0)
    w_collapse = np.where(eligible, budget.w_collapse / m_collapse, 0.0)
    w_mean = np.where(np.isfinite(p_beyond), budget.w_mean, 0.0)[:, None]
    counted = (conc.count >= MIN_SCENARIOS) & np.isfinite(conc.p)
    w_conc = np.where(counted, budget.w_concentrated, 0.0)[:, None]
    p_scenario = tests.p_drop
    p = np.concatenate(
        [
            p_beyond[:, None],
            conc.p[:, None],
            p_scenario,
            tests.p_floor,
            np.where(eligible, p_scenario, np.nan),
        ],
        axis=1,
    )
    w = np.concatenate([w_mean, w_conc, w_drop, w_floor, w_collapse], axis=1)
    return p, w


def holm_blocks(tests: ScenarioTests, p_beyond: np.ndarray, conc: Concentrated, budget: Budget) -> np.ndarray:
    """Whether weighted Holm over `holm_inputs` rejects anything in each row, without building them.

    Weighted Holm rejects something iff its first step does: min p/w <= alpha / (sum of the weights of
    the testable hypotheses). Within each per-scenario block the weights are equal, so the block's
    smallest p/w is its smallest p over its weight; the result equals `weighted_holm(*holm_inputs(...), alpha)
    .any(axis=1)` (pinned by a test) at a fraction of the memory and time on (replications, scenarios) arrays.
    """
    tested = np.isfinite(tests.p_drop)
    n_tested = tested.sum(axis=1)
    m = np.maximum(n_tested, 1).astype(float)
    eligible = tests.collapse & tested
    n_eligible = eligible.sum(axis=1)
    floor_usable = tested & np.isfinite(tests.p_floor)
    n_floor = floor_usable.sum(axis=1)
    w_conc = np.where(conc.count >= MIN_SCENARIOS, budget.w_concentrated, 0.0)
    inf = np.inf
    with np.errstate(invalid="ignore", divide="ignore"):
        blocks = [
            (
                np.where(np.isfinite(p_beyond), p_beyond / budget.w_mean, inf),
                np.isfinite(p_beyond) * budget.w_mean,
            ),
            (
                np.where(np.isfinite(conc.p) & (w_conc > 0), conc.p / w_conc, inf),
                np.isfinite(conc.p) * w_conc,
            ),
            (
                np.min(np.where(tested, tests.p_drop, inf), axis=1) * m / budget.w_drop,
                n_tested * (budget.w_drop / m),
            ),
            (
                np.min(np.where(floor_usable, tests.p_floor, inf), axis=1) * m / budget.w_floor,
                n_floor * (budget.w_floor / m),
            ),
            (
                np.min(np.where(eligible, tests.p_drop, inf), axis=1)
                * np.maximum(n_eligible, 1)
                / budget.w_collapse,
                (n_eligible > 0) * budget.w_collapse,
            ),
        ]
        ratio = np.min(np.stack([np.where(w > 0, r, inf) for r, w in blocks]), axis=0)
        total = np.sum(np.stack([w for _, w in blocks]), axis=0)
        return np.asarray(ratio * total <= budget.report_alpha * (1 + TIE))


@dataclass(frozen=True)
class Looks:
    """A comparison made in two looks (docs/methods.md: adaptive repeats).

    `interim` is the candidate's moments at the first look (its first repeats of every scenario),
    `topped` (R, m) the scenarios topped up after it; `shares` the alpha shares (w1, w2) the spending
    rule gives the two looks. Every blocking and flagging p-value becomes min(p1 / w1, p2 / w2): a
    Bonferroni split of each hypothesis's alpha over its looks, valid under any dependence between
    them. The suite's tests (mean, concentrated) spend `shares`, and have a second look when some
    scenario of the replication was topped up. A scenario's own tests (drop, floor, collapse) spend
    `scenario_shares`, by default nothing at the first look: a scenario blocks or is flagged only on
    the repeats of its second look, so one not topped up cannot (the first look's tests on three
    repeats are anti-conservative on coarse scores at the ceiling: 0.33, 0.33, 0.67 against five
    repeats at 1.0 has moderated-t p 6e-6 where its exact separation p is 1/56; docs/methods.md).
    """

    interim: Moments
    topped: np.ndarray
    shares: tuple[float, float]
    scenario_shares: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        for shares in (self.shares, self.scenario_shares):
            first, second = shares
            if not (first >= 0.0 and second >= 0.0 and abs(first + second - 1.0) <= 1e-9):
                raise ValueError(
                    f"the looks' alpha shares must be >= 0 and sum to 1 (the error budget holds across "
                    f"looks), not {shares}"
                )


def combine_looks(
    first: np.ndarray, second: np.ndarray, looked: np.ndarray, shares: tuple[float, float]
) -> np.ndarray:
    """min(p1 / w1, p2 / w2) where the second look happened (`looked`), else p1 / w1; capped at 1.

    NaN where neither look could test the hypothesis; a share of 0 never rejects on its look."""
    w1, w2 = shares
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        one = np.where(np.isfinite(first), first / w1 if w1 > 0 else np.inf, np.inf)
        two = np.where(looked & np.isfinite(second), second / w2 if w2 > 0 else np.inf, np.inf)
    tested = np.isfinite(first) | (looked & np.isfinite(second))
    return np.where(tested, np.minimum(np.minimum(one, two), 1.0), np.nan)


def _masked(moments: Moments, keep: np.ndarray) -> Moments:
    if keep.all():
        return moments
    return Moments(
        n=np.where(keep, moments.n, np.nan),
        mean=np.where(keep, moments.mean, np.nan),
        var=np.where(keep, moments.var, np.nan),
        below=np.where(keep, moments.below, np.nan),
        rows=moments.rows,
    )


def evaluate(
    base: Moments,
    cand: Moments,
    floor: float | None,
    budget: Budget,
    *,
    between: float = 0.0,
    between_df: int = 0,
    level: float = 0.95,
    binary_test: BinaryTest = "fisher",
    own_variance_tail: float = 1.0,
    looks: Looks | None = None,
) -> RuleOutcome:
    """Run every score rule on (R, m) moments; see the module docstring for the error budget.

    `looks`: the candidate was topped up after a first look (adaptive repeats): every p-value the
    rules act on combines the two looks (`Looks`), the rules themselves are unchanged.
    `binary_test` other than "fisher" and `own_variance_tail` below 1 only for the calibration
    benchmarks' trade-off tables (`scenario_tests`)."""
    paired = (base.n >= 1) & (cand.n >= 1)
    ev = evidence(base, cand, paired)
    base, cand = _masked(base, paired), _masked(cand, paired)
    tests = scenario_tests(base, cand, floor, binary_test, own_variance_tail)
    mean = mean_test(tests, base, between, between_df, level)
    p_beyond, p_drop = mean_rule_p(mean)
    conc = concentrated_test(tests)
    first: ScenarioTests | None = None
    if looks is not None:
        first = scenario_tests(base, _masked(looks.interim, paired), floor, binary_test, own_variance_tail)
        first_beyond, first_drop = mean_rule_p(mean_test(first, base, between, between_df, level))
        suite = np.broadcast_to(looks.topped.any(axis=1), p_beyond.shape)
        p_beyond = combine_looks(first_beyond, p_beyond, suite, looks.shares)
        p_drop = combine_looks(first_drop, p_drop, suite, looks.shares)
        conc = _combined_concentrated(first, tests, looks, None)
        tests = replace(
            tests,
            p_drop=combine_looks(first.p_drop, tests.p_drop, looks.topped, looks.scenario_shares),
            p_floor=combine_looks(first.p_floor, tests.p_floor, looks.topped, looks.scenario_shares),
        )
    block = holm_blocks(tests, p_beyond, conc, budget)
    flag_mean = p_drop < budget.report_flag
    flag_bh = bh_any(tests.p_drop, budget.report_flag)
    return RuleOutcome(
        tests, mean, conc, ev, p_beyond, p_drop, block, flag_mean, flag_bh, ev.insufficient(), first, looks
    )


def _combined_concentrated(
    first: ScenarioTests, final: ScenarioTests, looks: Looks, exclude: np.ndarray | None
) -> Concentrated:
    """The concentrated-drop test at both looks, its p combined (`combine_looks`); statistic and
    scores are the final look's (they describe all the data)."""
    # every scenario topped up (or not comparable): the second look has the fixed design's repeats and
    # its own median; otherwise the first look's, where every scenario had its first repeats
    full = np.asarray((looks.topped | ~np.isfinite(final.difference)).all(axis=1), dtype=bool)
    centre = replace(first, difference=np.where(full[:, None], final.difference, first.difference))
    one, two = concentrated_test(first, exclude), concentrated_test(final, exclude, centre_from=centre)
    suite = np.asarray(looks.topped.any(axis=1), dtype=bool)
    return replace(two, p=combine_looks(one.p, two.p, suite, looks.shares))


def concentrated_without(outcome: RuleOutcome, exclude: np.ndarray) -> Concentrated:
    """The concentrated-drop test of `outcome` once more without the `exclude` (R, m) scenarios, over
    the same looks as the outcome (the report's re-test without the scenarios blocked on their own)."""
    if outcome.looks is None or outcome.first is None:
        return concentrated_test(outcome.tests, exclude)
    return _combined_concentrated(outcome.first, outcome.tests, outcome.looks, exclude)
