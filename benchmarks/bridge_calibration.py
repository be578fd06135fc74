"""Bridge calibration: coverage of a known bias, false "not constant" rate and power, by simulation.

Every replication builds a paired frame (build, scenario_id, repeat, old_score, new_score) and passes it
to `eval_assets.stats.calibrate`, the function `eval_assets.bridge.run_bridge` calls. Printed per cell:
  coverage   share of replications whose offset CI contains the known offset (goal >= 0.93);
  half-width mean CI half-width, in rubric points;
  not const  share of replications in which the constant-offset check rejects (an equating function
             is published instead of a constant): the FALSE rate under a pure offset (goal <= 0.10),
             the POWER under a real slope;
  published  share of replications the bridge would publish.
The conditions (scenarios G, repeats K, builds, noise sds, replications) are printed beside each rate.
For comparison, the first condition also prints the coverage of the percentile cluster bootstrap that
`calibrate` used before (reimplemented here: 2000 resamples of scenarios, 2.5%/97.5% quantiles).

Data-generating models (rubric points on a 1-5 scale; levels are unclipped unless "sim judge"):
  scenario level mu_g ~ N(3, 0.6); per (build, scenario) cell a shift ~ N(0, 0.2); an output's true
  score T = cell level + N(0, subject sd 0.4); old = T + e_old; new = 3 + slope (T - 3) + b + tau_g +
  e_new with b = 0.3, tau_g ~ N(0, 0.1) the scenario's own deviation of the offset. The known offset is
  E[new - old] = b (E[T] = 3). Noise shapes: normal; t with 3 df scaled to the same sd; heterogeneous
  (a random 20% of scenarios have 4x the judge noise); 20% of outputs missing at random.
  "sim judge": the project's own sim model (eval_assets.providers.simmodel: subject_quality with
  skill ~ U(0.25, 0.7) per scenario and noise 0.12, judge_value on three integer 1-5 criteria weighted
  3/2/1 as rubrics/helpfulness-v1.yaml, noise 0.3, old bias 0, new bias 0.3, the two versions drawing
  independent noise). Rounding and clipping make its offset differ from 0.3 and vary slightly with
  the level; its known offset is computed once from 30,000 independent outputs of the same model.

Run: .venv/bin/python benchmarks/bridge_calibration.py [--reps 1000] [--power-reps 500] [--seed 20261202]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.providers.simmodel import judge_value, rng_for, subject_quality  # noqa: E402
from eval_assets.stats import calibrate  # noqa: E402

SIZES = (5, 12, 22)
BIAS = 0.3
WEIGHTS = (3.0, 2.0, 1.0)
SIM_TARGET_OUTPUTS = 30_000  # Monte Carlo SE of the sim's known offset ~0.0025 (its CI half-widths: 0.09+)


@dataclass(frozen=True)
class Condition:
    name: str
    repeats: int
    builds: int = 1
    sd_old: float = 0.3
    sd_new: float = 0.3
    slope: float = 1.0
    shape: str = "normal"  # normal | t3 | hetero | missing | sim
    extra: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        noise = f"sd old {self.sd_old:g}/new {self.sd_new:g}"
        if self.shape == "sim":
            return f"K={self.repeats} builds={self.builds} sim judge, {noise}, subject noise 0.12"
        return (
            f"K={self.repeats} builds={self.builds} {self.shape}, {noise}, subject 0.4, tau 0.1, "
            f"slope {self.slope:g}"
        )


PURE = (
    Condition("normal", repeats=3),
    Condition("normal, 3 builds", repeats=5, builds=3),
    Condition("noisy old judge", repeats=3, sd_old=1.0),
    Condition("t(3) judge noise", repeats=3, shape="t3"),
    Condition("heterogeneous noise", repeats=3, shape="hetero"),
    Condition("20% missing", repeats=5, shape="missing"),
    Condition("sim judge", repeats=3, shape="sim"),
)
POWER = (
    Condition("slope 1.3", repeats=3, slope=1.3),
    Condition("slope 1.3, noisy old", repeats=5, builds=3, sd_old=1.0, slope=1.3),
)


def continuous(cond: Condition, g: int, rng: np.random.Generator) -> pd.DataFrame:
    k, b = cond.repeats, cond.builds
    scen = np.repeat(np.arange(g), b * k)
    build = np.tile(np.repeat(np.arange(b), k), g)
    n = len(scen)
    level = 3.0 + 0.6 * rng.normal(size=g)[scen] + 0.2 * rng.normal(size=g * b)[scen * b + build]
    true = level + 0.4 * rng.normal(size=n)

    def noise(sd: float) -> np.ndarray:
        if cond.shape == "t3":
            return sd * rng.standard_t(3, size=n) / np.sqrt(3.0)  # t(3) has variance 3
        return sd * rng.normal(size=n)

    scale = np.ones(n)
    if cond.shape == "hetero":
        scale = np.where(rng.random(g) < 0.2, 4.0, 1.0)[scen]
    old = true + scale * noise(cond.sd_old)
    tau = 0.1 * rng.normal(size=g)[scen]
    new = 3.0 + cond.slope * (true - 3.0) + BIAS + tau + scale * noise(cond.sd_new)
    frame = pd.DataFrame(
        {
            "build": build.astype(str),
            "scenario_id": scen.astype(str),
            "repeat": np.tile(np.arange(1, k + 1), g * b),
            "old_score": old,
            "new_score": new,
        }
    )
    if cond.shape == "missing":
        frame = frame[rng.random(n) >= 0.2]
    return frame


def _sim_points(quality: float, bias: float, rng_parts: tuple[object, ...]) -> float:
    rng = rng_for("judge", *rng_parts)
    values = [
        judge_value(quality=quality, low=1, high=5, bias=bias, noise=0.3, rng=rng, integer=True) for _ in WEIGHTS
    ]
    return float(np.average(values, weights=WEIGHTS))


def sim_outputs(skills: np.ndarray, repeats: int, tag: str) -> pd.DataFrame:
    rows = []
    for s, skill in enumerate(skills):
        sid = f"s{s}"
        for r in range(1, repeats + 1):
            q = subject_quality(seed=1, build=tag, scenario_id=sid, repeat=r, skill=float(skill), noise=0.12)
            old = _sim_points(q, 0.0, (11, "simjudge/old", tag, sid, r, 1))
            new = _sim_points(q, BIAS, (12, "simjudge/new", tag, sid, r, 1))
            rows.append((tag, sid, r, old, new))
    return pd.DataFrame(rows, columns=["build", "scenario_id", "repeat", "old_score", "new_score"])


def sim_target(rng: np.random.Generator, outputs: int) -> float:
    frame = sim_outputs(rng.uniform(0.25, 0.7, size=outputs), 1, "target")
    return float((frame["new_score"] - frame["old_score"]).mean())


def percentile_cluster_bootstrap(frame: pd.DataFrame, rng: np.random.Generator, n_boot: int = 2000) -> tuple[float, float]:
    """The interval `calibrate` used before: resample scenarios, 2.5%/97.5% quantiles of the offset."""
    d = (frame["new_score"] - frame["old_score"]).to_numpy()
    codes, _ = pd.factorize(frame["scenario_id"])
    sums, counts = np.bincount(codes, weights=d), np.bincount(codes).astype(float)
    idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    boot = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    low, high = np.quantile(boot, [0.025, 0.975])
    return float(low), float(high)


@dataclass
class Cell:
    covered: int = 0
    rejected: int = 0
    published: int = 0
    half: list[float] = field(default_factory=list)
    old_covered: int = 0
    reps: int = 0


def run_cell(
    cond: Condition, g: int, reps: int, seed: int, target: float, old_method: bool
) -> Cell:
    rng = np.random.default_rng([seed, hash_name(cond.name), g])
    cell = Cell(reps=reps)
    make: Callable[[int], pd.DataFrame]
    if cond.shape == "sim":
        def make(rep: int) -> pd.DataFrame:
            return sim_outputs(rng.uniform(0.25, 0.7, size=g), cond.repeats, f"rep{rep}")
    else:
        def make(rep: int) -> pd.DataFrame:
            return continuous(cond, g, rng)
    for rep in range(reps):
        frame = make(rep)
        cal = calibrate(frame)
        assert cal.ci_low is not None and cal.ci_high is not None and cal.half_width is not None
        cell.covered += cal.ci_low <= target <= cal.ci_high
        cell.rejected += cal.constant_offset is False
        cell.published += cal.published
        cell.half.append(cal.half_width)
        if old_method:
            low, high = percentile_cluster_bootstrap(frame, rng)
            cell.old_covered += low <= target <= high
    return cell


def hash_name(name: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(name))  # stable across runs (never Python's hash)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000, help="replications per pure-offset cell")
    ap.add_argument("--power-reps", type=int, default=500, help="replications per slope cell")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--only", default="", help="condition names separated by | (default: all)")
    args = ap.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    recording = Recording("bridge_calibration")
    rows = []
    wanted = {n.strip() for n in args.only.split("|") if n.strip()}
    sim_known = float("nan")
    if not wanted or "sim judge" in wanted:
        sim_known = sim_target(np.random.default_rng([args.seed, 0]), SIM_TARGET_OUTPUTS)
        print(f"known offset: {BIAS} (continuous models); sim judge {sim_known:.4f} ({SIM_TARGET_OUTPUTS:,} outputs)")
    else:
        print(f"known offset: {BIAS} (continuous models)")
    print(f"seed {args.seed}; 95% intervals; goals: coverage >= 0.93, pure offset 'not constant' <= 0.10")
    header = f"{'condition':<22}{'G':>3}  {'conditions':<66}{'reps':>5}{'coverage':>9}{'half-w':>7}"
    print(header + f"{'not const':>10}{'published':>10}")
    worst_cover, worst_false = 1.0, 0.0
    for cond in PURE + POWER:
        if wanted and cond.name not in wanted:
            continue
        pure = cond.slope == 1.0
        reps = args.reps if pure else args.power_reps
        for g in SIZES:
            target = sim_known if cond.shape == "sim" else BIAS
            cell = run_cell(cond, g, reps, args.seed, target, old_method=cond is PURE[0])
            cover, rej = cell.covered / reps, cell.rejected / reps
            label = "POWER" if not pure else "(sim)" if cond.shape == "sim" else "false"
            print(
                f"{cond.name:<22}{g:>3}  {cond.describe():<66}{reps:>5}{cover:>9.3f}{np.mean(cell.half):>7.3f}"
                f"{rej:>6.3f} {label:<4}{cell.published / reps:>9.3f}",
                flush=True,
            )
            rows.append(
                {"condition": cond.name, "G": g, "K": cond.repeats, "builds": cond.builds,
                 "judge noise sd old/new": f"{cond.sd_old:g}/{cond.sd_new:g}", "reps": reps,
                 "coverage": f"{cover:.3f}",
                 "(replaced bootstrap)": f"{cell.old_covered / reps:.3f}" if cond is PURE[0] else "",
                 "mean half-width": f"{np.mean(cell.half):.3f}",
                 '"not constant"': f"{rej:.3f} ({'power' if label == 'POWER' else 'sim' if label == '(sim)' else 'false'})",
                 "published": f"{cell.published / reps:.3f}"}
            )
            if cond is PURE[0]:
                print(f"{'':<25}{'  replaced percentile cluster bootstrap, same frames':<66}{reps:>5}"
                      f"{cell.old_covered / reps:>9.3f}")
            worst_cover = min(worst_cover, cover)
            if pure and cond.shape != "sim":
                worst_false = max(worst_false, rej)
    print(f"lowest coverage over all cells: {worst_cover:.3f} (goal >= 0.93: {'met' if worst_cover >= 0.93 else 'NOT met'})")
    print(f"highest false 'not constant' rate, continuous pure-offset cells: {worst_false:.3f} "
          f"(goal <= 0.10: {'met' if worst_false <= 0.10 else 'NOT met'})")
    print("Monte Carlo SE of a rate p over r reps: sqrt(p(1-p)/r), 0.007 at p = 0.95, r = 1000")
    print(f"wall {time.perf_counter() - wall:.0f} s, CPU {time.process_time() - cpu:.0f} s")
    recording.figure("lowest_coverage", round(worst_cover, 4))
    recording.figure("highest_false_not_constant", round(worst_false, 4))
    recording.figure("seed", args.seed)
    recording.table("cells", rows)
    recording.write()


if __name__ == "__main__":
    main()
