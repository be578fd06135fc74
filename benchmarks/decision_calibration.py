"""Calibration of the release decision: A/A block and flag rates and power, through the project's rules.

    .venv/bin/python benchmarks/decision_calibration.py [--reps 2000] [--seed 20261202] [--check 20] [--workers 2]

Every replication draws a baseline and a candidate build (scenarios x repeats) from a noise model, takes
their per-scenario moments and runs `eval_assets.stats.evaluate` — the rules `compare` applies, with
the report's own error budget (alpha 0.05 block, 0.05 flag, one judge version) — vectorised over the
replications. `--check N` also runs N replications of each A/A cell through `compare` + `decide` and
counts disagreements with the vectorised path (expected 0). Each grid cell runs with its own child seed
(`SeedSequence(seed).spawn`) in a pool of `--workers` processes; every rate is printed with its Monte
Carlo standard error (±, points of percent) and every missed goal with its Wilson 95% interval. The run
ends with its wall and CPU time (this process and its workers).

Conditions (printed with the table):
- suite: scenario skills U(0.55, 0.95) (ceiling model: U(0.85, 0.95)), rubric floor 0.2;
- noise models, sd 0.15 unless said: normal (clip to [0, 1]); ceiling (16-37% of runs at exactly 1.0);
  discrete (multiples of 0.25); t3 (t with 3 df scaled to sd 0.15); heterogeneous (80% of scenarios
  sd 0.05, 20% sd 0.30, assigned per replication); judge (subject sd 0.12 + judge sd 0.09 per verdict,
  rounded to 1-5 rubric points, i.e. multiples of 0.25); missing (normal, 5% of verdicts failed);
  binary (pass/fail: each repeat passes with probability = the skill, U(0.55, 0.95)); binary-wide
  (pass/fail, pass rates U(0.05, 0.95), a tenth of the scenarios always passing and a tenth always
  failing); levels3 (normal rounded to 0, 0.5, 1); mixture (each scenario, per replication, one of
  normal, binary, levels3, discrete);
- power conditions, on the candidate's latent skill: collapse (scenario 0 to skill 0); uniform drop of
  1, 2, 3 x the baseline's realised noise band, DEFINED ON THE REALISED DROP: the latent shift whose
  expected suite-mean drop in scores (clipping and rounding included) is that many bands, found by
  bisection per replication; concentrated (20% of scenarios -0.25, the others +0.0625, the latent mean
  unchanged). '3x seen' = median over replications of the candidate's realised suite-mean drop under
  the 3x condition, in bands (about 3 by construction).
Goals (issues 10 and 25): A/A block <= 5% and flag <= 15% in every cell; KS p > 0.01 for the mean-drop
p-values where scores are continuous; collapse >= 95%; 3x band >= 90% (on the realised drop);
concentrated >= 80% at 22x5 and >= 95% at 200x5. `--binary-test barnard|moderated` runs the pass/fail
alternatives that were not adopted, for the trade-off table in docs/methods.md (no cross-check then).
"""

from __future__ import annotations

import argparse
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
from _results import Recording
from scipy import stats

from eval_assets.stats import (
    AdaptiveDesign,
    BinaryTest,
    Budget,
    Moments,
    compare,
    decide,
    evaluate,
    first_look,
    plan_top_ups,
)

FLOOR = 0.2
SIZES = (12, 22, 50, 200)
REPEATS = (3, 5)
MODELS = (
    "normal",
    "ceiling",
    "discrete",
    "t3",
    "heterogeneous",
    "judge",
    "missing",
    "binary",
    "binary-wide",
    "levels3",
    "mixture",
)
_BINARY, _LEVELS3, _LEVELS5, _CONTINUOUS = 1, 2, 3, 0  # per-scenario score shapes of the mixture
CONTINUOUS = ("normal", "t3", "heterogeneous", "missing")
POWER = ("collapse", "band1", "band2", "band3", "concentrated")


