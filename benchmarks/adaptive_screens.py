"""Adaptive repeats: candidate concentrated-drop screens compared at their A/A firing rate (issue 25).

    .venv/bin/python benchmarks/adaptive_screens.py [--reps 1000] [--models levels3,judge,normal]
        [--sizes 22,50] [--screens tail:0.15,tail:0.2,conc:0.3,sym2:0.1,rank:0.1]

Per cell (noise model x scenarios, the conditions of `decision_calibration.py`, 5 repeats fixed, 3 at the
first look) and replication it rates, on the same draws, the fixed design, the shipped plan with its
concentrated-drop screen shut ('none': only the other top-up conditions) and with every comparable
scenario topped up ('all'). A screen that fires in a replication gives it the 'all' outcome and
attempts, else the 'none' ones, so any screen's A/A firing rate, saving and concentrated-drop power loss
against fixed 5 follow from one simulation. Screens, each a p-like statistic of the first look fired at
or below its bound: `tail` (`tail_screen`, the shipped one: ties with the median left out of the count),
`conc` (the concentrated test's own p, ties counted), `sym2` / `rank` (self-normalising: are the
negative centred scores larger than the positive ones, by squares against their permutation null or by
ranks; no assumed scale), `tail+ties` (the tail screen at twice its bound where some centred score
ties with the median: a bound for coarse scores). '!' marks a loss beyond 2 Monte Carlo SE of the fixed
arm's rate. Seeds: crc32 of the cell's name, so a cell's draws do not depend on the grid.
"""

from __future__ import annotations

import argparse
import zlib

import decision_calibration as dc
import numpy as np
from scipy import stats

from eval_assets.stats import AdaptiveDesign, Budget, Moments, evaluate, plan_top_ups, tail_screen


def screens(base: Moments, interim: Moments) -> dict[str, np.ndarray]:
    """(R,) statistics of the first look, each fired at or below a bound."""
    conc = evaluate(base, interim, dc.FLOOR, Budget()).concentrated
    u = conc.u
    moved = np.isfinite(u) & (np.abs(np.nan_to_num(u)) > 1e-9)
    n, neg = moved.sum(1), moved & (u < 0)
    k = neg.sum(1)
    out = {"tail": tail_screen(conc), "conc": conc.p}
    out["ties"] = 1.0 - n / np.maximum(np.isfinite(u).sum(1), 1)
    a = np.where(moved, np.nan_to_num(u), 0.0) ** 2
    mean = a.sum(1) / np.maximum(n, 1)
    pop = (np.where(moved, a - mean[:, None], 0.0) ** 2).sum(1) / np.maximum(n, 1)
    var = k * pop * (n - k) / np.maximum(n - 1, 1)
    z = (np.where(neg, a, 0.0).sum(1) - k * mean) / np.sqrt(np.maximum(var, 1e-300))
    out["sym2"] = np.where(var > 0, stats.norm.sf(z), 1.0)
    ranks = stats.rankdata(np.where(moved, np.abs(np.nan_to_num(u)), np.inf), axis=1)
    var = k * (n - k) * (n + 1) / 12.0
    z = (np.where(neg, ranks, 0.0).sum(1) - k * (n + 1) / 2.0) / np.sqrt(np.maximum(var, 1e-300))
    out["rank"] = np.where(var > 0, stats.norm.sf(z), 1.0)
    return out


def cell(model: str, m: int, reps: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(zlib.crc32(f"{model}{m}".encode()))
    budget, none = Budget(), AdaptiveDesign(tail_futility=1e-12)
    skills, sd = dc.skills_for(rng, model, reps, m), dc.sds_for(rng, model, reps, m)
    kinds = dc.shapes_for(rng, model, reps, m)
    base = dc.moments(dc.draw(rng, model, skills, sd, 5, kinds))
    band = dc.realised_band(base)
    repeat = np.arange(5)[None, None, :]
    out = {}
    for condition in ("aa", *dc.POWER):  # every condition drawn, so the draws match across runs
        latent = skills if condition == "aa" else dc.shifted(condition, skills, band, model, sd, kinds)
        x = dc.draw(rng, model, latent, sd, 5, kinds)
        if condition not in ("aa", "concentrated"):
            continue
        interim = dc.moments(x, np.broadcast_to(repeat < 3, x.shape))
        plan = plan_top_ups(base, interim, dc.FLOOR, budget, none)
        row = {"fixed": evaluate(base, dc.moments(x), dc.FLOOR, budget).block, **screens(base, interim)}
        every = (np.nan_to_num(base.n) >= 1) & ~plan.blocked[:, None]
        for arm, top in (("none", plan.repeats > 0), ("all", every)):
            ran = repeat < (3 + 2 * top)[:, :, None]
            looks = none.looks(interim, top, budget)
            row[arm] = evaluate(base, dc.moments(x, ran), dc.FLOOR, budget, looks=looks).block
            row[f"att_{arm}"] = ran.sum(axis=2).mean(axis=1)
        out[condition] = row
    return out


def fired(row: dict[str, np.ndarray], screen: str) -> np.ndarray:
    name, bound = screen.split(":")
    if name == "tail+ties":
        return row["tail"] <= np.where(row["ties"] > 0, 2.0 * float(bound), float(bound))
    return row[name] <= float(bound)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--models", default="levels3,judge,discrete,normal")
    parser.add_argument("--sizes", default="22,50")
    parser.add_argument(
        "--screens", default="tail:0.15,tail:0.2,tail:0.3,conc:0.3,tail+ties:0.15,sym2:0.1,rank:0.1"
    )
    args = parser.parse_args()
    chosen = args.screens.split(",")
    print(
        f"replications per cell {args.reps}; per screen: A/A firing %, A/A saving %, concentrated loss (points)"
    )
    for m in (int(s) for s in args.sizes.split(",")):
        for model in args.models.split(","):
            rows = cell(model, m, args.reps)
            aa, conc = rows["aa"], rows["concentrated"]
            fixed = conc["fixed"].mean()
            se = np.sqrt(fixed * (1.0 - fixed) / args.reps)
            line = f"{m:>4} {model:<13} fixed conc {100 * fixed:5.1f}"
            for screen in chosen:
                on = fired(aa, screen)
                saved = 1.0 - np.where(on, aa["att_all"], aa["att_none"]).mean() / 5.0
                loss = fixed - np.where(fired(conc, screen), conc["all"], conc["none"]).mean()
                mark = "!" if loss > 2.0 * se else " "
                line += f" | {screen} {100 * on.mean():4.1f} {100 * saved:4.1f} {100 * loss:+4.1f}{mark}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
