"""Noise bands: how far a build's suite mean (and each scenario's) moves when nothing changed.

docs/methods.md: unit of inference, noise band. The unit of inference is the scenario: repeats are averaged within a scenario and every
standard error is taken over scenarios. The band answers "if we re-ran this same build, how far would
the mean move?": the half-width of a `level` interval for the DIFFERENCE between two independent
re-runs: `t(nu) * sqrt(sum_i 2 s_i^2 / K_i / n^2 + 2 tau^2)` for the suite, nu by Welch-Satterthwaite, and
`t(K_i - 1) * sqrt(2 s_i^2 / K_i)` per scenario. tau^2 is the between-build (run-to-run) variance of a
suite mean, measured from a registered unchanged rebuild of the build (`between_build_variance`); 0 when
there is none (then the band covers repeat noise only, and says so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ._frame import scenario_table, validate_verdicts
from ._rules import band_half_width

_SCENARIO_COLUMNS = ("scenario_id", "mean", "variance", "n_repeats", "half_width")


def _check_level(level: float) -> None:
    """A confidence `level` is in (0, 1), both ends excluded."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


@dataclass(frozen=True)
class NoiseBand:
    """One build's noise band under one judge version, with Miller's variance components.

    Figures that the data cannot support are None, never 0: `half_width`/`within_var` need a scenario
    with >= 2 scored repeats ("usable"); `between_var` needs two usable scenarios and `suite_se` two
    scenarios with a scored repeat.
    `scenarios` has one row per scenario with a scored repeat (columns scenario_id, mean, variance,
    n_repeats, half_width; variance and half_width NaN when the scenario is unusable).
    """

    level: float
    n_scenarios: int
    n_usable: int
    unusable: tuple[str, ...]
    n_repeats: int
    suite_mean: float | None
    suite_se: float | None
    half_width: float | None
    within_var: float | None
    between_var: float | None
    between_var_floored: bool
    notes: tuple[str, ...]
    scenarios: pd.DataFrame
    between_build_var: float = 0.0
    between_build_df: int = 0
    band_df: float | None = None

    def optimal_repeats(self, *, cost_scenario: float = 1.0, cost_repeat: float = 1.0) -> float | None:
        """Cochran's two-stage optimum repeats per scenario: sqrt(s^2 c_s / (Var(x) c_r)) (Cochran 1977,
        §10.6). None when a component is missing or the between-scenario variance is 0 (no finite
        optimum: only repeats help)."""
        if self.within_var is None or not self.between_var:
            return None
        return math.sqrt(self.within_var * cost_scenario / (self.between_var * cost_repeat))


def noise_band(
    verdicts: pd.DataFrame, *, level: float = 0.95, rebuild: pd.DataFrame | None = None
) -> NoiseBand:
    """The noise band of one build under one judge version (docs/methods.md: noise band).

    Only scored repeats count; failed and excluded ones are skipped (missing, not zero). A scenario
    with fewer than two scored repeats has no variance estimate: it is listed in `unusable` and left
    out of the band and of the variance components (its mean still counts toward `suite_mean`).
    Between-scenario variance is Miller's Var(scenario means) - mean(s_i^2 / K_i); a negative estimate
    is floored at 0 and `between_var_floored` says so. `rebuild`: verdicts of a registered unchanged
    rebuild of this build, whose run-to-run variance is added (`between_build_variance`). No verdicts:
    every figure None.
    """
    table = scenario_table(validate_verdicts(verdicts))
    between = (0.0, 0)
    if rebuild is not None and len(rebuild):
        between = between_build_variance(table, scenario_table(validate_verdicts(rebuild)))
    return band_from_table(table, level=level, between_build=between)


def between_build_variance(build: pd.DataFrame, rebuild: pd.DataFrame) -> tuple[float, int]:
    """(tau^2, df): run-to-run variance of a suite mean, from one build and one unchanged rebuild.

    Over the scenarios scored in both, D = mean of (rebuild - build) scenario means; its expected
    square is 2 tau^2 + V_w, V_w = sum(s_b^2/K_b + s_r^2/K_r) / n^2 the repeat noise. tau^2 =
    max(0, (D^2 - V_w) / 2), on 1 degree of freedom (one rebuild). (0.0, 0) without two shared scenarios.
    """
    both = build.loc[build["n_scored"] >= 2].join(
        rebuild.loc[rebuild["n_scored"] >= 2], how="inner", rsuffix="_r"
    )
    if len(both) < 2:
        return 0.0, 0
    n = len(both)
    shift = float((both["mean_r"] - both["mean"]).mean())
    within = (
        float((both["variance"] / both["n_scored"] + both["variance_r"] / both["n_scored_r"]).sum()) / n**2
    )
    return max(0.0, (shift**2 - within) / 2.0), 1


