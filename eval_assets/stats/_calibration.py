"""Calibration of a new judge version against the version it replaces (docs/methods.md: bridges, bridge runs).

Single-group design (Kolen & Brennan): both versions scored the SAME stored outputs, so each output
gives a pair (old_score, new_score). Scores are in RUBRIC POINTS: for a rubric whose criteria all share
one numeric scale [lo, hi] a score is the weighted mean of its criterion values on that scale
(= lo + normalised score * (hi - lo)), so a judge that adds b points to every criterion moves it by b.
A rubric without one shared numeric scale (labels, bools, mixed scales) has no natural point: its
scores are the normalised [0, 1] aggregate and the caller states what one rubric point is in those
units (`point_size`, see eval_assets/bridge.py). Every figure below is in the frame's units.

Published, per docs/methods.md: bridges (G = number of scenarios, the unit of inference, docs/methods.md: unit of inference):
- offset = mean(new - old) over the paired outputs. Its CI is offset +/- t(G - 1) * SE with a
  cluster-robust SE whose clusters are the scenarios: CR2 (Bell & McCaffrey 2002), which for a mean is
  SE^2 = sum_g E_g^2 / (1 - n_g / n) / n^2, E_g the scenario's sum of residuals (d - offset), n_g its
  outputs. With equal n_g it is CR1, and the CI is exactly the t interval on the G scenario means. The
  t quantile on G - 1 degrees of freedom is Cameron & Miller's (2015) few-cluster rule. (It replaced a
  percentile cluster bootstrap, whose resampled variance shrinks by (G - 1) / G and which uses no t
  quantile: it covered a known bias 86% of the time at 5 scenarios. Measured coverage of this interval:
  benchmarks/bridge_calibration.py and docs/methods.md, "Bridges".)
- SD of the differences and Bland-Altman limits offset +/- z * SD.
- The constant-offset check (`constant_offset_test`) and the slope: see `constant_offset_test`. The
  slope is the errors-in-variables slope of the cells' expected new score on their expected old score,
  which neither version's judge noise biases (the OLS slope of new on old is attenuated by the old
  judge's noise, so a pure offset looked "not constant"). When the check rejects a constant offset, the
  linear equating function through the two means with that slope (intercept mean(new) - slope *
  mean(old)) is published instead of a constant.
- Spearman's rho and Krippendorff's alpha (interval metric) between the two versions, and n.
  alpha is computed AFTER calibration: between the new scores and the old scores mapped onto the new
  scale by what is published (old + offset, or the equating function). alpha penalises any systematic
  difference, so before calibration (`krippendorff_alpha_raw`, also reported) a pure bias of b points
  would lower it by itself, and no large offset could ever be published, which is the very thing a
  bridge exists to publish. Calibrated alpha asks the question acceptance needs: once the published
  correction is applied, do the two versions agree on the outputs?
Acceptance to publish: at least MIN_SCENARIOS scenarios, CI half-width <= 0.5 rubric points, the
constant-offset check computable (and, when it rejects, a slope to publish), and (calibrated) alpha >=
0.80. Otherwise `published=False` with one reason per unmet condition. Figures the data cannot support
are None, never 0, and make publication impossible with a reason saying so. Everything here is
closed-form: the same frame always gives the same calibration (no resampling, no rng).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd
from scipy import special, stats

CALIBRATION_COLUMNS: Final = ("build", "scenario_id", "repeat", "old_score", "new_score")
MAX_HALF_WIDTH_POINTS: Final = 0.5
MIN_ALPHA: Final = 0.80
MIN_SCENARIOS: Final = 5
"""Fewer scenarios publish nothing: the offset's t quantile on G - 1 df (12.7 at G = 2, 2.78 at 5)
rests on the scenario means alone, and the constant-offset check compares scenarios with one another."""
_RELATIVE_ZERO: Final = 1e-12  # |figure| below this times the data's own scale is zero (never ==)


class CalibrationFrameError(ValueError):
    """The paired frame is malformed (missing columns, non-finite scores, duplicate items)."""


@dataclass(frozen=True)
class ClusterInterval:
    """offset +/- t(df) * se: the CR2 cluster-robust interval for the mean difference."""

    estimate: float
    se: float
    df: int
    low: float
    high: float


@dataclass(frozen=True)
class ConstantOffsetTest:
    """The constant-offset check (see `constant_offset_test`), in the frame's units."""

    statistic: float  # T: corrected between-cell covariance of (old level, offset)
    se: float  # delete-one-scenario jackknife SE of T
    df: int  # scenarios in the check - 1
    p_value: float
    constant: bool  # False: the check rejects a constant offset at the calibration's level
    level_variance: float  # D: corrected between-cell variance of the old version's level
    slope: float | None  # 1 + T / D (None when D <= 0: the levels do not differ beyond noise)
    slope_low: float | None
    slope_high: float | None


