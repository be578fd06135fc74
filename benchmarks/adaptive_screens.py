"""Adaptive repeats: candidate concentrated-drop screens compared at their A/A firing rate (issue 25).

    .venv/bin/python benchmarks/adaptive_screens.py [--reps 1000] [--models levels3,judge,normal]
        [--sizes 22,50] [--screens tail:0.15,tail:0.2,conc:0.3,null:0.06,cp:0.85]
        [--example-home DIR]

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
ties with the median: a bound for coarse scores), `null` (the tail screen against its own simulated
null, `null_screen`), `cp` / `cpn` (one minus the conditional power of the fixed design's concentrated
test, `conditional_power`: fired at `cp:0.85` when that power is at least 0.15; `cp` projects the
first look's own means, `cpn` the share of them that keeps an unchanged build's spread). Screens
combine with `&` (all fire) and `|` (any fires). '!' marks a loss beyond 2 Monte Carlo SE of the fixed
arm's rate. Seeds: crc32 of the cell's name, so a cell's draws do not depend on the grid.

`--example-home DIR` rates the same screens on the example suite instead: DIR is a home kept by
`adaptive_example_suite.py --home DIR`; its unchanged rebuilds' first looks are read back from the
warehouse (each judge version's first `start` repeats against the baseline's verdicts, with the noise
band the look had: the rebuilds registered before it) and every screen's saving follows exactly, as in
the benchmark (the shipped screen reproduces the run's own saving to the attempt).
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
import zlib
from pathlib import Path

import decision_calibration as dc
import numpy as np
import pandas as pd
from _results import RESULTS, Recording
from scipy import stats

from eval_assets.stats import (
    AdaptiveDesign,
    Budget,
    Moments,
    binary_repeats,
    concentrated_test,
    evaluate,
    plan_top_ups,
    scenario_table,
    scenario_tests,
    tail_screen,
    validate_verdicts,
)

NULL_DRAWS = 100  # simulated first looks per replication (null_screen, conditional_power)
NULL_SEED = 20_261_205
_CHUNK = 400_000  # simulated scenario-looks per chunk (replications x draws x scenarios)


def _paired(moments: Moments, keep: np.ndarray) -> Moments:
    def only(a: np.ndarray) -> np.ndarray:
        return np.where(keep, a, np.nan)

    return Moments(only(moments.n), only(moments.mean), only(moments.var), only(moments.below), moments.rows)


def _sums(b: Moments, c: Moments) -> tuple[np.ndarray, ...]:
    """Counts, means, within-build sums of squares of the baseline's and the first look's repeats."""
    n1, n2 = np.nan_to_num(b.n), np.nan_to_num(c.n)
    m1, m2 = np.nan_to_num(b.mean), np.nan_to_num(c.mean)
    ss = np.where(n1 >= 2, np.nan_to_num(b.var) * (n1 - 1), 0.0)
    ss = ss + np.where(n2 >= 2, np.nan_to_num(c.var) * (n2 - 1), 0.0)
    return n1, n2, m1, m2, ss


def _simulated(
    mu: np.ndarray,
    var: np.ndarray,
    n: np.ndarray,
    paired: np.ndarray,
    binary: np.ndarray,
    normal: tuple[np.ndarray, np.ndarray, np.ndarray],
    clip: bool,
) -> Moments:
    """(R x B, m) moments of B simulated samples per replication: n repeats per scenario, mean
    N(mu, var / n) (clipped to [0, 1] when `clip`), variance var chi2(n - 1) / (n - 1); pass/fail
    scenarios draw passes ~ Binomial(n, mu). The standard draws `normal` ((B, m), (B, m, k), (B, m, k)
    uniforms) are shared by every replication, so a replication's result does not depend on the others."""
    z_mean, z_spread, uniform = normal
    r, m = mu.shape
    draws = z_mean.shape[0]
    n3 = np.broadcast_to(n[:, None, :], (r, draws, m)).astype(np.int64)
    safe = np.maximum(n3, 1)
    mean = mu[:, None, :] + np.sqrt(var[:, None, :] / safe) * z_mean[None]
    mean = np.clip(mean, 0.0, 1.0) if clip else mean
    dof = np.maximum(safe - 1, 1)
    chi = np.broadcast_to(np.cumsum(z_spread**2, axis=2)[None], (r, draws, m, z_spread.shape[2]))
    chi_d = np.take_along_axis(chi, (dof - 1)[..., None], axis=3)[..., 0]
    spread = np.where(n3 >= 2, var[:, None, :] * chi_d / dof, np.nan)
    if binary.any():
        within = np.arange(uniform.shape[2])[None, None, None, :] < n3[..., None]
        passes = ((uniform[None] < np.clip(mu, 0.0, 1.0)[:, None, :, None]) & within).sum(axis=3)
        rate = passes / safe
        bernoulli = np.where(n3 >= 2, n3 * rate * (1.0 - rate) / np.maximum(n3 - 1, 1), np.nan)
        mean = np.where(binary[:, None, :], rate, mean)
        spread = np.where(binary[:, None, :], bernoulli, spread)
    keep = np.broadcast_to(paired[:, None, :], (r, draws, m))
    flat = (r * draws, m)
    return Moments(
        np.where(keep, n3, np.nan).reshape(flat),
        np.where(keep, mean, np.nan).reshape(flat),
        np.where(keep, spread, np.nan).reshape(flat),
        np.zeros(flat),
        np.where(keep, n3, 0).reshape(flat).astype(float),
    )