def skills_for(rng: np.random.Generator, model: str, reps: int, m: int) -> np.ndarray:
    if model == "binary-wide":
        # pass rates 0.05-0.95, and a tenth of the suite always passing, a tenth always failing
        # (scenario 0, the one the collapse condition hits, is never one of them)
        skills = rng.uniform(0.05, 0.95, (reps, m))
        fixed = max(1, m // 10)
        skills[:, m - fixed :] = 1.0
        skills[:, m - 2 * fixed : m - fixed] = 0.0
        return skills
    low, high = (0.85, 0.95) if model == "ceiling" else (0.55, 0.95)
    return rng.uniform(low, high, (reps, m))


def sds_for(rng: np.random.Generator, model: str, reps: int, m: int) -> np.ndarray:
    if model == "heterogeneous":
        return np.where(rng.random((reps, m)) < 0.2, 0.30, 0.05)
    return np.full((reps, m), 0.15)


def model_sd(model: str, sd: np.ndarray) -> np.ndarray:
    """Per-scenario sd of one verdict's noise before clipping (t3 and judge: 0.15 by construction)."""
    return np.full(sd.shape, 0.15) if model in ("t3", "judge") else sd


def shapes_for(rng: np.random.Generator, model: str, reps: int, m: int) -> np.ndarray:
    """(reps, m) score shape per scenario: the mixture draws one of four per scenario and replication."""
    fixed = {"binary": _BINARY, "binary-wide": _BINARY, "levels3": _LEVELS3, "discrete": _LEVELS5}
    if model == "mixture":
        return rng.integers(0, 4, (reps, m))
    return np.full((reps, m), fixed.get(model, _CONTINUOUS))


def draw(
    rng: np.random.Generator,
    model: str,
    latent: np.ndarray,
    sd: np.ndarray,
    k: int,
    shapes: np.ndarray | None = None,
) -> np.ndarray:
    """(reps, m, k) verdict scores, NaN where a verdict failed.

    Score shapes: continuous (clipped to [0, 1]), binary (pass with probability = the clipped latent
    skill), 3 levels (0, 0.5, 1) and 5 levels (multiples of 0.25), both rounded from the clipped score.
    """
    shape = (*latent.shape, k)
    if model == "t3":
        noise = rng.standard_t(3, shape) * (0.15 / np.sqrt(3.0))
    elif model == "judge":
        noise = 0.12 * rng.standard_normal(shape) + 0.09 * rng.standard_normal(shape)
    else:
        noise = sd[:, :, None] * rng.standard_normal(shape)
    x = np.clip(latent[:, :, None] + noise, 0.0, 1.0)
    if model == "judge":
        x = np.round(x * 4.0) / 4.0
    if shapes is not None:
        kind = shapes[:, :, None]
        if (shapes == _BINARY).any():  # no draw otherwise: the other models keep their random stream
            passes = (rng.random(shape) < np.clip(latent, 0.0, 1.0)[:, :, None]).astype(float)
            x = np.where(kind == _BINARY, passes, x)
        x = np.where(kind == _LEVELS3, np.round(x * 2.0) / 2.0, x)
        x = np.where(kind == _LEVELS5, np.round(x * 4.0) / 4.0, x)
    if model == "missing":
        x = np.where(rng.random(shape) < 0.05, np.nan, x)
    return x


def moments(x: np.ndarray, attempted: np.ndarray | None = None) -> Moments:
    """Per-scenario moments of (reps, m, k) scores (`Moments.of` at the benchmark's floor)."""
    return Moments.of(x, FLOOR, attempted)


def realised_band(base: Moments) -> np.ndarray:
    out = evaluate(base, base, FLOOR, Budget())
    return np.asarray(out.mean.band)


def expected_score(model: str, latent: np.ndarray, sd: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """E[score] of each scenario under the noise model: what a build's realised mean estimates.

    Clipped normal: mu (Phi(b) - Phi(a)) + sd (phi(a) - phi(b)) + 1 - Phi(b), a = -mu/sd, b = (1 - mu)/sd;
    rounded to L levels: sum_j j/L P(the clipped score rounds to j/L); pass/fail: the clipped skill.
    t3 and the judge model are taken as normal with their sd (0.15); missing verdicts do not move it.
    """
    sd = np.maximum(sd, 1e-9)
    a, b = -latent / sd, (1.0 - latent) / sd
    clipped = latent * (stats.norm.cdf(b) - stats.norm.cdf(a)) + sd * (stats.norm.pdf(a) - stats.norm.pdf(b))
    clipped += stats.norm.sf(b)
    out = clipped
    for kind, levels in ((_LEVELS3, 2), (_LEVELS5, 4)):
        if model == "judge" or (kinds == kind).any():
            edges = (np.arange(levels) + 0.5) / levels  # a score rounds up past each edge
            rounded = sum(stats.norm.sf((edge - latent) / sd) for edge in edges) / levels
            use = np.full(latent.shape, model == "judge") if model == "judge" else kinds == kind
            out = np.where(use, rounded, out)
    return np.where(kinds == _BINARY, np.clip(latent, 0.0, 1.0), out)


def realised_shift(
    model: str, skills: np.ndarray, sd: np.ndarray, kinds: np.ndarray, drop: np.ndarray
) -> np.ndarray:
    """(reps,) latent shift whose EXPECTED suite-mean drop in scores is `drop` (bisection, 50 steps).

    Clipping at 0 and 1 and rounding absorb part of a latent shift (under the ceiling model up to a
    fifth of it), so the band conditions are defined on the drop the candidate's scores show."""
    base = expected_score(model, skills, sd, kinds).mean(axis=1)
    low, high = np.zeros(len(drop)), np.ones(len(drop))
    for _ in range(50):
        mid = (low + high) / 2.0
        seen = base - expected_score(model, skills - mid[:, None], sd, kinds).mean(axis=1)
        low, high = np.where(seen < drop, mid, low), np.where(seen < drop, high, mid)
    return (low + high) / 2.0


def shifted(
    condition: str, skills: np.ndarray, band: np.ndarray, model: str, sd: np.ndarray, kinds: np.ndarray
) -> np.ndarray:
    latent = skills.copy()
    if condition == "collapse":
        latent[:, 0] = 0.0
    elif condition.startswith("band"):
        drop = float(condition[-1]) * np.nan_to_num(band)
        latent = latent - realised_shift(model, skills, model_sd(model, sd), kinds, drop)[:, None]
    elif condition == "concentrated":
        hit = max(1, int(round(0.2 * latent.shape[1])))
        gain = 0.25 * hit / (latent.shape[1] - hit)
        latent[:, :hit] -= 0.25
        latent[:, hit:] += gain
    return latent


def cell(
    rng: np.random.Generator,
    model: str,
    m: int,
    k: int,
    reps: int,
    binary_test: BinaryTest = "fisher",
    *,
    budget: Budget | None = None,
    own_variance_tail: float = 1.0,
) -> dict[str, float]:
    """A/A and power rates of one cell. `budget` (weights) and `own_variance_tail` other than the rule's
    only for the trade-off curves of `benchmarks/power_tradeoff.py`."""
    budget = budget or Budget()
    skills, sd = skills_for(rng, model, reps, m), sds_for(rng, model, reps, m)
    kinds = shapes_for(rng, model, reps, m)
    base = moments(draw(rng, model, skills, sd, k, kinds))
    cand = moments(draw(rng, model, skills, sd, k, kinds))
    aa = evaluate(base, cand, FLOOR, budget, binary_test=binary_test, own_variance_tail=own_variance_tail)
    p = aa.mean.p_drop[np.isfinite(aa.mean.p_drop)]
    row = {
        "aa_block": float(aa.block.mean()),
        "aa_flag": float(aa.flag.mean()),
        "ks_p": float(stats.kstest(p, "uniform").pvalue) if len(p) > 10 else float("nan"),
    }
    band = realised_band(base)
    for condition in POWER:
        cand = moments(draw(rng, model, shifted(condition, skills, band, model, sd, kinds), sd, k, kinds))
        outcome = evaluate(
            base, cand, FLOOR, budget, binary_test=binary_test, own_variance_tail=own_variance_tail
        )
        row[condition] = float(outcome.block.mean())
        if condition == "band3":
            # the drop the candidate's scores actually show, in bands (clipping at 0 and 1 absorbs part
            # of a latent shift): the suite-mean difference over the baseline's realised band
            with np.errstate(invalid="ignore", divide="ignore"):
                row["band3_realised"] = float(np.nanmedian(-outcome.mean.mean / band))
    return row


FIXED_REPEATS = 5  # the default: what adaptive repeats are measured against


def plan_label(design: AdaptiveDesign) -> str:
    """A plan's thresholds and repeats, futility/suite/tail@start-maximum (the `--plans` spelling)."""
    return (
        f"{design.futility:g}/{design.suite_futility:g}/{design.tail_futility:g}@{design.start}-{design.maximum}"
    )


def adaptive_cell(
    rng: np.random.Generator, model: str, m: int, reps: int, designs: tuple[AdaptiveDesign, ...]
) -> dict[str, dict[str, float]]:
    """Fixed 5 repeats and adaptive repeats side by side on the SAME draws: the baseline runs 5 repeats
    (a build with a baseline of its own looks; the baseline ran at the fixed count); the candidate's
    first 5 repeats are the fixed arm, its first `design.start` plus the top-ups `plan_top_ups` chooses
    the adaptive arm of each design (rated with `design.looks`), every design on the same draws. Returns
    per arm (`plan_label`) and condition the block rate (A/A: block and flag), the mean paid candidate
    attempts per scenario ('attempts_<condition>') and, for each power condition, the paired power loss
    against fixed 5 ('loss_<condition>', fixed minus adaptive) and its Monte Carlo standard error
    ('loss_se_<condition>', from the per-replication differences)."""
    width = max(FIXED_REPEATS, *(d.maximum for d in designs))
    skills, sd = skills_for(rng, model, reps, m), sds_for(rng, model, reps, m)
    kinds = shapes_for(rng, model, reps, m)
    base = moments(draw(rng, model, skills, sd, FIXED_REPEATS, kinds))
    band = realised_band(base)
    budget = Budget()
    arms: dict[str, dict[str, float]] = {"fixed 5": {}, **{plan_label(d): {} for d in designs}}
    fixed = arms["fixed 5"]
    for condition in ("aa", *POWER):
        latent = skills if condition == "aa" else shifted(condition, skills, band, model, sd, kinds)
        x = draw(rng, model, latent, sd, width, kinds)
        repeat = np.arange(width)[None, None, :]
        first = np.broadcast_to(repeat < FIXED_REPEATS, x.shape)
        plain = evaluate(base, moments(x, first), FLOOR, budget)
        fixed[condition] = float(plain.block.mean())
        fixed[f"attempts_{condition}"] = float(FIXED_REPEATS)
        if condition == "aa":
            fixed["aa_flag"] = float(plain.flag.mean())
        for design in designs:
            adaptive = arms[plan_label(design)]
            interim = moments(x, np.broadcast_to(repeat < design.start, x.shape))
            plan = plan_top_ups(base, interim, FLOOR, budget, design)
            ran = repeat < (design.start + plan.repeats)[:, :, None]
            looks = design.looks(interim, plan.repeats > 0, budget)
            outcome = evaluate(base, moments(x, ran), FLOOR, budget, looks=looks)
            adaptive[condition] = float(outcome.block.mean())
            adaptive[f"attempts_{condition}"] = float(ran.sum(axis=2).mean())
            difference = plain.block.astype(float) - outcome.block.astype(float)
            adaptive[f"loss_{condition}"] = float(difference.mean())
            adaptive[f"loss_se_{condition}"] = float(difference.std() / np.sqrt(reps))
            if condition == "aa":
                adaptive["aa_flag"] = float(outcome.flag.mean())
                adaptive["looked_blocked"] = float(plan.blocked.mean())
    return arms


def frame(x: np.ndarray, attempted: np.ndarray | None = None) -> pd.DataFrame:
    """One build's verdict frame of (m, k) scores, repeats numbered from 1 as the engine numbers them
    (NaN: a failed verdict); `attempted` (m, k) keeps only the repeats run."""
    m, k = x.shape
    out = pd.DataFrame(
        {
            "scenario_id": np.repeat([f"s{i:03d}" for i in range(m)], k),
            "repeat": np.tile(np.arange(1, k + 1), m),
            "status": np.where(np.isfinite(x.ravel()), "scored", "failed"),
            "score": x.ravel(),
            "policy_failures": 0,
        }
    )
    return out if attempted is None else out.loc[attempted.ravel()].reset_index(drop=True)


def adaptive_cross_check(
    rng: np.random.Generator, model: str, m: int, reps: int, design: AdaptiveDesign
) -> int:
    """Disagreements between the vectorised adaptive path (`plan_top_ups` + `evaluate` with looks) and
    `first_look` + compare(design=...) + decide() on the same A/A draws: the top-ups and the decision."""
    skills, sd = skills_for(rng, model, reps, m), sds_for(rng, model, reps, m)
    kinds = shapes_for(rng, model, reps, m)
    xb = draw(rng, model, skills, sd, FIXED_REPEATS, kinds)
    xc = draw(rng, model, skills, sd, design.maximum, kinds)
    repeat = np.arange(design.maximum)[None, None, :]
    base, interim = moments(xb), moments(xc, np.broadcast_to(repeat < design.start, xc.shape))
    plan = plan_top_ups(base, interim, FLOOR, Budget(), design)
    ran = repeat < (design.start + plan.repeats)[:, :, None]
    fast = evaluate(
        base, moments(xc, ran), FLOOR, Budget(), looks=design.looks(interim, plan.repeats > 0, Budget())
    )
    wrong = 0
    for i in range(reps):
        first = np.broadcast_to(repeat[0] < design.start, xc[i].shape)
        look = first_look(frame(xb[i]), frame(xc[i], first), FLOOR, design)
        topped = {f"s{j:03d}" for j in np.flatnonzero(plan.repeats[i] > 0)}
        report = compare(
            frame(xb[i]), frame(xc[i], ran[i]), FLOOR, aa_replications=0, n_resamples=200, design=design
        )
        decision = decide([report]).decision
        expected = "block" if fast.block[i] else "investigate" if fast.flag[i] else "allow"
        wrong += (decision != expected) or (set(look.top_up) != topped)
    return wrong


def cross_check(rng: np.random.Generator, model: str, m: int, k: int, reps: int) -> int:
    """Disagreements between the vectorised rules and compare() + decide() on the same draws."""
    skills, sd = skills_for(rng, model, reps, m), sds_for(rng, model, reps, m)
    kinds = shapes_for(rng, model, reps, m)
    xb, xc = draw(rng, model, skills, sd, k, kinds), draw(rng, model, skills, sd, k, kinds)
    fast = evaluate(moments(xb), moments(xc), FLOOR, Budget())
    wrong = 0
    for i in range(reps):
        report = compare(frame(xb[i]), frame(xc[i]), FLOOR, aa_replications=0, n_resamples=200)
        decision = decide([report]).decision
        expected = "block" if fast.block[i] else "investigate" if fast.flag[i] else "allow"
        wrong += decision != expected
    return wrong


@dataclass(frozen=True)
class Cell:
    m: int
    k: int
    model: str
    reps: int
    check: int
    seed: np.random.SeedSequence
    binary_test: BinaryTest = "fisher"
    designs: tuple[AdaptiveDesign, ...] = ()  # set: fixed 5 and adaptive repeats side by side


def run_adaptive_cell(c: Cell) -> tuple[Cell, dict[str, dict[str, float]], int]:
    """One grid cell of the adaptive comparison, with its own seed like `run_cell`."""
    assert c.designs
    rng = np.random.default_rng(c.seed)
    arms = adaptive_cell(rng, c.model, c.m, c.reps, c.designs)
    wrong = adaptive_cross_check(rng, c.model, c.m, c.check, c.designs[0]) if c.check else 0
    return c, arms, wrong


def run_cell(c: Cell) -> tuple[Cell, dict[str, float], int]:
    """One grid cell with its own seed (spawned from the run's seed), so results do not depend on
    how many workers run the grid or in which order."""
    rng = np.random.default_rng(c.seed)
    row = cell(rng, c.model, c.m, c.k, c.reps, c.binary_test)
    wrong = cross_check(rng, c.model, c.m, c.k, c.check) if c.check else 0
    return c, row, wrong


def rate(p: float, reps: int) -> str:
    """A rate and its Monte Carlo standard error sqrt(p(1-p)/reps), in percent."""
    return f"{100 * p:.1f}±{100 * np.sqrt(p * (1 - p) / reps):.1f}"


def wilson(p: float, reps: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson 95% score interval of a binomial proportion (Wilson 1927)."""
    centre = (p + z * z / (2 * reps)) / (1 + z * z / reps)
    half = z * np.sqrt(p * (1 - p) / reps + z * z / (4 * reps * reps)) / (1 + z * z / reps)
    return centre - half, centre + half


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=2000, help="replications per cell (default 2000)")
    parser.add_argument("--seed", type=int, default=20_261_202)
    parser.add_argument("--check", type=int, default=20, help="compare()+decide() cross-check per A/A cell")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--workers", type=int, default=2, help="processes running grid cells (default 2)")
    parser.add_argument("--models", default=",".join(MODELS), help="noise models to run (default: all)")
    parser.add_argument(
        "--binary-test",
        default="fisher",
        choices=("fisher", "barnard", "moderated"),
        help="per-scenario test on pass/fail repeats (the rule is fisher; the others for the trade-off table)",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="fixed 5 repeats and adaptive repeats (the project's AdaptiveDesign) side by side, K = 5 only",
    )
    parser.add_argument(
        "--plans",
        default="",
        help="with --adaptive: top-up plans futility/suite/tail[@start-maximum],... side by side on the same "
        "draws, e.g. 0.05/0.4/0.1@3-6 (default: the project's AdaptiveDesign; repeats default 3-5)",
    )
    args = parser.parse_args()
    print("Conditions " + __doc__.split("Conditions ")[1].split("Goals")[0].strip())
    if args.adaptive:
        adaptive_main(args, parser)
        return
    print(
        f"replications per cell: {args.reps} (Monte Carlo SE shown as ±, in points of percent); seed {args.seed} "
        f"(one child seed per cell); cross-check {args.check} A/A replications per cell through compare()+decide(); "
        f"{args.workers} worker process(es); budget {Budget()}"
    )
    header = (
        f"{'scen':>5} {'K':>2} {'noise':<13} {'AA block':>9} {'AA flag':>9} {'KS p':>6} "
        f"{'collapse':>9} {'1x band':>9} {'2x band':>9} {'3x band':>9} {'3x seen':>7} {'conc.':>9} {'check':>6}"
    )
    sizes = [int(s) for s in args.sizes.split(",")]
    models = [model for model in args.models.split(",") if model]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown noise model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    grid = [(m, k, model) for m in sizes for k in REPEATS for model in models]
    seeds = np.random.SeedSequence(args.seed).spawn(len(grid))
    check = args.check if args.binary_test == "fisher" else 0  # compare() applies the rule: fisher
    cells = [
        Cell(m, k, model, args.reps, check, seed, args.binary_test)
        for (m, k, model), seed in zip(grid, seeds, strict=True)
    ]
    started, cpu_started = time.perf_counter(), time.process_time()
    recording = Recording(f"decision_calibration_{args.binary_test}")
    table: list[dict[str, object]] = []
    print(header, flush=True)
    misses: list[str] = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for c, r, wrong in pool.map(run_cell, cells):
            n = c.reps
            print(
                f"{c.m:>5} {c.k:>2} {c.model:<13} {rate(r['aa_block'], n):>9} {rate(r['aa_flag'], n):>9} "
                f"{r['ks_p']:>6.3f} {rate(r['collapse'], n):>9} {rate(r['band1'], n):>9} {rate(r['band2'], n):>9} "
                f"{rate(r['band3'], n):>9} {r['band3_realised']:>7.2f} {rate(r['concentrated'], n):>9} "
                f"{wrong:>3}/{c.check}",
                flush=True,
            )
            misses += _misses(c.m, c.k, c.model, r, n)
            table.append(
                {"scen": c.m, "K": c.k, "noise": c.model, "AA block": rate(r["aa_block"], n),
                 "AA flag": rate(r["aa_flag"], n), "KS p": round(r["ks_p"], 3), "collapse": rate(r["collapse"], n),
                 "1x band": rate(r["band1"], n), "2x band": rate(r["band2"], n), "3x band": rate(r["band3"], n),
                 "3x seen": round(r["band3_realised"], 2), "conc.": rate(r["concentrated"], n),
                 "check": f"{wrong}/{c.check}"}
            )
    wall = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu_started + children.ru_utime + children.ru_stime
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s (this process and its workers)")
    print("goals missed (rate, Wilson 95% interval):" if misses else "every goal met")
    for miss in misses:
        print(f"  {miss}")
    recording.figure("seed", args.seed)
    recording.table("cells", table)
    recording.table("goals_missed", [{"miss": miss} for miss in misses])
    recording.write()


def parse_plans(text: str, parser: argparse.ArgumentParser) -> tuple[AdaptiveDesign, ...]:
    """`--plans 0.05/0.4/0.1@3-6,...`: futility/suite/tail thresholds of each plan and, after `@`, its start
    and maximum repeats (default: the project's, 3-5)."""
    designs = []
    for item in (part for part in text.split(",") if part):
        try:
            thresholds, _, repeats = item.partition("@")
            futility, suite, tail = (float(v) for v in thresholds.split("/"))
            start, maximum = (int(v) for v in repeats.split("-")) if repeats else (3, FIXED_REPEATS)
            designs.append(
                AdaptiveDesign(
                    start=start, maximum=maximum, futility=futility, suite_futility=suite, tail_futility=tail
                )
            )
        except ValueError as error:
            parser.error(
                f"--plans: {item!r} is not futility/suite/tail in (0, 1), optionally @start-maximum ({error})"
            )
    return tuple(designs)


def worst_loss(r: dict[str, float]) -> tuple[str, float, float]:
    """The power condition where this arm loses most against fixed 5: (condition, loss, paired SE)."""
    condition = max(POWER, key=lambda c: r[f"loss_{c}"])
    return condition, r[f"loss_{condition}"], r[f"loss_se_{condition}"]


def loss_mark(loss: float, paired_se: float, fixed_rate: float, reps: int) -> str:
    """'!' where a power loss is beyond the Monte Carlo error of the fixed arm's rate (2 SE of the rate,
    the ± printed beside it: the goal's yardstick); '*' where it is within that but beyond 2 paired SE
    (detectable on the same draws: the price of the spending rule's split)."""
    if loss > 2.0 * np.sqrt(fixed_rate * (1.0 - fixed_rate) / reps):
        return "!"
    return "*" if loss > 2.0 * paired_se else " "


def adaptive_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """`--adaptive`: per cell, fixed 5 repeats and adaptive repeats on the same draws, side by side;
    with `--plans`, several top-up plans on the same draws (the trade-off between saving and power)."""
    designs = parse_plans(args.plans, parser) if args.plans else (AdaptiveDesign(),)
    design = designs[0]
    sizes = [int(s) for s in args.sizes.split(",")]
    models = [model for model in args.models.split(",") if model]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown noise model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    shares = design.looks(moments(np.zeros((1, 1, 1))), np.zeros((1, 1)), Budget()).shares
    print(
        f"Adaptive repeats: {', '.join(map(str, designs))} (spending shares w1, w2 = "
        f"{', '.join(f'{w:.4f}' for w in shares)}); "
        f"baseline at {FIXED_REPEATS} repeats; the candidate's first {FIXED_REPEATS} repeats are the fixed arm, its first "
        f"{design.start} plus plan_top_ups' top-ups the adaptive arm, on the same draws. 'att.' = paid candidate "
        "attempts per scenario (mean; under each condition in its own column's row below the rates); 'worst loss' = "
        "the power condition where the adaptive arm blocks least often against fixed 5 on the same draws, fixed minus "
        "adaptive in points of percent, ± its paired Monte Carlo SE; '!' where that loss is beyond 2 Monte Carlo SE of "
        "the fixed arm's rate (the goal: none), '*' where it is within that but beyond 2 paired SE.\n"
        f"replications per cell: {args.reps}; seed {args.seed} (one child seed per cell); cross-check {args.check} "
        "A/A replications per cell through first_look() + compare(design) + decide() (top-ups and decision; first plan); "
        f"{args.workers} worker process(es); budget {Budget()}"
    )
    grid = [(m, model) for m in sizes for model in models]
    seeds = np.random.SeedSequence(args.seed).spawn(len(grid))
    cells = [
        Cell(m, FIXED_REPEATS, model, args.reps, args.check, seed, designs=designs)
        for (m, model), seed in zip(grid, seeds, strict=True)
    ]
    if len(designs) == 1:
        print(
            f"{'scen':>5} {'noise':<13} {'arm':<9} {'att. A/A':>8} {'saved':>6} {'AA block':>9} {'AA flag':>9} "
            f"{'collapse':>9} {'1x band':>9} {'2x band':>9} {'3x band':>9} {'conc.':>9} {'att. conc':>9} "
            f"{'worst loss':>22} {'check':>6}",
            flush=True,
        )
    else:
        print(
            f"{'scen':>5} {'noise':<13} {'plan':<20} {'saved':>6} {'AA block':>9} {'AA flag':>9} {'worst loss':>22}"
        )
    started, cpu_started = time.perf_counter(), time.process_time()
    summary: dict[str, list[tuple[float, float, float, float, float, str, str]]] = {
        plan_label(d): [] for d in designs
    }
    recording = Recording("decision_calibration_adaptive")
    table: list[dict[str, object]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for c, arms, wrong in pool.map(run_adaptive_cell, cells):
            n = c.reps
            for arm, r in arms.items():
                saved = 1.0 - r["attempts_aa"] / FIXED_REPEATS
                loss = ""
                if arm != "fixed 5":
                    condition, value, se = worst_loss(r)
                    mark = loss_mark(value, se, arms["fixed 5"][condition], n)
                    loss = f"{condition} {100 * value:+.1f}±{100 * se:.1f}{mark}"
                    where = f"{c.m}x5 {c.model} {condition}"
                    summary[arm].append((saved, r["aa"], r["aa_flag"], value, se, where, mark))
                table.append(
                    {"scen": c.m, "noise": c.model, "arm": arm if arm == "fixed 5" or len(designs) > 1 else "adaptive",
                     "att. A/A": round(r["attempts_aa"], 2), "saved": f"{100 * saved:.1f}%",
                     "AA block": rate(r["aa"], n), "AA flag": rate(r["aa_flag"], n),
                     "collapse": rate(r["collapse"], n), "1x band": rate(r["band1"], n),
                     "2x band": rate(r["band2"], n), "3x band": rate(r["band3"], n),
                     "conc.": rate(r["concentrated"], n), "att. conc": round(r["attempts_concentrated"], 2),
                     "worst loss": loss, "check": f"{wrong}/{c.check}" if arm != "fixed 5" else ""}
                )
                if len(designs) == 1:
                    print(
                        f"{c.m:>5} {c.model:<13} {'fixed 5' if arm == 'fixed 5' else 'adaptive':<9} "
                        f"{r['attempts_aa']:>8.2f} {100 * saved:>5.1f}% "
                        f"{rate(r['aa'], n):>9} {rate(r['aa_flag'], n):>9} {rate(r['collapse'], n):>9} "
                        f"{rate(r['band1'], n):>9} {rate(r['band2'], n):>9} {rate(r['band3'], n):>9} "
                        f"{rate(r['concentrated'], n):>9} {r['attempts_concentrated']:>9.2f} {loss:>22} "
                        + (f"{wrong:>3}/{c.check}" if arm != "fixed 5" else ""),
                        flush=True,
                    )
                elif arm != "fixed 5":
                    print(
                        f"{c.m:>5} {c.model:<13} {arm:<20} {100 * saved:>5.1f}% {rate(r['aa'], n):>9} "
                        f"{rate(r['aa_flag'], n):>9} {loss:>22}",
                        flush=True,
                    )
    wall = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu_started + children.ru_utime + children.ru_stime
    print(
        "per plan over the cells (saving at A/A, worst A/A block and flag, worst power loss against fixed 5 "
        "± paired SE; cells whose worst loss is beyond the fixed rate's Monte Carlo error '!', within it but "
        "beyond 2 paired SE '*'):"
    )
    plans: list[dict[str, object]] = []
    for label, rows in summary.items():
        worst = max(rows, key=lambda row: row[3])
        beyond = sum(row[6] == "!" for row in rows)
        detectable = sum(row[6] == "*" for row in rows)
        line = (
            f"plan {label:<20} saved {100 * min(r[0] for r in rows):.1f}% to {100 * max(r[0] for r in rows):.1f}% "
            f"(mean {100 * np.mean([r[0] for r in rows]):.1f}%); A/A block <= {100 * max(r[1] for r in rows):.1f}%, "
            f"flag <= {100 * max(r[2] for r in rows):.1f}%; worst loss {100 * worst[3]:+.1f}±{100 * worst[4]:.1f} "
            f"({worst[5]}); cells '!' {beyond}, '*' {detectable} of {len(rows)}"
        )
        print(f"  {line}")
        plans.append({"summary": line})
    recording.figure("seed", args.seed)
    recording.table("cells", table)
    recording.table("plans", plans)
    recording.write()
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s (this process and its workers)")


def _misses(m: int, k: int, model: str, r: dict[str, float], reps: int) -> list[str]:
    where = f"{m}x{k} {model}"
    out = []

    def miss(label: str, value: float, goal: float, above: bool) -> None:
        low, high = wilson(value, reps)
        sure = high < goal if above else low > goal
        word = "below" if above else "above"
        note = (
            "the whole interval misses"
            if sure
            else f"the interval reaches the goal: not shown to be {word} it"
        )
        out.append(f"{where}: {label} {value:.1%} [{low:.1%}, {high:.1%}] vs goal {goal:.0%}; {note}")

    if r["aa_block"] > 0.05:
        miss("A/A block", r["aa_block"], 0.05, above=False)
    if r["aa_flag"] > 0.15:
        miss("A/A flag", r["aa_flag"], 0.15, above=False)
    if model in CONTINUOUS and r["ks_p"] <= 0.01:
        out.append(f"{where}: KS p {r['ks_p']:.3f} <= 0.01")
    if r["collapse"] < 0.95:
        miss("collapse blocked", r["collapse"], 0.95, above=True)
    if r["band3"] < 0.90:
        miss(f"3x band blocked (realised drop {r['band3_realised']:.2f} bands)", r["band3"], 0.90, above=True)
    if (m, k) == (22, 5) and r["concentrated"] < 0.80:
        miss("concentrated blocked", r["concentrated"], 0.80, above=True)
    if (m, k) == (200, 5) and r["concentrated"] < 0.95:
        miss("concentrated blocked", r["concentrated"], 0.95, above=True)
    return out


if __name__ == "__main__":
    main()
