"""Findings: what a capability report found (one per signal, or per scenario for floor drops); their
`capability_reports` rows are built by `release.capability_report_rows`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

FindingVerdict = Literal["block", "investigate", "ok", "info"]

POLICY_FAILURES: Final = "policy_failures"
FLOOR_DROP: Final = "floor_drop"
MEAN_DROP: Final = "mean_drop"
EVIDENCE: Final = "evidence"
CONCENTRATED: Final = "concentrated_drop"
P10: Final = "p10"
EXCLUSIONS: Final = "exclusions"
FINDING_ORDER: Final = (POLICY_FAILURES, EVIDENCE, FLOOR_DROP, CONCENTRATED, MEAN_DROP, EXCLUSIONS, P10)


@dataclass(frozen=True)
class Finding:
    """One finding of a capability report.

    `statistic` is the finding's effect in score units or counts (candidate minus baseline, or the
    10th percentile for `p10`); the test statistic itself is named in `detail`. Any figure the data
    cannot support is None, never 0 or NaN. `rule` names the rule that set the verdict
    (e.g. "collapse", "drop", "bh", "beyond_band", "insufficient"); it is not a report column.
    """

    finding: str
    scenario_id: str | None
    statistic: float | None
    p_value: float | None
    q_value: float | None
    verdict: FindingVerdict
    detail: str
    rule: str = ""


def figure(value: float | None) -> float | None:
    """`value` as a plain float, or None when it is missing or not finite (never a NaN in a row)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def fmt(value: float | None, digits: int = 3) -> str:
    """A figure for prose: `digits` significant digits, or 'n/a' when missing."""
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"