@dataclass(frozen=True)
class Calibration:
    """docs/methods.md: bridges figures for one bridge (old -> new judge version), in the frame's units."""

    n: int
    n_scenarios: int
    level: float
    point_size: float
    offset: float | None
    ci_low: float | None
    ci_high: float | None
    half_width: float | None
    ci_df: int | None  # degrees of freedom of the offset's t quantile (scenarios - 1)
    sd_diff: float | None
    ba_low: float | None
    ba_high: float | None
    slope: float | None  # errors-in-variables slope of the constant-offset check
    slope_ci_low: float | None
    slope_ci_high: float | None
    constant_offset: bool | None  # the check's answer (None: it could not run)
    constant_offset_p: float | None
    equating_intercept: float | None
    equating_slope: float | None
    spearman_rho: float | None
    krippendorff_alpha: float | None  # after calibration (the acceptance figure)
    krippendorff_alpha_raw: float | None  # before calibration
    n_needed: int | None
    published: bool
    reasons: tuple[str, ...]

    def to_new_scale(self, old_score: float) -> float:
        """An old-version score expressed on the new version's scale (trend splicing only).

        Uses the equating function when one is published, else adds the offset. Raises ValueError
        when the calibration is not published: an unpublished bridge splices nothing.
        """
        if not self.published or self.offset is None:
            raise ValueError("calibration not published: " + "; ".join(self.reasons))
        if self.equating_slope is not None and self.equating_intercept is not None:
            return self.equating_intercept + self.equating_slope * old_score
        return old_score + self.offset


