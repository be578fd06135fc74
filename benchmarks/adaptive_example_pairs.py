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
on the same rebuilds, attempt for attempt (docs/methods.md, "Stop 42"), in seconds instead of minutes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from adaptive_example_suite import BASE, ROOT

from eval_assets.capability.baselines import band_for, registered_manifests, verdict_frame
from eval_assets.capability.track import Track
from eval_assets.config import load_project
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
    """(len(frames), m) moments of each frame's scored repeats over the scenarios `ids`."""
    rows = []
    for frame in frames:
        table = scenario_table(validate_verdicts(frame), floor).reindex(ids)
        table[COUNTS] = table[COUNTS].fillna(0)
        rows.append(table)
    stack = {
        c: np.stack([t[c].to_numpy(dtype=float) for t in rows]) for c in ("n_scored", "mean", "variance")
    }
    below = np.stack([t["n_below_floor"].to_numpy(dtype=float) for t in rows])
    paired = np.stack([t["n_rows"].to_numpy(dtype=float) for t in rows])
    return Moments(stack["n_scored"], stack["mean"], stack["variance"], below, paired)


@dataclass(frozen=True)
class Report:
    """One judge version's comparisons, (R, m) over the rebuilds compared."""

    ids: pd.Index
    floor: float | None
    base: Moments
    full: dict[str, pd.DataFrame]
    between: float
    between_df: int


def reports(track: Track, rebuilds: list[str], reference: str) -> list[Report]:
    out = []
    manifests = registered_manifests(track)
    for judge in track.judges_for(track.build(rebuilds[0])):
        floor = track.project.rubric_for(judge).floor
        baseline = verdict_frame(track, BASE, judge.version_id)
        ids = scenario_table(validate_verdicts(baseline), floor).index
        base = moments([baseline], ids, floor)
        base = Moments(
            *(np.repeat(getattr(base, f), len(rebuilds), axis=0) for f in Moments.__dataclass_fields__)
        )
        band = band_for(track, BASE, judge.version_id, baseline, rebuilds[0], manifests)
        assert manifests[reference].rebuild_of == BASE
        full = {b: verdict_frame(track, b, judge.version_id) for b in rebuilds}
        out.append(Report(ids, floor, base, full, band.between_build_var, band.between_build_df))
    return out


def rate(rebuilds: list[str], per_judge: list[Report], design: AdaptiveDesign, fixed: int) -> str:
    budget = Budget(n_judge_versions=len(per_judge))
    blocked_fixed = np.zeros(len(rebuilds), dtype=bool)
    blocked = np.zeros(len(rebuilds), dtype=bool)
    topped = np.zeros(len(rebuilds))
    for r in per_judge:
        band = {"between": r.between, "between_df": r.between_df}
        frames = [r.full[b] for b in rebuilds]
        blocked_fixed |= evaluate(r.base, moments(frames, r.ids, r.floor), r.floor, budget, **band).block
        first = moments([f.loc[f["repeat"] <= design.start] for f in frames], r.ids, r.floor)
        top = plan_top_ups(r.base, first, r.floor, budget, design, **band).repeats > 0
        ran = [
            f.loc[(f["repeat"] <= design.start) | f["scenario_id"].isin(r.ids[top[i]])]
            for i, f in enumerate(frames)
        ]
        looks = design.looks(first, top, budget)
        blocked |= evaluate(r.base, moments(ran, r.ids, r.floor), r.floor, budget, looks=looks, **band).block
        topped += top.sum(axis=1)
    # every scenario of these builds runs the same repeats, and no scenario is under two judge versions
    per_scenario = fixed // sum(len(r.ids) for r in per_judge)
    attempts = design.start * fixed // per_scenario + (design.maximum - design.start) * topped
    saved = 1.0 - attempts / fixed
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
    track = Track(load_project(ROOT), EvalHome(args.home))
    manifests = registered_manifests(track)
    ids = sorted(b for b in manifests if manifests[b].rebuild_of == BASE)
    reference, rebuilds = ids[0], ids[1:]
    missing = [
        b
        for b in ids
        if any(verdict_frame(track, b, j.version_id).empty for j in track.judges_for(track.build(b)))
    ]
    if missing:
        raise SystemExit(
            f"{args.home}: rebuilds without verdicts (the run did not finish?): {', '.join(missing[:5])}"
        )
    fixed = sum(s.repeats for s in track.scenarios_for(track.build(rebuilds[0])))
    per_judge = reports(track, rebuilds, reference)
    print(f"{args.home}: {len(rebuilds)} unchanged rebuilds compared with {BASE} (band from {reference})")
    plans = [p for p in args.plans.split(",") if p] or [None]
    for plan in plans:
        if plan is None:
            design = AdaptiveDesign()
        else:
            futility, suite, tail = (float(x) for x in plan.split("/"))
            design = AdaptiveDesign(futility=futility, suite_futility=suite, tail_futility=tail)
        name = f"{design.futility}/{design.suite_futility}/{design.tail_futility}"
        print(f"  {name:<16} {rate(rebuilds, per_judge, design, fixed)}", flush=True)


if __name__ == "__main__":
    main()
