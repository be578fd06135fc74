"""Adaptive repeats in a subject run (`repeats: adaptive`, docs/methods.md): the first look.

A build with a baseline that has verdicts runs every scenario at `adaptive.start` repeats, then
looks: each of its judge versions scores those attempts (the calls judged ahead are read back from
the journal, never paid twice), `stats.first_look` compares them with the baseline's verdicts under
the same version, and the scenarios any version finds uncertain are topped up to their own `repeats`
with the next repeat numbers, as ordinary attempts (keyed, paid once, resumable). A re-run reads the
same settled calls back, so it looks at the same verdicts and tops up the same scenarios.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pandas as pd

from eval_assets.capability._shards import drive
from eval_assets.capability.baselines import band_for, baseline_for, verdict_frame
from eval_assets.capability.rows import judge_verdict_rows, scenario_run_rows
from eval_assets.capability.track import Track
from eval_assets.config import BuildManifest, Judge, Scenario
from eval_assets.engine import Engine, StoredAttempt, SubjectResult
from eval_assets.stats import AdaptiveDesign, first_look

T = TypeVar("T")


@dataclass(frozen=True)
class LookPlan:
    """What a subject run does about adaptive repeats: `start` repeats for every scenario first (None:
    the fixed count, no look), then `top_up` scenarios to their own `repeats`; `note` says why."""

    start: int | None
    baseline: str | None
    judges: tuple[Judge, ...] = ()
    top_up: frozenset[str] = frozenset()
    note: str = ""
    per_judge: dict[str, dict[str, Any]] = field(default_factory=dict)


def adaptive_design(track: Track, scenarios: Sequence[Scenario]) -> AdaptiveDesign | None:
    """The project's adaptive design for these scenarios (None in fixed mode): start at
    `adaptive.start`, maximum = the largest `repeats` among them (the spending rule's time)."""
    settings = track.project.settings
    if settings.repeats != "adaptive" or not scenarios:
        return None
    maximum = max(s.repeats for s in scenarios)
    if maximum <= settings.adaptive.start:
        return None  # nothing to top up (the loader refuses such a project; a gate's own scenarios may be)
    return AdaptiveDesign(start=settings.adaptive.start, maximum=maximum)


def plan_run(track: Track, build: BuildManifest, scenarios: Sequence[Scenario]) -> LookPlan:
    """Whether `build`'s subject run starts small and looks (adaptive mode, a baseline with verdicts
    under one of the build's judge versions) or runs the fixed count, with the reason."""
    if track.project.settings.repeats != "adaptive":
        return LookPlan(None, None, note="fixed repeats")
    if adaptive_design(track, scenarios) is None:
        return LookPlan(
            None, None, note="adaptive repeats: no scenario runs more than the start; fixed count run"
        )
    baseline = baseline_for(track, build)
    if baseline is None:
        return LookPlan(None, None, note="adaptive repeats: no baseline to look against; fixed count run")
    used = {s.judge for s in scenarios}
    judges = tuple(j for j in track.judges_for(build) if j.name in used)
    with_verdicts = tuple(j for j in judges if not verdict_frame(track, baseline, j.version_id).empty)
    if not with_verdicts:
        return LookPlan(
            None,
            baseline,
            note=f"adaptive repeats: baseline {baseline} has no verdicts under the build's judge versions "
            "yet; fixed count run",
        )
    return LookPlan(track.project.settings.adaptive.start, baseline, with_verdicts)


def look(
    track: Track,
    engine: Engine,
    build: BuildManifest,
    scenarios: Sequence[Scenario],
    first: Sequence[SubjectResult],
    plan: LookPlan,
    generation: int,
) -> LookPlan:
    """The first look: each judge version of `plan` scores the `first` attempts (reused when judged
    ahead) and `stats.first_look` names the scenarios to top up; their union is returned."""
    design = adaptive_design(track, scenarios)
    assert design is not None and plan.baseline is not None
    rows = scenario_run_rows(build, first)
    attempts = [stored_attempt(r) for r in rows]
    produced = {(a.scenario_id, a.repeat): a.output is not None for a in attempts}
    top_up: set[str] = set()
    per_judge: dict[str, dict[str, Any]] = {}
    notes = []
    for judge in plan.judges:
        rubric = track.project.rubric_for(judge)
        judged = {s.id: s for s in scenarios if s.judge == judge.name}
        results = _run(engine.judge_attempts(build, judge, rubric, judged, attempts, generation))
        verdicts = pd.DataFrame(judge_verdict_rows(build.id, judge, rubric, results, produced))
        verdicts["has_output"] = [
            produced.get((s, r), False)
            for s, r in zip(verdicts["scenario_id"], verdicts["repeat"], strict=True)
        ]
        base = verdict_frame(track, plan.baseline, judge.version_id)
        found = first_look(
            base,
            verdicts,
            rubric.floor,
            design,
            n_judge_versions=len(plan.judges),
            # the band the report will compare with: run-to-run variance of a registered rebuild
            band=band_for(track, plan.baseline, judge.version_id, base, build.id),
        )
        top_up.update(found.top_up)
        per_judge[judge.version_id] = {
            "top_up": list(found.top_up),
            "blocked_at_first_look": found.blocked,
            "scenarios": found.scenarios,
        }
        state = "already blocks, no top-up needed" if found.blocked else f"{len(found.top_up)} uncertain"
        notes.append(f"{judge.version_id}: {state} of {found.scenarios}")
    note = (
        f"adaptive repeats: looked at {design.start} repeats against baseline {plan.baseline} "
        f"({'; '.join(notes)}); topping up {len(top_up)} of {len(scenarios)} scenarios"
    )
    return LookPlan(plan.start, plan.baseline, plan.judges, frozenset(top_up), note, per_judge)


def stored_attempt(row: dict[str, Any]) -> StoredAttempt:
    """A `scenario_runs` row (as `scenario_run_rows` makes it, or as `Warehouse.rows` reads it back: text
    columns str or None, `trajectory` absent from a partition written before it existed) as a judge reads
    it: the look's first repeats and `materialize.stored_attempts` alike."""
    return StoredAttempt(
        row["scenario_id"],
        int(row["repeat"]),
        row["status"],
        row["output"],
        int(row["policy_failures"]),
        row["excluded_reason"],
        row["error"],
        row.get("trajectory"),
    )


def _run(call: Awaitable[T]) -> T:
    """Run one engine coroutine to its end on a private event loop (`drive`), as a block run does."""

    async def once() -> AsyncIterator[T]:
        yield await call

    (result,) = list(drive(once()))
    return result