def _standard_draws(
    m: int, k: int, draws: int, samples: int = 1
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`samples` independent sets of standard draws ((B, m) normals, (B, m, k) normals, (B, m, k) uniforms)."""
    rng = np.random.default_rng(NULL_SEED)
    return [
        (rng.standard_normal((draws, m)), rng.standard_normal((draws, m, k)), rng.random((draws, m, k)))
        for _ in range(samples)
    ]


def null_screen(base: Moments, interim: Moments, draws: int = NULL_DRAWS) -> np.ndarray:
    """(R,) the first look's tail screen against its own null: (1 + the number of `draws` simulated
    unchanged first looks whose tail screen is at most the observed one) / (1 + draws). Each simulated
    look draws a baseline at the baseline's repeats and a candidate at the first look's, both from the
    scenario's baseline and first-look repeats pooled (one sample when nothing changed): normal means,
    chi-squared variances, binomial passes on pass/fail scenarios. Deterministic (one seed, its
    standard draws shared by every replication)."""
    paired = (np.nan_to_num(base.n) >= 1) & (np.nan_to_num(interim.n) >= 1)
    b, c = _paired(base, paired), _paired(interim, paired)
    observed = tail_screen(concentrated_test(scenario_tests(b, c, None)))
    n1, n2, m1, m2, ss = _sums(b, c)
    total = np.maximum(n1 + n2, 1.0)
    mu = np.clip((n1 * m1 + n2 * m2) / total, 0.0, 1.0)
    var = np.where(n1 + n2 >= 2, (ss + n1 * n2 / total * (m1 - m2) ** 2) / np.maximum(n1 + n2 - 1, 1), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row without a variance has no median
        fallback = np.nanmedian(var, axis=1)
    var = np.where(np.isfinite(var), var, np.nan_to_num(fallback)[:, None])
    binary = binary_repeats(b) & binary_repeats(c)
    r, m = interim.n.shape
    nb, nc = n1.astype(np.int64), n2.astype(np.int64)
    top = int(max(nb.max(initial=1), nc.max(initial=1), 2))
    normal = dict(zip(("base", "cand"), _standard_draws(m, top, draws, 2), strict=True))
    out = np.ones(r)
    chunk = max(1, _CHUNK // max(1, draws * m))
    for lo in range(0, r, chunk):
        hi = min(r, lo + chunk)
        sims = [
            _simulated(mu[lo:hi], var[lo:hi], n[lo:hi], paired[lo:hi], binary[lo:hi], normal[side], clip=True)
            for side, n in (("base", nb), ("cand", nc))
        ]
        stat = tail_screen(concentrated_test(scenario_tests(sims[0], sims[1], None))).reshape(hi - lo, draws)
        out[lo:hi] = (1.0 + (stat <= observed[lo:hi, None]).sum(axis=1)) / (1.0 + draws)
    return out


def conditional_power(
    base: Moments, interim: Moments, budget: Budget, remaining: int, *, neutral: bool, draws: int = NULL_DRAWS
) -> np.ndarray:
    """(R,) conditional power of the fixed design's concentrated test: the share of `draws` simulated
    completions of the first look (`remaining` more repeats per scenario) whose concentrated p at the
    maximum is at most its first weighted-Holm level, alpha x w_concentrated.

    The remaining repeats' mean: the first look's own (`neutral` False: the current trend, clipped
    means, the variance of the baseline's and first look's repeats pooled), or the baseline's plus the
    share of the first-look difference that gives the completed difference the spread a fixed design's
    has when nothing changed, 1/k + 1/n_b (`neutral` True; unclipped, within-build variance): the
    current trend keeps all of the first look's noise, 1/start + 1/n_b, so under an unchanged build its
    power grows with the number of scenarios."""
    paired = (np.nan_to_num(base.n) >= 1) & (np.nan_to_num(interim.n) >= 1)
    b, c = _paired(base, paired), _paired(interim, paired)
    n1, n2, m1, m2, ss = _sums(b, c)
    if neutral:
        var = np.where(n1 + n2 >= 3, ss / np.maximum(n1 + n2 - 2, 1), 0.0)
        k, nb, nc = n2 + remaining, np.maximum(n1, 1.0), np.maximum(n2, 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            kept = np.sqrt(
                np.clip((1.0 / k + 1.0 / nb - remaining / k**2) / (1.0 / nc + 1.0 / nb), 0.0, None)
            )
            share = np.nan_to_num(np.clip((k * kept - n2) / remaining, 0.0, 1.0))
        mu = m1 + share * (m2 - m1)
    else:
        total = np.maximum(n1 + n2, 1.0)
        var = np.where(
            n1 + n2 >= 2, (ss + n1 * n2 / total * (m1 - m2) ** 2) / np.maximum(n1 + n2 - 1, 1), 0.0
        )
        mu = np.clip(m2, 0.0, 1.0)
    binary = binary_repeats(b) & binary_repeats(c)
    level = budget.report_alpha * budget.w_concentrated
    r, m = interim.n.shape
    (normal,) = _standard_draws(m, max(remaining, 2), draws)
    more_n = np.where(paired, remaining, 0)
    out = np.zeros(r)
    chunk = max(1, _CHUNK // max(1, draws * m))
    for lo in range(0, r, chunk):
        hi = min(r, lo + chunk)
        more = _simulated(
            mu[lo:hi], var[lo:hi], more_n[lo:hi], paired[lo:hi], binary[lo:hi], normal, clip=not neutral
        )
        first = Moments(
            *(np.repeat(getattr(c, f.name)[lo:hi], draws, axis=0) for f in dataclasses.fields(Moments))
        )
        before = Moments(
            *(np.repeat(getattr(b, f.name)[lo:hi], draws, axis=0) for f in dataclasses.fields(Moments))
        )
        p = concentrated_test(scenario_tests(before, _pooled(first, more), None)).p.reshape(hi - lo, draws)
        out[lo:hi] = (p <= level).mean(axis=1)
    return out


def _pooled(first: Moments, more: Moments) -> Moments:
    n1, n2 = np.nan_to_num(first.n), np.nan_to_num(more.n)
    n = n1 + n2
    m1, m2 = np.nan_to_num(first.mean), np.nan_to_num(more.mean)
    ss = np.where(n1 >= 2, np.nan_to_num(first.var) * (n1 - 1.0), 0.0)
    ss = ss + np.where(n2 >= 2, np.nan_to_num(more.var) * (n2 - 1.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n >= 1, (n1 * m1 + n2 * m2) / n, np.nan)
        var = np.where(n >= 2, (ss + np.where(n >= 1, n1 * n2 / n * (m1 - m2) ** 2, 0.0)) / (n - 1.0), np.nan)
    keep = n1 >= 1
    return Moments(
        np.where(keep, n, np.nan),
        np.where(keep, mean, np.nan),
        np.where(keep, var, np.nan),
        np.zeros(n.shape),
        first.rows + more.rows,
    )


def screens(
    base: Moments,
    interim: Moments,
    wanted: set[str],
    floor: float | None = dc.FLOOR,
    budget: Budget | None = None,
) -> dict[str, np.ndarray]:
    """(R,) statistics of the first look, each fired at or below a bound (the simulated ones only when
    `wanted`: they cost a hundred first looks each)."""
    budget = budget or Budget()
    conc = evaluate(base, interim, floor, budget).concentrated
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
    if "null" in wanted:
        out["null"] = null_screen(base, interim)
    for name, neutral in (("cp", False), ("cpn", True)):
        if name in wanted:
            out[name] = 1.0 - conditional_power(base, interim, budget, 2, neutral=neutral)
    return out


def names(chosen: list[str]) -> set[str]:
    return {part.split(":")[0] for screen in chosen for part in screen.replace("|", "&").split("&")}


def cell(model: str, m: int, reps: int, wanted: set[str]) -> dict[str, dict[str, np.ndarray]]:
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
        row = {
            "fixed": evaluate(base, dc.moments(x), dc.FLOOR, budget).block,
            **screens(base, interim, wanted),
        }
        every = (np.nan_to_num(base.n) >= 1) & ~plan.blocked[:, None]
        for arm, top in (("none", plan.repeats > 0), ("all", every)):
            ran = repeat < (3 + 2 * top)[:, :, None]
            looks = none.looks(interim, top, budget)
            row[arm] = evaluate(base, dc.moments(x, ran), dc.FLOOR, budget, looks=looks).block
            row[f"att_{arm}"] = ran.sum(axis=2).mean(axis=1)
        out[condition] = row
    return out


def fired(row: dict[str, np.ndarray], screen: str) -> np.ndarray:
    if "|" in screen:
        return np.logical_or.reduce([fired(row, part) for part in screen.split("|")])
    if "&" in screen:
        return np.logical_and.reduce([fired(row, part) for part in screen.split("&")])
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
    parser.add_argument("--example-home", type=Path, default=None, help="rate the screens on this kept home")
    args = parser.parse_args()
    chosen = args.screens.split(",")
    recording = Recording("adaptive_screens")
    if args.example_home:
        recording.table("example_suite", example_suite(args.example_home, chosen))
        recording.write(RESULTS / "adaptive_screens_example.json")
        return
    table = []
    print(
        f"replications per cell {args.reps}; per screen: A/A firing %, A/A saving %, concentrated loss (points)"
    )
    for m in (int(s) for s in args.sizes.split(",")):
        for model in args.models.split(","):
            rows = cell(model, m, args.reps, names(chosen))
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
                table.append(
                    {"scenarios": m, "model": model, "fixed_concentrated": round(float(fixed), 4),
                     "screen": screen, "aa_firing": round(float(on.mean()), 4), "aa_saving": round(float(saved), 4),
                     "concentrated_loss": round(float(loss), 4), "loss_over_2se": bool(loss > 2.0 * se)}
                )
            print(line, flush=True)
    recording.table("screens", table)
    recording.write()


def table_moments(table: pd.DataFrame, ids: pd.Index) -> Moments:
    """(1, m) moments as `stats.first_look` builds them (rows scaled to the build's scored share)."""
    rows = table.loc[ids]
    n = rows["n_scored"].to_numpy(dtype=float)
    scored_all, rows_all = float(table["n_scored"].sum()), float(table["n_rows"].sum())
    paired = rows["n_rows"].to_numpy(dtype=float)
    scale = (float(n.sum()) * rows_all / scored_all) / paired.sum() if scored_all and paired.sum() else 1.0
    return Moments(
        n[None, :],
        rows["mean"].to_numpy(dtype=float)[None, :],
        rows["variance"].to_numpy(dtype=float)[None, :],
        rows["n_below_floor"].to_numpy(dtype=float)[None, :],
        (paired * scale)[None, :],
    )


def example_suite(home: Path, chosen: list[str]) -> list[dict[str, object]]:
    """Every screen's saving on the example suite's unchanged rebuilds in `home` (exact: a plan's
    top-ups depend only on the first look, which no plan changes)."""
    from adaptive_example_suite import BASE, ROOT

    from eval_assets.capability.baselines import band_for, registered_manifests, verdict_frame
    from eval_assets.capability.looks import adaptive_design
    from eval_assets.capability.track import Track
    from eval_assets.config import load_project
    from eval_assets.home import EvalHome

    loaded = load_project(ROOT)
    project = dataclasses.replace(loaded, settings=loaded.settings.model_copy(update={"repeats": "adaptive"}))
    track = Track(project, EvalHome(home))
    manifests = registered_manifests(track)
    rebuilds = sorted(b for b in manifests if b.startswith("rebuild-"))
    none = AdaptiveDesign(tail_futility=1e-12)
    wanted = names(chosen)
    looks: list[list[tuple[set[str], set[str], dict[str, float]]]] = []
    fixed, start, remaining = 0, 0, {}
    for build in rebuilds:
        manifest = track.build(build)
        scenarios = track.scenarios_for(manifest)
        design = adaptive_design(track, scenarios)
        assert design is not None
        fixed = sum(s.repeats for s in scenarios)
        start = sum(min(s.repeats, design.start) for s in scenarios)
        remaining = {s.id: max(0, s.repeats - design.start) for s in scenarios}
        judges = track.judges_for(manifest)
        # the band the look had: a rebuild registered before this one (the benchmark registers in order)
        earlier = {k: v for k, v in manifests.items() if not k.startswith("rebuild-") or k < build}
        per_judge = []
        for judge in judges:
            floor = track.project.rubric_for(judge).floor
            budget = Budget(n_judge_versions=len(judges))
            baseline = verdict_frame(track, BASE, judge.version_id)
            band = band_for(track, BASE, judge.version_id, baseline, build, registered=earlier)
            candidate = verdict_frame(track, build, judge.version_id)
            base_s = scenario_table(validate_verdicts(baseline), floor)
            cand_s = scenario_table(
                validate_verdicts(candidate.loc[candidate["repeat"] <= design.start]), floor
            )
            ids = cand_s.index
            base_s = base_s.reindex(ids)
            counts = ["n_rows", "n_output", "n_attempts", "n_excluded", "n_scored", "n_below_floor"]
            base_s[counts] = base_s[counts].fillna(0)
            b, c = table_moments(base_s, ids), table_moments(cand_s, ids)
            between = {"between": band.between_build_var, "between_df": band.between_build_df}
            plan = plan_top_ups(b, c, floor, budget, none, **between)
            stat = screens(b, c, wanted, floor, budget)
            every = set() if plan.blocked[0] else set(ids[np.nan_to_num(b.n[0]) >= 1])
            per_judge.append(
                (set(ids[plan.repeats[0] > 0]), every, {k: float(v[0]) for k, v in stat.items()})
            )
        looks.append(per_judge)
    print(
        f"example suite, {len(rebuilds)} unchanged rebuilds in {home}: per screen, saving (SE), screens opened per report"
    )
    rows: list[dict[str, object]] = []
    for screen in chosen:
        saved, opened = [], [0] * max((len(x) for x in looks), default=0)
        for per_judge in looks:
            union: set[str] = set()
            for j, (own, every, stat) in enumerate(per_judge):
                union |= own
                if fired({k: np.asarray([v]) for k, v in stat.items()}, screen)[0]:
                    union |= every
                    opened[j] += 1
            saved.append(1.0 - (start + sum(remaining[str(sid)] for sid in union)) / fixed)
        s = np.asarray(saved)
        se = s.std(ddof=1) / np.sqrt(len(s)) if len(s) > 1 else float("nan")
        print(
            f"  {screen:<24} {100 * s.mean():5.1f}% (SE {100 * se:.1f}); opened "
            + ", ".join(f"{o}/{len(s)}" for o in opened)
        )
        rows.append({"screen": screen, "saving": round(float(s.mean()), 4), "se": round(float(se), 4),
                     "opened_per_report": [f"{o}/{len(s)}" for o in opened]})
    return rows


if __name__ == "__main__":
    main()