def band_from_table(
    table: pd.DataFrame, *, level: float = 0.95, between_build: tuple[float, int] = (0.0, 0)
) -> NoiseBand:
    """`noise_band` from per-scenario aggregates (`_frame.scenario_table`) already computed."""
    _check_level(level)
    table = table.loc[table["n_scored"] > 0]
    per = pd.DataFrame(
        {
            "scenario_id": table.index.to_numpy(dtype=object),
            "mean": table["mean"].to_numpy(),
            "variance": table["variance"].to_numpy(),
            "n_repeats": table["n_scored"].to_numpy(),
        }
    )
    with np.errstate(invalid="ignore"):
        quantile = stats.t.ppf(0.5 + level / 2.0, np.maximum(per["n_repeats"].to_numpy() - 1, 1))
    per["half_width"] = quantile * np.sqrt(2.0 * per["variance"] / per["n_repeats"])
    usable = per.loc[per["n_repeats"] >= 2]
    unusable = tuple(per.loc[per["n_repeats"] < 2, "scenario_id"])
    between, floored = _between_variance(usable)
    means = per["mean"].to_numpy()
    half_width, band_df = _suite_half_width(per, level, *between_build)
    notes = _notes(unusable, len(usable), between, floored)
    if not between_build[1]:
        notes += ("no registered unchanged rebuild: the band covers repeat noise only",)
    return NoiseBand(
        level=level,
        n_scenarios=len(per),
        n_usable=len(usable),
        unusable=unusable,
        n_repeats=int(usable["n_repeats"].sum()),
        suite_mean=float(means.mean()) if len(means) else None,
        suite_se=float(means.std(ddof=1) / math.sqrt(len(means))) if len(means) >= 2 else None,
        half_width=half_width,
        within_var=float(usable["variance"].mean()) if len(usable) else None,
        between_var=between,
        between_var_floored=floored,
        notes=notes,
        scenarios=per.loc[:, list(_SCENARIO_COLUMNS)],
        between_build_var=float(between_build[0]),
        between_build_df=int(between_build[1]),
        band_df=band_df,
    )


def _suite_half_width(
    per: pd.DataFrame, level: float, between: float = 0.0, between_df: int = 0
) -> tuple[float | None, float | None]:
    """(half-width, Welch-Satterthwaite df) over the usable scenarios of `per` (None without one)."""
    usable = per.loc[per["n_repeats"] >= 2]
    if len(usable) == 0:
        return None, None
    k = usable["n_repeats"].to_numpy(dtype=float)
    u = 2.0 * usable["variance"].to_numpy(dtype=float) / k
    half, nu, _ = band_half_width(
        np.array([u.sum()]),
        np.array([(u**2 / (k - 1)).sum()]),
        np.array([len(u)]),
        between,
        between_df,
        level,
    )
    return float(half[0]), float(nu[0])


def _between_variance(usable: pd.DataFrame) -> tuple[float | None, bool]:
    if len(usable) < 2:
        return None, False
    raw = float(usable["mean"].var(ddof=1) - np.mean(usable["variance"] / usable["n_repeats"]))
    return max(raw, 0.0), raw < 0.0


def _notes(unusable: tuple[str, ...], n_usable: int, between: float | None, floored: bool) -> tuple[str, ...]:
    notes = []
    if unusable:
        shown = ", ".join(unusable[:10]) + (f" and {len(unusable) - 10} more" if len(unusable) > 10 else "")
        notes.append(
            f"{len(unusable)} scenario(s) with fewer than 2 scored repeats left out of the band: {shown}"
        )
    if n_usable == 0:
        notes.append("no scenario has 2 scored repeats: no band")
    elif between is None:
        notes.append("one usable scenario: no between-scenario variance")
    if floored:
        notes.append("between-scenario variance estimate was negative and is floored at 0")
    return tuple(notes)
