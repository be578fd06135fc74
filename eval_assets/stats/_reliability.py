"""Reliability over repeats: pass@k and pass^k per scenario and per suite (docs/methods.md).

A repeat *passes* when its verdict is `scored` at or above the rubric floor. A scenario with k repeats
has pass@k = 1 when at least one passes and pass^k = 1 when all k pass (else 0); a suite's figures are
the share of its scenarios with pass@k = 1 and with pass^k = 1. Kept apart from the comparison rules
(`_compare`): these figures describe one build and never decide a release.

Fail closed: a scenario with an excluded repeat is left out (missing, never zero); a repeat whose
subject produced output but whose verdict `failed` (the judge could not score it) makes the scenario's
figures unknown (None), and a suite with an unknown scenario has unknown figures too; a repeat whose
subject produced no output (an error, a timed-out agent) did not pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import pandas as pd


@dataclass(frozen=True)
class Reliability:
    """pass@k and pass^k of one scenario (`scope` "scenario") or one suite (`scope` "suite").

    `k`: repeats per scenario (a suite's: the smallest of its scenarios'); `passed`: repeats that
    passed (a suite's: scenarios with pass^k = 1); `of`: repeats (a suite's: its scenarios counted).
    `pass_at_k`/`pass_hat_k` are None when a judge failure leaves them unknown."""

    scope: Literal["scenario", "suite"]
    name: str
    k: int
    passed: int
    of: int
    pass_at_k: float | None
    pass_hat_k: float | None


def reliability(frame: pd.DataFrame, floor: float, suite_of: Mapping[str, str]) -> list[Reliability]:
    """Per scenario (id order), then per suite (name order), from a verdict frame with `scenario_id`,
    `status`, `score` and `has_output`. `suite_of[scenario_id]` names its suite (a scenario not listed
    is in suite "unknown"). An empty frame gives []."""
    scenarios: list[Reliability] = []
    if len(frame):
        # one grouped pass over flags per repeat (a group at a time in Python took 0.26 s on 1000
        # scenarios x 5 repeats, most of a report's statistics)
        status = frame["status"]
        per = pd.DataFrame(
            {
                "scenario_id": frame["scenario_id"],
                "excluded": status.eq("excluded"),
                # a repeat with output the judge could not score: the figures are unknown, not zero
                "unknown": status.eq("failed") & frame["has_output"].map(bool),
                "passed": status.eq("scored") & (frame["score"] >= floor),
            }
        ).groupby("scenario_id", sort=True)
        grouped = per.agg(
            excluded=("excluded", "any"),
            unknown=("unknown", "any"),
            passed=("passed", "sum"),
            k=("passed", "size"),
        )
        for sid, excluded, unknown, passed, k in grouped.itertuples(name=None):
            if excluded:
                continue
            n, hits = int(k), int(passed)
            scenarios.append(
                Reliability(
                    "scenario",
                    str(sid),
                    n,
                    hits,
                    n,
                    None if unknown else float(hits > 0),
                    None if unknown else float(hits == n),
                )
            )
    suites: dict[str, list[Reliability]] = {}
    for r in scenarios:
        suites.setdefault(suite_of.get(r.name, "unknown"), []).append(r)
    out = list(scenarios)
    for suite in sorted(suites):
        members = suites[suite]
        known = all(m.pass_at_k is not None for m in members)
        at = sum(m.pass_at_k or 0.0 for m in members)
        hat = sum(m.pass_hat_k or 0.0 for m in members)
        n = len(members)
        out.append(
            Reliability(
                "suite",
                suite,
                min(m.k for m in members),
                int(hat),
                n,
                at / n if known else None,
                hat / n if known else None,
            )
        )
    return out


def reliability_markdown(figures: list[Reliability]) -> str:
    """A markdown table of the suites' figures (then a line naming scenarios never solved), or ""."""
    suites = [f for f in figures if f.scope == "suite"]
    if not suites:
        return ""

    def show(x: float | None) -> str:
        return "unknown" if x is None else f"{x:.0%}"

    lines = [
        "**Reliability over repeats** (pass@k: solved in at least one of k repeats; pass^k: in all k)",
        "",
        "| suite | scenarios | k | pass@k | pass^k |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {s.name} | {s.of} | {s.k} | {show(s.pass_at_k)} | {show(s.pass_hat_k)} |" for s in suites]
    never = [f.name for f in figures if f.scope == "scenario" and f.pass_at_k == 0.0]
    if never:
        lines += ["", f"Never solved in any repeat: {', '.join(never)}"]
    return "\n".join(lines) + "\n"
