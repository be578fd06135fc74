"""Calibration of a new judge version against the version it replaces (METHODS §5, bridge runs).

Single-group design (Kolen & Brennan): both versions scored the SAME stored outputs, so each output
gives a pair (old_score, new_score). Scores are in RUBRIC POINTS: for a rubric whose criteria all share
one numeric scale [lo, hi] a score is the weighted mean of its criterion values on that scale
(= lo + normalised score * (hi - lo)), so a judge that adds b points to every criterion moves it by b.
A rubric without one shared numeric scale (labels, bools, mixed scales) has no natural point: its
scores are the normalised [0, 1] aggregate and the caller states what one rubric point is in those
units (`point_size`, see eval_assets/bridge.py). Every figure below is in the frame's units.

Published, per METHODS §5:
- offset = mean(new - old) over outputs, with a percentile cluster-bootstrap CI that resamples
  SCENARIOS (the unit of inference, METHODS §1), every output of a drawn scenario coming along;
- SD of the differences and Bland-Altman limits offset +/- z * SD;
- the OLS slope of new on old with a CI from the same cluster resamples; when that CI excludes 1 the
  linear equating function (Kolen & Brennan's linear method: slope sd_new / sd_old, through the two
  means) is published instead of a constant. (The OLS slope is attenuated by judge noise, so it is the
  test for "a constant does not fit"; the equating function itself is the symmetric mean-sigma line.)
- Spearman's rho and Krippendorff's alpha (interval metric) between the two versions, and n.
  alpha is computed AFTER calibration: between the new scores and the old scores mapped onto the new
  scale by what is published (old + offset, or the equating function). alpha penalises any systematic
  difference, so before calibration (`krippendorff_alpha_raw`, also reported) a pure bias of b points
  would lower it by itself, and no large offset could ever be published, which is the very thing a
  bridge exists to publish. Calibrated alpha asks the question acceptance needs: once the published
  correction is applied, do the two versions agree on the outputs?
Acceptance to publish: CI half-width <= 0.5 rubric points AND (calibrated) alpha >= 0.80. Otherwise
`published=False` with one reason per unmet condition. Figures the data cannot support are None,
never 0, and make publication impossible with a reason saying so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
import pandas as pd
from scipy import stats

CALIBRATION_COLUMNS: Final = ("build", "scenario_id", "repeat", "old_score", "new_score")
MAX_HALF_WIDTH_POINTS: Final = 0.5
MIN_ALPHA: Final = 0.80
_ELEMENTS_PER_CHUNK: Final = 4_000_000


class CalibrationFrameError(ValueError):
    """The paired frame is malformed (missing columns, non-finite scores, duplicate items)."""


@dataclass(frozen=True)
class Calibration:
    """METHODS §5 figures for one bridge (old -> new judge version), in the frame's units."""

    n: int
    n_scenarios: int
    level: float
    point_size: float
    offset: float | None
    ci_low: float | None
    ci_high: float | None
    half_width: float | None
    sd_diff: float | None
    ba_low: float | None
    ba_high: float | None
    slope: float | None
    slope_ci_low: float | None
    slope_ci_high: float | None
    equating_intercept: float | None
    equating_slope: float | None
    spearman_rho: float | None
    krippendorff_alpha: float | None  # after calibration (the acceptance figure)
    krippendorff_alpha_raw: float | None  # before calibration
    n_needed: int | None
    n_boot: int
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

    def row(self) -> dict[str, Any]:
        """Every field as a plain dict (reasons one per line, as release decisions store them)."""
        out = asdict(self)
        out["reasons"] = "\n".join(self.reasons)
        return out


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
    frame = pairs.loc[:, list(CALIBRATION_COLUMNS)].copy()
    for col in ("old_score", "new_score"):
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise CalibrationFrameError(f"{col} must be finite numbers (a failed verdict is not a pair)")
        frame[col] = values
    if frame.duplicated(["build", "scenario_id", "repeat"]).any():
        raise CalibrationFrameError("duplicate (build, scenario_id, repeat): each output pairs once")
    return frame


def _cluster_sums(frame: pd.DataFrame) -> tuple[np.ndarray, ...]:
    x, y = frame["old_score"].to_numpy(), frame["new_score"].to_numpy()
    g = pd.DataFrame(
        {"c": frame["scenario_id"].to_numpy(), "n": 1.0, "x": x, "y": y, "xx": x * x, "xy": x * y, "d": y - x}
    ).groupby("c", sort=True)
    s = g.sum()
    return tuple(s[k].to_numpy(dtype=float) for k in ("n", "d", "x", "y", "xx", "xy"))


