"""Adaptive repeats on the example suite, both arms on the same draws, for any plan (issue 25).

    .venv/bin/python benchmarks/adaptive_example_suite.py --rebuilds 200 --repeats fixed --home DIR
    .venv/bin/python benchmarks/adaptive_example_pairs.py DIR [--plans F/S/T,...]

DIR is a home `adaptive_example_suite.py --repeats fixed --home DIR` kept: the example baseline and its
unchanged rebuilds at the fixed count. A rebuild's repeat k is the same attempt whatever the design (the
sim draws per build, scenario and repeat), so its first `start` repeats are the first look an adaptive
run would have had, and the plan's top-ups are its own later repeats. For each plan this prints the mean
saving against the fixed count over the rebuilds, and how many rebuilds each arm blocks: the fixed arm on
all of its repeats, the adaptive arm on its first look plus the plan's top-ups, through the report's own
rules (`plan_top_ups`, `evaluate` with the looks) under every judge version of the build, with the noise
band a report uses (the first registered rebuild's run-to-run variance: `rebuild_of`). That first
rebuild is the band's reference and is not compared. The same as running the engine in adaptive mode
on the same rebuilds, attempt for attempt (docs/methods.md, "Measured: on the example suite"), in
seconds instead of minutes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from _results import Recording
from adaptive_example_suite import BASE, ROOT
from adaptive_screens import table_moments

from eval_assets.capability.baselines import band_for, registered_manifests, verdict_frame
from eval_assets.capability.track import Track
from eval_assets.config import BuildManifest, load_project
from eval_assets.home import EvalHome
from eval_assets.stats import (
    AdaptiveDesign,
    Budget,
    Moments,
    evaluate,
    plan_top_ups,
    scenario_table,
    validate_verdicts,
)

COUNTS = ["n_rows", "n_output", "n_attempts", "n_excluded", "n_scored", "n_below_floor"]


def moments(frames: list[pd.DataFrame], ids: pd.Index, floor: float | None) -> Moments:
    """(len(frames), m) moments of each frame's scored repeats over the scenarios `ids`, each row as
    `stats.first_look` builds it (`adaptive_screens.table_moments`)."""
    rows = []
    for frame in frames:
        table = scenario_table(validate_verdicts(frame), floor).reindex(ids)
        table[COUNTS] = table[COUNTS].fillna(0)
        rows.append(table_moments(table, ids))
    return Moments(*(np.concatenate([getattr(r, f) for r in rows]) for f in Moments.__dataclass_fields__))


@dataclass(frozen=True)
class Report:
    """One judge version's comparisons, (R, m) over the rebuilds compared: what no plan changes (the
    baseline, the rebuilds' verdicts, their first looks, the fixed arm's blocks) read and rated once."""

    ids: pd.Index
    floor: float | None
    base: Moments
    frames: list[pd.DataFrame]
    first: Moments
    fixed_block: np.ndarray
    between: float
    between_df: int


def reports(
    track: Track, manifests: dict[str, BuildManifest], rebuilds: list[str], reference: str, start: int
) -> list[Report]:
    out = []
    judges = track.judges_for(track.build(rebuilds[0]))
    budget = Budget(n_judge_versions=len(judges))
    for judge in judges:
        floor = track.project.rubric_for(judge).floor
        baseline = verdict_frame(track, BASE, judge.version_id)
        frames = [verdict_frame(track, b, judge.version_id) for b in [reference, *rebuilds]]
        missing = [b for b, f in zip([reference, *rebuilds], frames, strict=True) if f.empty]
        if missing:
            raise SystemExit(
                f"{track.home.root}: rebuilds without {judge.version_id} verdicts (the run did not finish?): "
                + ", ".join(missing[:5])
            )
        frames = frames[1:]  # the reference gives the band only (band_for reads it)
        ids = scenario_table(validate_verdicts(baseline), floor).index
        one = moments([baseline], ids, floor)
        base = Moments(
            *(np.repeat(getattr(one, f), len(rebuilds), axis=0) for f in Moments.__dataclass_fields__)
        )
        band = band_for(track, BASE, judge.version_id, baseline, rebuilds[0], manifests)
        between = {"between": band.between_build_var, "between_df": band.between_build_df}
        fixed_block = evaluate(base, moments(frames, ids, floor), floor, budget, **between).block
        first = moments([f.loc[f["repeat"] <= start] for f in frames], ids, floor)
        out.append(Report(ids, floor, base, frames, first, fixed_block, **between))
    return out


def rate(rebuilds: list[str], per_judge: list[Report], design: AdaptiveDesign) -> str:
    budget = Budget(n_judge_versions=len(per_judge))
    blocked_fixed = np.logical_or.reduce([r.fixed_block for r in per_judge])
    blocked = np.zeros(len(rebuilds), dtype=bool)
    topped = np.zeros(len(rebuilds))
    for r in per_judge:
        band = {"between": r.between, "between_df": r.between_df}
        top = plan_top_ups(r.base, r.first, r.floor, budget, design, **band).repeats > 0
        ran = [
            f.loc[(f["repeat"] <= design.start) | f["scenario_id"].isin(r.ids[top[i]])]
            for i, f in enumerate(r.frames)
        ]
        looks = design.looks(r.first, top, budget)
        blocked |= evaluate(r.base, moments(ran, r.ids, r.floor), r.floor, budget, looks=looks, **band).block
        topped += top.sum(axis=1)
    # every scenario of these builds runs `design.maximum` repeats at the fixed count, and no scenario is
    # under two judge versions
    scenarios = sum(len(r.ids) for r in per_judge)
    saved = 1.0 - (design.start * scenarios + (design.maximum - design.start) * topped) / (
        design.maximum * scenarios
    )
    se = saved.std(ddof=1) / np.sqrt(len(saved))
    alone = [b for b, a, f in zip(rebuilds, blocked, blocked_fixed, strict=True) if a and not f]
    return (
        f"saved {100 * saved.mean():.1f}% (SE {100 * se:.1f}); unchanged rebuilds blocked: fixed count "
        f"{blocked_fixed.sum()}/{len(rebuilds)}, adaptive {blocked.sum()}/{len(rebuilds)} "
        f"(adaptive alone: {', '.join(alone) or 'none'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="a home kept by adaptive_example_suite.py --repeats fixed")
    parser.add_argument("--plans", default="", help="futility/suite/tail,... (default: the shipped design)")
    args = parser.parse_args()
    recording = Recording("adaptive_example_pairs")
    track = Track(load_project(ROOT), EvalHome(args.home))
    manifests = registered_manifests(track)
    reference, *rebuilds = sorted(b for b in manifests if manifests[b].rebuild_of == BASE)
    fixed = {s.repeats for s in track.scenarios_for(track.build(rebuilds[0]))}
    start = AdaptiveDesign().start
    if fixed != {AdaptiveDesign().maximum}:
        raise SystemExit(
            f"{args.home}: the rebuilds' scenarios run {sorted(fixed)} repeats, not the design's maximum"
        )
    per_judge = reports(track, manifests, rebuilds, reference, start)
    print(f"{args.home}: {len(rebuilds)} unchanged rebuilds compared with {BASE} (band from {reference})")
    plans = [p for p in args.plans.split(",") if p] or [None]
    rows = []
    for plan in plans:
        if plan is None:
            design = AdaptiveDesign()
        else:
            futility, suite, tail = (float(x) for x in plan.split("/"))
            design = AdaptiveDesign(futility=futility, suite_futility=suite, tail_futility=tail)
        name = f"{design.futility}/{design.suite_futility}/{design.tail_futility}"
        shown = rate(rebuilds, per_judge, design)
        print(f"  {name:<16} {shown}", flush=True)
        rows.append({"plan": name, "rate": shown})
    recording.figure("rebuilds", len(rebuilds))
    recording.table("plans", rows)
    recording.write()


if __name__ == "__main__":
    main()
