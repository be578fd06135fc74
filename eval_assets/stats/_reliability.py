"""Reliability over repeats: pass@k and pass^k per scenario and per suite (docs/methods.md).

The one definition, used by the warehouse (`capability_reports`), the HTML report, `compare` and the
release board. Each repeat of a scenario is one of three outcomes:

- *passed*: its verdict is `scored` at or above the rubric floor;
- *failed*: scored below the floor, or its subject produced no output (an error, a timed-out agent);
- *unknown*: its subject produced output the judge could not score (verdict `failed`): the agent may
  or may not have solved it, so it is neither counted as a pass nor as a failure.

A scenario with k repeats has pass@k = 1 when one passed, 0 when all k failed, and unknown (None) when
none passed but some are unknown; pass^k = 0 when one failed, 1 when all k passed, and unknown when none
failed but some are unknown. A scenario with an excluded repeat (stopped by a ceiling: its scores
are excluded as a whole) is left out, missing, never 0. A suite's figures are the shares of its scenarios
with 1, unknown when one of them is. Kept apart from the comparison rules (`_compare`): these figures
describe one build and never decide a release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Reliability:
    """pass@k and pass^k of one scenario (`scope` "scenario") or one suite (`scope` "suite").

    `k`: repeats per scenario (a suite's: the smallest of its scenarios'); `passed`: repeats that
    passed (a suite's: scenarios with pass^k = 1); `of`: repeats (a suite's: its scenarios counted);
    `unknown`: repeats the judge could not score (a suite's: scenarios with an unknown figure).
    `pass_at_k`/`pass_hat_k` are None when unknown repeats leave them unknown."""

    scope: Literal["scenario", "suite"]
    name: str
    k: int
    passed: int
    of: int
    pass_at_k: float | None
    pass_hat_k: float | None
    unknown: int = 0


def repeat_outcomes(frame: pd.DataFrame, floor: float) -> pd.DataFrame:
    """Per scenario (indexed by `scenario_id`, sorted) of a verdict frame with `scenario_id`, `status`,
    `score` and `has_output`: its repeats `passed`, `failed` and `unknown`, and whether one was
    `excluded` (module docstring)."""
    status = frame["status"]
    output = frame["has_output"].map(bool) if "has_output" in frame else pd.Series(True, index=frame.index)
    scored = status.eq("scored")
    passed = scored & (frame["score"] >= floor)
    excluded = status.eq("excluded")
    unknown = status.eq("failed") & output
    per = pd.DataFrame(
        {
            "scenario_id": frame["scenario_id"],
            "passed": passed,
            "failed": ~passed & ~unknown & ~excluded,
            "unknown": unknown,
            "excluded": excluded,
        }
    ).groupby("scenario_id", sort=True)
    out = per.agg(
        passed=("passed", "sum"),
        failed=("failed", "sum"),
        unknown=("unknown", "sum"),
        excluded=("excluded", "any"),
    )
    return out.astype({"passed": int, "failed": int, "unknown": int, "excluded": bool})


def pass_figures(
    passed: np.ndarray, failed: np.ndarray, unknown: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """pass@k and pass^k of each scenario from its repeats passed, failed and unknown (k = their sum):
    1.0 or 0.0, NaN where unknown repeats leave the figure unknown (module docstring)."""
    p, f, u = (np.asarray(x, dtype=np.int64) for x in (passed, failed, unknown))
    at = np.where(p > 0, 1.0, np.where(u > 0, np.nan, 0.0))
    hat = np.where(f > 0, 0.0, np.where(u > 0, np.nan, 1.0))
    return at, hat


def _known(x: float) -> float | None:
    return None if x != x else float(x)


def reliability(frame: pd.DataFrame, floor: float, suite_of: Mapping[str, str]) -> list[Reliability]:
    """Per scenario (id order), then per suite (name order), from a verdict frame with `scenario_id`,
    `status`, `score` and `has_output`. `suite_of[scenario_id]` names its suite (a scenario not listed
    is in suite "unknown"). An empty frame gives []."""
    scenarios: list[Reliability] = []
    if len(frame):
        counts = repeat_outcomes(frame, floor)
        counts = counts[~counts["excluded"]]
        at, hat = pass_figures(counts["passed"], counts["failed"], counts["unknown"])
        for (sid, row), a, h in zip(counts.iterrows(), at, hat, strict=True):
            k = int(row["passed"] + row["failed"] + row["unknown"])
            scenarios.append(
                Reliability(
                    "scenario", str(sid), k, int(row["passed"]), k, _known(a), _known(h), int(row["unknown"])
                )
            )
    suites: dict[str, list[Reliability]] = {}
    for r in scenarios:
        suites.setdefault(suite_of.get(r.name, "unknown"), []).append(r)
    out = list(scenarios)
    for suite in sorted(suites):
        members = suites[suite]
        n = len(members)
        unknown_at = any(m.pass_at_k is None for m in members)
        unknown_hat = any(m.pass_hat_k is None for m in members)
        solved = sum(m.pass_at_k or 0.0 for m in members)
        every = sum(m.pass_hat_k or 0.0 for m in members)
        out.append(
            Reliability(
                "suite",
                suite,
                min(m.k for m in members),
                int(every),
                n,
                None if unknown_at else solved / n,
                None if unknown_hat else every / n,
                sum(1 for m in members if m.pass_at_k is None or m.pass_hat_k is None),
            )
        )
    return out


def shown(value: float | None) -> str:
    """A pass@k or pass^k figure as every surface prints it: a percentage, or "unknown"."""
    return "unknown" if value is None else f"{value:.0%}"


def reliability_markdown(figures: list[Reliability]) -> str:
    """A markdown table of the suites' figures (then a line naming scenarios never solved), or ""."""
    suites = [f for f in figures if f.scope == "suite"]
    if not suites:
        return ""

    lines = [
        "**Reliability over repeats** (pass@k: solved in at least one of k repeats; pass^k: in all k)",
        "",
        "| suite | scenarios | k | pass@k | pass^k |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {s.name} | {s.of} | {s.k} | {shown(s.pass_at_k)} | {shown(s.pass_hat_k)} |" for s in suites]
    never = [f.name for f in figures if f.scope == "scenario" and f.pass_at_k == 0.0]
    if never:
        lines += ["", f"Never solved in any repeat: {', '.join(never)}"]
    unjudged = [f"{f.name} ({f.unknown} of {f.of})" for f in figures if f.scope == "scenario" and f.unknown]
    if unjudged:
        lines += [
            "",
            f"Repeats the judge could not score (their figures unknown unless settled): {', '.join(unjudged)}",
        ]
    return "\n".join(lines) + "\n"