def krippendorff_alpha_interval(values: np.ndarray) -> float | None:
    """Krippendorff's alpha with the interval metric (delta^2 = (a - b)^2).

    `values` is (coders, units); NaN marks a missing value. Units with fewer than two values are not
    pairable and are dropped. alpha = 1 - D_o / D_e with
      D_o = (1/n) sum_u sum_{i != j in u} (v_i - v_j)^2 / (m_u - 1)
      D_e = (1/(n (n - 1))) sum_{i != j over all n pairable values} (v_i - v_j)^2,
    each pair sum in closed form (sum_{i != j} (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)).
    None when no unit is pairable or every pairable value is equal (D_e = 0: alpha undefined).
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError("values must be a (coders, units) array")
    mask = ~np.isnan(v)
    m_u = mask.sum(axis=0)
    keep = m_u >= 2
    if not keep.any():
        return None
    v, mask, m_u = v[:, keep], mask[:, keep], m_u[keep]
    pooled = v[mask]
    x = np.where(mask, v - pooled.mean(), 0.0)  # centred: the differences are unchanged, the sums stable
    s1, s2 = x.sum(axis=0), (x * x).sum(axis=0)
    n = float(m_u.sum())
    d_o = float((2.0 * (m_u * s2 - s1 * s1) / (m_u - 1)).sum()) / n
    centred = pooled - pooled.mean()
    d_e = 2.0 * (n * float((centred * centred).sum()) - float(centred.sum()) ** 2) / (n * (n - 1.0))
    if d_e <= 0.0:
        return None
    return 1.0 - d_o / d_e


def _validate(pairs: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in CALIBRATION_COLUMNS if c not in pairs.columns]
    if missing:
        raise CalibrationFrameError(f"missing columns: {', '.join(missing)}")
    frame = pd.DataFrame({c: pairs[c].to_numpy() for c in CALIBRATION_COLUMNS})
    for col in ("old_score", "new_score"):
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise CalibrationFrameError(f"{col} must be finite numbers (a failed verdict is not a pair)")
        frame[col] = values
    if frame.duplicated(["build", "scenario_id", "repeat"]).any():
        raise CalibrationFrameError("duplicate (build, scenario_id, repeat): each output pairs once")
    return frame


def cluster_mean_interval(values: np.ndarray, clusters: np.ndarray, level: float) -> ClusterInterval | None:
    """The mean of `values` with a CR2 cluster-robust SE and a t(G - 1) interval; None for G < 2.

    SE^2 = sum_g E_g^2 / (1 - n_g / n) / n^2, E_g = sum of (value - mean) in cluster g: the Bell-McCaffrey
    bias-reduced sandwich for an intercept-only model (H_gg = J / n, so (I - H_gg)^(-1/2) scales the
    cluster's residual sum by 1 / sqrt(1 - n_g / n)). Balanced clusters: CR1, the t interval on
    cluster means.
    """
    values = np.asarray(values, dtype=float)
    codes, _ = pd.factorize(np.asarray(clusters))
    g = int(codes.max()) + 1 if len(codes) else 0
    if g < 2:
        return None
    n = len(values)
    mean = float(values.mean())
    e_g = np.bincount(codes, weights=values - mean, minlength=g)
    n_g = np.bincount(codes, minlength=g).astype(float)
    se = math.sqrt(float(np.sum(e_g * e_g / (1.0 - n_g / n)))) / n
    q = float(special.stdtrit(g - 1, 0.5 + level / 2.0))
    return ClusterInterval(mean, se, g - 1, mean - q * se, mean + q * se)


def constant_offset_test(frame: pd.DataFrame, level: float) -> ConstantOffsetTest | None:
    """Is the offset constant? A test that neither version's judge noise biases.

    What it tests, exactly. Cells are (build, scenario) groups of paired outputs (cells with fewer
    than two outputs are left out: they carry no estimate of their own noise). For each cell c let
    x_c and d_c be the means of old_score and of d = new - old over its outputs, and w_c the
    within-cell sample covariance of (old_score, d) divided by n_c: an unbiased estimate of the
    covariance of the cell means' own sampling error (the repeats are replicates of the cell). Then
        T = cov_cells(x_c, d_c) - mean_c(w_c.xd),   D = var_cells(x_c) - mean_c(w_c.xx)
    estimate, without bias, the covariance between the cells' EXPECTED old score and EXPECTED offset,
    and the variance of the cells' expected old score (method of moments; Fuller 1987, Measurement
    Error Models, §1.2 and §4.1, with the error covariance estimated from replicates). The null
    hypothesis is: across cells, the expected offset does not vary linearly with the expected old
    score (E[T] = 0). It is rejected ("not constant") when |T| > t(G - 1) * SE(T), SE by the
    delete-one-scenario jackknife, G the scenarios in the check. Judge noise on either version, and
    the output's own deviation from its cell mean that both versions see, enter both cov_cells and
    mean(w_c) alike and cancel, so a pure offset is rejected at about the nominal rate whatever the
    noise; the OLS slope of new on old, which this replaces, is pulled below 1 by the old version's
    noise and rejected a pure offset far more often.

    The slope 1 + T / D (needs D > 0) is the errors-in-variables slope of the cells' expected new
    score on their expected old score: Deming regression generalised to errors that are correlated
    between the two versions, with the error covariance estimated from the repeats instead of a
    variance ratio assumed. Its interval is 1 + (T +/- t * SE(T)) / D (D taken as known), so it
    excludes 1 exactly when the check rejects.

    It does NOT test: whether the offset varies between outputs of one cell (only cell means are
    compared), a dependence on the level with no linear component, or levels outside the range of
    the cells' levels. Its power grows with the spread of the cells' levels (D) and the number of
    scenarios: benchmarks/bridge_calibration.py prints it. None when fewer than 3 scenarios have a
    cell with two or more outputs.
    """
    x = frame["old_score"].to_numpy(dtype=float)
    d = frame["new_score"].to_numpy(dtype=float) - x
    if len(x) == 0:
        return None
    x, d = x - x.mean(), d - d.mean()  # covariances unchanged, sums of squares stable
    scen_of_row, _ = pd.factorize(frame["scenario_id"])
    build_of_row, _ = pd.factorize(frame["build"])
    cells, cell = np.unique(build_of_row * (int(scen_of_row.max()) + 1) + scen_of_row, return_inverse=True)
    n_c = np.bincount(cell).astype(float)

    def per_cell(v: np.ndarray) -> np.ndarray:
        return np.bincount(cell, weights=v, minlength=len(n_c))

    keep = n_c >= 2
    n_k = n_c[keep]
    xm, dm = per_cell(x)[keep] / n_k, per_cell(d)[keep] / n_k
    w_xx = (per_cell(x * x)[keep] - n_k * xm * xm) / ((n_k - 1.0) * n_k)
    w_xd = (per_cell(x * d)[keep] - n_k * xm * dm) / ((n_k - 1.0) * n_k)
    _, scen = np.unique((cells % (int(scen_of_row.max()) + 1))[keep], return_inverse=True)
    g = int(scen.max()) + 1 if len(scen) else 0
    if g < 3:
        return None
    parts = np.vstack([np.ones_like(xm), xm, dm, xm * xm, xm * dm, w_xx, w_xd])
    by_scenario = np.vstack([np.bincount(scen, weights=row, minlength=g) for row in parts])
    total = by_scenario.sum(axis=1)
    t_all, d_all = _moments(total[:, None])
    t_loo, _ = _moments(total[:, None] - by_scenario)
    t_stat, level_var = float(t_all[0]), float(d_all[0])
    se = math.sqrt((g - 1) / g * float(np.sum((t_loo - t_loo.mean()) ** 2)))
    q = float(special.stdtrit(g - 1, 0.5 + level / 2.0))
    tol = _RELATIVE_ZERO * (1.0 + float(np.mean(x * x)) + float(np.mean(d * d)))
    if se <= tol:
        constant = abs(t_stat) <= tol
        p_value = 1.0 if constant else 0.0
    else:
        constant = abs(t_stat) <= q * se
        p_value = float(2.0 * special.stdtr(g - 1, -abs(t_stat) / se))
    slope = s_low = s_high = None
    if level_var > tol:
        slope = 1.0 + t_stat / level_var
        s_low, s_high = 1.0 + (t_stat - q * se) / level_var, 1.0 + (t_stat + q * se) / level_var
    return ConstantOffsetTest(t_stat, se, g - 1, p_value, constant, level_var, slope, s_low, s_high)


def _moments(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """T and D (see `constant_offset_test`) from column(s) of summed cell figures
    (cells, sum x_c, sum d_c, sum x_c^2, sum x_c d_c, sum w_c.xx, sum w_c.xd)."""
    c, s_x, s_d, s_xx, s_xd, w_xx, w_xd = sums
    cov_xd = (s_xd - s_x * s_d / c) / (c - 1.0)
    var_x = (s_xx - s_x * s_x / c) / (c - 1.0)
    return cov_xd - w_xd / c, var_x - w_xx / c


def _none_if_nan(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def calibrate(
    pairs: pd.DataFrame,
    *,
    point_size: float = 1.0,
    level: float = 0.95,
    max_half_width_points: float = MAX_HALF_WIDTH_POINTS,
    min_alpha: float = MIN_ALPHA,
    min_scenarios: int = MIN_SCENARIOS,
) -> Calibration:
    """Calibrate a new judge version against an old one over paired per-output scores.

    `pairs` has columns `CALIBRATION_COLUMNS`: one row per stored output (build, scenario_id, repeat)
    that BOTH versions scored; scores are finite, in rubric points (or normalised units, see the
    module docstring). `point_size` is one rubric point in those units (1.0 for rubric points), so the
    acceptance is `half_width <= max_half_width_points * point_size` and `alpha >= min_alpha`.
    Deterministic. An empty frame gives a Calibration with n=0, every figure None and
    `published=False`.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not point_size > 0.0:
        raise ValueError(f"point_size must be positive, got {point_size}")
    frame = _validate(pairs)
    n = len(frame)
    n_scen = int(frame["scenario_id"].nunique())
    z = float(special.ndtri(0.5 + level / 2.0))
    old, new = frame["old_score"].to_numpy(), frame["new_score"].to_numpy()
    d = new - old
    reasons: list[str] = []
    limit = max_half_width_points * point_size
    unit = "rubric points" if point_size == 1.0 else f"rubric points (1 point = {point_size:g})"

    offset = float(d.mean()) if n else None
    sd = float(d.std(ddof=1)) if n >= 2 else None
    ba_low = None if offset is None or sd is None else offset - z * sd
    ba_high = None if offset is None or sd is None else offset + z * sd
    interval = cluster_mean_interval(d, frame["scenario_id"].to_numpy(), level) if n else None
    check = constant_offset_test(frame, level)

    if not n:
        reasons.append("no output was scored by both judge versions")
    elif n_scen < min_scenarios:
        reasons.append(
            f"{n_scen} scenario{'s' if n_scen != 1 else ''}: a bridge needs at least {min_scenarios} "
            f"(the offset's interval has scenarios - 1 degrees of freedom, and the constant-offset check "
            "compares scenarios)"
        )
    elif check is None:
        reasons.append(
            "the constant-offset check cannot run: it needs at least 3 scenarios with two or more paired "
            "outputs of one build"
        )

    eq_slope = eq_intercept = None
    if check is not None and not check.constant:
        if check.slope is None:
            reasons.append(
                f"the offset is not constant (check p = {check.p_value:.3g}) and no equating slope can be "
                "estimated: the old version's scenario levels do not differ beyond their own noise"
            )
        else:
            eq_slope = check.slope
            eq_intercept = float(new.mean()) - eq_slope * float(old.mean())

    rho = None
    if n >= 2 and np.ptp(old) > 0 and np.ptp(new) > 0:
        rho = _none_if_nan(float(stats.spearmanr(old, new).statistic))
    alpha_raw = krippendorff_alpha_interval(np.vstack([old, new])) if n else None
    alpha = None
    if offset is not None:
        mapped = old + offset if eq_slope is None or eq_intercept is None else eq_intercept + eq_slope * old
        alpha = krippendorff_alpha_interval(np.vstack([mapped, new]))

    half = None if interval is None else (interval.high - interval.low) / 2.0
    n_needed = None if sd is None else math.ceil((z * sd / limit) ** 2)
    if half is not None and half > limit:
        reasons.append(
            f"{level:.0%} CI half-width {half / point_size:.3f} > {max_half_width_points:g} {unit} "
            f"(SD of differences {sd:.3f}: about {n_needed} paired outputs needed, have {n})"
        )
    if n and alpha is None:
        reasons.append("Krippendorff's alpha is undefined: every score is the same")
    elif alpha is not None and alpha < min_alpha:
        reasons.append(
            f"Krippendorff's alpha {alpha:.3f} < {min_alpha:.2f} after calibration: the two versions "
            "disagree too much for an offset to bridge them"
        )

    return Calibration(
        n=n,
        n_scenarios=n_scen,
        level=level,
        point_size=point_size,
        offset=offset,
        ci_low=None if interval is None else interval.low,
        ci_high=None if interval is None else interval.high,
        half_width=half,
        ci_df=None if interval is None else interval.df,
        sd_diff=sd,
        ba_low=ba_low,
        ba_high=ba_high,
        slope=None if check is None else check.slope,
        slope_ci_low=None if check is None else check.slope_low,
        slope_ci_high=None if check is None else check.slope_high,
        constant_offset=None if check is None else check.constant,
        constant_offset_p=None if check is None else check.p_value,
        equating_intercept=eq_intercept,
        equating_slope=eq_slope,
        spearman_rho=rho,
        krippendorff_alpha=alpha,
        krippendorff_alpha_raw=alpha_raw,
        n_needed=n_needed,
        published=not reasons,
        reasons=tuple(reasons),
    )
