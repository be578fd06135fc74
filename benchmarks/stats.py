"""Statistics throughput: noise band + capability report (+ release decision) at suite scale.

    .venv/bin/python benchmarks/stats.py [--scenarios 1000,10000,100000] [--repeats 5] [--resamples 2000]

For each size, two builds' verdicts (clipped Gaussian scores, ~1% failed, ~1% excluded, a handful of
policy failures) are written to Parquet in a temp dir and read back through DuckDB, as the assets
read them from the warehouse. Timed separately: the read, `noise_band` of the baseline, `compare`
(with that band, INCLUDING the report's own A/A simulation of `AA_REPLICATIONS` replications) and
`decide`. One warm-up run per size is discarded; the figures are medians of `--runs` (>= 3) runs, wall
and CPU (process) time side by side, and microseconds per verdict row. Goal: the 10,000-scenario report,
its simulation included, under 5 s.

Above `SCIPY_BCA_MAX_N` scenarios the mean's BCa interval switches from `scipy.stats.bootstrap`
(its jackknife is O(n^2): ~0.8 s at 10k, ~5 s at 30k) to the vectorised O(n * resamples) version.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from _results import Recording

from eval_assets.stats import AA_REPLICATIONS, SCIPY_BCA_MAX_N, compare, decide, noise_band

FLOOR = 0.15


@dataclass(frozen=True)
class Timing:
    scenarios: int
    rows: int
    read_s: float
    band_s: float
    compare_s: float
    decide_s: float
    cpu_s: float
    verdict: str
    aa_block: float | None

    @property
    def report_s(self) -> float:
        return self.band_s + self.compare_s + self.decide_s


def synthetic_verdicts(n_scenarios: int, repeats: int, seed: int, drop: float) -> pd.DataFrame:
    """One build's verdict frame: skills U(0.75, 0.9) minus `drop`, noise 0.15, some failures."""
    rng = np.random.default_rng(seed)
    skills = np.random.default_rng(0).uniform(0.75, 0.9, n_scenarios) - drop
    scores = np.clip(skills[:, None] + 0.15 * rng.standard_normal((n_scenarios, repeats)), 0.0, 1.0).ravel()
    status = rng.choice(np.array(["scored", "failed", "excluded"]), size=scores.size, p=[0.98, 0.01, 0.01])
    policy = np.where((status != "excluded") & (rng.random(scores.size) < 1e-4), 1, 0)
    return pd.DataFrame(
        {
            "scenario_id": np.repeat([f"scn-{i:06d}" for i in range(n_scenarios)], repeats),
            "repeat": np.tile(np.arange(repeats), n_scenarios),
            "status": status,
            "score": np.where(status == "scored", scores, np.nan),
            "policy_failures": policy,
        }
    )


def to_warehouse(frame: pd.DataFrame, path: Path) -> None:
    """Write a Parquet file with DuckDB (the warehouse's writer; no pyarrow needed)."""
    with duckdb.connect() as con:
        con.register("verdicts", frame)
        con.execute(f"copy verdicts to '{path}' (format parquet)")


def from_warehouse(path: Path) -> pd.DataFrame:
    return duckdb.sql(f"select * from read_parquet('{path}')").df()


def measure(n_scenarios: int, repeats: int, resamples: int, workdir: Path) -> Timing:
    paths = {}
    for build, seed, drop in (("baseline", 1, 0.0), ("candidate", 2, 0.005)):
        paths[build] = workdir / f"{build}-{n_scenarios}.parquet"
        to_warehouse(synthetic_verdicts(n_scenarios, repeats, seed, drop), paths[build])
    cpu = time.process_time()
    start = time.perf_counter()
    baseline, candidate = from_warehouse(paths["baseline"]), from_warehouse(paths["candidate"])
    read = time.perf_counter()
    band = noise_band(baseline)
    banded = time.perf_counter()
    report = compare(baseline, candidate, FLOOR, band, n_resamples=resamples, judge_version="bench-v1")
    compared = time.perf_counter()
    decision = decide([report])
    decided = time.perf_counter()
    cpu_s = time.process_time() - cpu
    return Timing(
        scenarios=n_scenarios,
        rows=len(baseline) + len(candidate),
        read_s=read - start,
        band_s=banded - read,
        compare_s=compared - banded,
        decide_s=decided - compared,
        cpu_s=cpu_s,
        verdict=decision.decision,
        aa_block=report.aa_block_rate,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.scenarios.split(",")]
    recording = Recording("stats")
    table = []
    print(
        f"repeats={args.repeats} resamples={args.resamples} A/A replications={AA_REPLICATIONS} "
        f"scipy BCa up to {SCIPY_BCA_MAX_N} scenarios; medians of {args.runs} runs after 1 warm-up"
    )
    print(
        f"{'scenarios':>10} {'rows':>9} {'read s':>7} {'band s':>7} {'compare s':>9} {'decide s':>8} "
        f"{'report s':>8} {'cpu s':>7} {'us/row':>7}  decision  aa_block"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            measure(n, args.repeats, args.resamples, Path(tmp))  # warm-up, discarded
            runs = [measure(n, args.repeats, args.resamples, Path(tmp)) for _ in range(max(3, args.runs))]
            med = {k: float(np.median([getattr(r, k) for r in runs])) for k in ("read_s", "band_s", "compare_s", "decide_s", "report_s", "cpu_s")}
            first = runs[0]
            print(
                f"{n:>10} {first.rows:>9} {med['read_s']:>7.2f} {med['band_s']:>7.2f} {med['compare_s']:>9.2f} "
                f"{med['decide_s']:>8.3f} {med['report_s']:>8.2f} {med['cpu_s']:>7.2f} "
                f"{med['report_s'] / first.rows * 1e6:>7.2f}  {first.verdict:<8}  {first.aa_block}"
            )
            table.append(
                {"scenarios": n, "rows": first.rows, "read s": round(med["read_s"], 2),
                 "band s": round(med["band_s"], 2), "compare s": round(med["compare_s"], 2),
                 "decide s": round(med["decide_s"], 3), "report s": round(med["report_s"], 2),
                 "cpu s": round(med["cpu_s"], 2), "us/row": round(med["report_s"] / first.rows * 1e6, 2),
                 "decision": first.verdict, "aa_block": first.aa_block}
            )
    recording.table("sizes", table)
    recording.write()


if __name__ == "__main__":
    main()
