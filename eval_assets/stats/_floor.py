"""Floor drops: per-scenario tests of "this scenario got worse" (METHODS §3).

Each scenario present in both builds gets a one-sided Welch test across repeats (candidate < baseline),
then Benjamini–Hochberg over the scenarios tested. Verdicts, per scenario:

- `block`: a candidate repeat fell below the rubric floor where no baseline repeat did; or the
  scenario is a BH discovery (q <= q_level) that is not a lone flag.
- `investigate` (top up repeats): a lone flag — BH found exactly this one scenario, and its repeats
  are too few for an exact test to reach that significance alone (smallest exact one-sided p,
  1/C(K_c+K_b, K_c), above q_level/m; at K=5 and m=200: 1/252 > 0.0005). METHODS: "a lone
  per-scenario flag at K=5 means 'top up repeats', not 'block', unless a repeat crossed the floor".
- `info`: raw p < alpha but not a BH discovery (expected in about alpha of the scenarios by chance,
  so it is reported, not acted on); `ok` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from ._findings import FLOOR_DROP, Finding, Verdict, figure, fmt

PAIRED_COLUMNS = (
    "baseline_mean",
    "baseline_var",
    "baseline_n",
    "baseline_min",
    "candidate_mean",
    "candidate_var",
    "candidate_n",
    "candidate_min",
)


@dataclass(frozen=True)
class FloorDrops:
    """Per-scenario floor-drop results.

    `table` is indexed by scenario_id with columns difference, p_value, q_value (NaN when the
    scenario could not be tested: fewer than 2 scored repeats in a build), crossed (bool), verdict
    and rule. `repeats_needed` is the smallest equal repeat count at which one scenario alone could
    reach BH significance with an exact test (None when no scenario was tested).
    """

    table: pd.DataFrame
    n_tested: int
    repeats_needed: int | None


_NUMERIC_ZERO_VARIANCE = 1e-24  # scores live on [0, 1]: an SE² this small is rounding, not spread


def welch_less(
    mean_c: np.ndarray,
    var_c: np.ndarray,
    n_c: np.ndarray,
    mean_b: np.ndarray,
    var_b: np.ndarray,
    n_b: np.ndarray,
) -> np.ndarray:
    """One-sided Welch p-values for "candidate mean < baseline mean", one per scenario.

    Equals `scipy.stats.ttest_ind(cand, base, equal_var=False, alternative='less')` wherever that is
    defined, computed from per-scenario moments so 100k scenarios take milliseconds. Where it is not:
    fewer than 2 repeats in either build gives NaN (untestable, never fed to BH); both builds
    constant (zero variance) gives 1 when the candidate is not lower, else the exact permutation
    p-value of complete separation, 1/C(n_c+n_b, n_c) — the strongest evidence that many repeats can
    carry without a variance estimate, rather than a fabricated 0.
    """
    mean_c, var_c, n_c = (np.asarray(a, dtype=float) for a in (mean_c, var_c, n_c))
    mean_b, var_b, n_b = (np.asarray(a, dtype=float) for a in (mean_b, var_b, n_b))
    se_c, se_b = var_c / n_c, var_b / n_b
    se2 = se_c + se_b
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean_c - mean_b) / np.sqrt(se2)
        df = se2**2 / (se_c**2 / (n_c - 1) + se_b**2 / (n_b - 1))
        p = stats.t.cdf(t, df)
    # a variance within float noise of 0 is a constant sample: t would be meaningless (p underflows to 0)
    constant = (se2 <= _NUMERIC_ZERO_VARIANCE) & (n_c >= 2) & (n_b >= 2)
    p = np.where(constant, np.where(mean_c >= mean_b, 1.0, exact_separation_p(n_c, n_b)), p)
    return np.where((n_c < 2) | (n_b < 2), np.nan, p)


def exact_separation_p(n_c: np.ndarray | float, n_b: np.ndarray | float) -> np.ndarray:
    """Smallest one-sided p-value an exact two-sample test can give: 1 / C(n_c + n_b, n_c)."""
    return 1.0 / special.comb(np.asarray(n_c, dtype=float) + n_b, n_c)


def repeats_for_lone_significance(n_tested: int, q_level: float) -> int:
    """Smallest K (equal repeats per build) with 1/C(2K, K) <= q_level / n_tested."""
    k = 2
    while exact_separation_p(k, k) > q_level / n_tested:
        k += 1
    return k


def floor_drops(paired: pd.DataFrame, *, floor: float | None, alpha: float, q_level: float) -> FloorDrops:
    """Floor-drop verdicts for the scenarios in `paired` (indexed by scenario_id, `PAIRED_COLUMNS`).

    `floor` None means the rubric has no floor (no crossing rule). An empty `paired` gives an empty
    table. BH runs over the testable scenarios only.
    """
    p = welch_less(
        paired["candidate_mean"],
        paired["candidate_var"],
        paired["candidate_n"],
        paired["baseline_mean"],
        paired["baseline_var"],
        paired["baseline_n"],
    )
    tested = np.isfinite(p)
    n_tested = int(tested.sum())
    q = np.full(len(p), np.nan)
    if n_tested:
        q[tested] = stats.false_discovery_control(p[tested], method="bh")
    discovery = tested & (q <= q_level)
    lone = discovery & _is_lone(discovery, paired, q_level, n_tested)
    crossed = _crossed(paired, floor)
    raw = tested & (p < alpha) & ~discovery
    verdict = np.select(
        [crossed | (discovery & ~lone), lone, raw], ["block", "investigate", "info"], default="ok"
    )
    rule = np.select(
        [crossed, discovery & ~lone, lone, raw], ["floor_crossing", "bh", "lone_flag", "raw_p"], default=""
    )
    table = pd.DataFrame(
        {
            "difference": paired["candidate_mean"] - paired["baseline_mean"],
            "p_value": p,
            "q_value": q,
            "crossed": crossed,
            "verdict": verdict,
            "rule": rule,
        },
        index=paired.index,
    )
    needed = repeats_for_lone_significance(n_tested, q_level) if n_tested else None
    return FloorDrops(table, n_tested, needed)


def floor_findings(
    drops: FloorDrops, paired: pd.DataFrame, *, floor: float | None, alpha: float, q_level: float
) -> list[Finding]:
    """One `floor_drop` finding per scenario, in scenario order."""
    notes = _rule_notes(floor, alpha, q_level, drops.repeats_needed)
    return [
        Finding(
            finding=FLOOR_DROP,
            scenario_id=str(row.Index),
            statistic=figure(row.difference),
            p_value=figure(row.p_value),
            q_value=figure(row.q_value),
            verdict=_verdict(row.verdict),
            detail=_detail(row, notes),
            rule=str(row.rule),
        )
        for row in drops.table.join(paired).itertuples()
    ]


def _verdict(value: str) -> Verdict:
    verdicts: dict[str, Verdict] = {
        "block": "block",
        "investigate": "investigate",
        "info": "info",
        "ok": "ok",
    }
    return verdicts[value]


def _is_lone(discovery: np.ndarray, paired: pd.DataFrame, q_level: float, n_tested: int) -> np.ndarray:
    if discovery.sum() != 1:
        return np.zeros(len(discovery), dtype=bool)
    bound = exact_separation_p(paired["candidate_n"].to_numpy(), paired["baseline_n"].to_numpy())
    return bound > q_level / n_tested


def _crossed(paired: pd.DataFrame, floor: float | None) -> np.ndarray:
    if floor is None:
        return np.zeros(len(paired), dtype=bool)
    candidate_below = (paired["candidate_min"] < floor).to_numpy()
    baseline_below = (paired["baseline_min"] < floor).to_numpy()
    return candidate_below & ~baseline_below


def _rule_notes(
    floor: float | None, alpha: float, q_level: float, repeats_needed: int | None
) -> dict[str, str]:
    return {
        "floor_crossing": f"a candidate repeat fell below the floor {fmt(floor)} where no baseline repeat did",
        "bh": f"significant after Benjamini-Hochberg at q={fmt(q_level)}",
        "lone_flag": "lone per-scenario flag: the only BH discovery, with too few repeats for an exact test "
        f"to confirm it; top up repeats to {repeats_needed}",
        "raw_p": f"p < {fmt(alpha)} but not significant after Benjamini-Hochberg",
    }


def _detail(row: Any, notes: dict[str, str]) -> str:
    """Prose for one scenario row (a namedtuple of the table joined with its paired moments)."""
    means = (
        f"mean {fmt(row.baseline_mean)} -> {fmt(row.candidate_mean)} (K={row.baseline_n}/{row.candidate_n})"
    )
    if np.isfinite(row.p_value):
        head = f"{means}; Welch one-sided p={fmt(row.p_value)}, BH q={fmt(row.q_value)}"
    else:
        head = f"{means}; untested: fewer than 2 scored repeats in a build"
    if row.rule == "floor_crossing":
        head += f"; worst repeat {fmt(row.baseline_min)} -> {fmt(row.candidate_min)}"
    note = notes.get(str(row.rule))
    return f"{head}; {note}" if note else head