def _bootstrap(
    sums: tuple[np.ndarray, ...], n_boot: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap offsets and OLS slopes, resampling clusters with replacement (chunked, vectorised)."""
    n, d, x, y, xx, xy = sums
    clusters = len(n)
    chunk = max(1, _ELEMENTS_PER_CHUNK // clusters)
    offsets, slopes = np.empty(n_boot), np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, clusters, size=(stop - start, clusters))
        bn, bx, by = n[idx].sum(1), x[idx].sum(1), y[idx].sum(1)
        offsets[start:stop] = d[idx].sum(1) / bn
        sxx = xx[idx].sum(1) - bx * bx / bn
        sxy = xy[idx].sum(1) - bx * by / bn
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes[start:stop] = np.where(sxx > 1e-12 * np.maximum(1.0, xx[idx].sum(1)), sxy / sxx, np.nan)
    return offsets, slopes


def _none_if_nan(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def calibrate(
    pairs: pd.DataFrame,
    *,
    point_size: float = 1.0,
    n_boot: int = 2000,
    rng: np.random.Generator,
    level: float = 0.95,
    max_half_width_points: float = MAX_HALF_WIDTH_POINTS,
    min_alpha: float = MIN_ALPHA,
) -> Calibration:
    """Calibrate a new judge version against an old one over paired per-output scores.

    `pairs` has columns `CALIBRATION_COLUMNS`: one row per stored output (build, scenario_id, repeat)
    that BOTH versions scored; scores are finite, in rubric points (or normalised units, see the
    module docstring). `point_size` is one rubric point in those units (1.0 for rubric points), so the
    acceptance is `half_width <= max_half_width_points * point_size` and `alpha >= min_alpha`.
    Deterministic for a given `rng` state. An empty frame gives a Calibration with n=0, every figure
    None and `published=False`.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not point_size > 0.0:
        raise ValueError(f"point_size must be positive, got {point_size}")
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    frame = _validate(pairs)
    n = len(frame)
    n_scen = int(frame["scenario_id"].nunique())
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    old, new = frame["old_score"].to_numpy(), frame["new_score"].to_numpy()
    d = new - old
    reasons: list[str] = []
    limit = max_half_width_points * point_size
    unit = "rubric points" if point_size == 1.0 else f"rubric points (1 point = {point_size:g})"

    offset = float(d.mean()) if n else None
    sd = float(d.std(ddof=1)) if n >= 2 else None
    ba_low = None if offset is None or sd is None else offset - z * sd
    ba_high = None if offset is None or sd is None else offset + z * sd
    slope = None
    if n >= 2 and np.ptp(old) > 0:
        slope = float(np.cov(old, new, ddof=1)[0, 1] / np.var(old, ddof=1))

    ci_low = ci_high = half = s_low = s_high = None
    if n_scen >= 2:
        offsets, slopes = _bootstrap(_cluster_sums(frame), n_boot, rng)
        q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
        ci_low, ci_high = (float(v) for v in np.quantile(offsets, q))
        half = (ci_high - ci_low) / 2.0
        if slope is not None and np.isfinite(slopes).sum() >= max(2, int(0.9 * n_boot)):
            s_low, s_high = (float(v) for v in np.nanquantile(slopes, q))
    elif n:
        reasons.append(f"{n_scen} scenario: a cluster-bootstrap interval needs at least 2")
    else:
        reasons.append("no output was scored by both judge versions")

    eq_slope = eq_intercept = None
    if s_low is not None and s_high is not None and not s_low <= 1.0 <= s_high:
        sd_old, sd_new = float(old.std(ddof=1)), float(new.std(ddof=1))
        eq_slope = sd_new / sd_old
        eq_intercept = float(new.mean()) - eq_slope * float(old.mean())

    rho = None
    if n >= 2 and np.ptp(old) > 0 and np.ptp(new) > 0:
        rho = _none_if_nan(float(stats.spearmanr(old, new).statistic))
    alpha_raw = krippendorff_alpha_interval(np.vstack([old, new])) if n else None
    alpha = None
    if offset is not None:
        mapped = old + offset if eq_slope is None or eq_intercept is None else eq_intercept + eq_slope * old
        alpha = krippendorff_alpha_interval(np.vstack([mapped, new]))

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
        ci_low=ci_low,
        ci_high=ci_high,
        half_width=half,
        sd_diff=sd,
        ba_low=ba_low,
        ba_high=ba_high,
        slope=slope,
        slope_ci_low=s_low,
        slope_ci_high=s_high,
        equating_intercept=eq_intercept,
        equating_slope=eq_slope,
        spearman_rho=rho,
        krippendorff_alpha=alpha,
        krippendorff_alpha_raw=alpha_raw,
        n_needed=n_needed,
        n_boot=n_boot,
        published=not reasons,
        reasons=tuple(reasons),
    )
