"""What `evaltrack release-status` costs when it verifies a decision's evidence, at 22 and 10,000 scenarios.

    .venv/bin/python benchmarks/release_status.py [--scenarios 10000] [--repeats 5] [--runs 3]

For each size, a fresh home gets the two example manifests (a baseline and its unchanged rebuild)
and, for both builds, every input table a decision reads written through the one partition writer
with synthetic rows of realistic size (outputs of ~800 characters, seeded): `scenario_runs` and
`judge_verdicts` (scenarios x repeats rows each), `noise_bands` and `capability_reports` (a row per
scenario), `gate_results`; then a decision row whose evidence is captured by the code the
`release_decision` asset uses (`eval_assets.evidence.capture`). `release-status` is then run as its
own process `--runs` times per size, alternating sizes, and its CPU (user + system, from the child's
rusage) and wall are printed as medians, with the ratio of the two sizes. Every read re-hashes every
input file in full, so the cost grows with the bytes of the evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.config import load_project  # noqa: E402
from eval_assets.evidence import capture  # noqa: E402
from eval_assets.home import EvalHome  # noqa: E402
from eval_assets.warehouse import DATASETS, Warehouse  # noqa: E402

BASE, REBUILD, JUDGE = "agent-2026-11-28-base", "agent-2026-11-29-rebuild", "helpfulness-v1"
WORDS = "the refund policy allows a full refund within thirty days of purchase for unused items".split()


def value(column: str, sql_type: str, rng: random.Random, i: int) -> object:
    if sql_type == "VARCHAR":
        if column == "output":
            return " ".join(rng.choice(WORDS) for _ in range(130))
        return f"{column}-{i % 97}"
    if sql_type in ("INTEGER", "BIGINT"):
        return i % 7
    if sql_type == "DOUBLE":
        return rng.random()
    if sql_type == "BOOLEAN":
        return bool(i % 2)
    if sql_type == "TIMESTAMP":
        return None
    raise ValueError(f"no synthetic value for {sql_type}")


def rows(table: str, build: str, n: int, rng: random.Random) -> list[dict[str, object]]:
    ds = DATASETS[table]
    out = []
    for i in range(n):
        row = {c: value(c, t, rng, i) for c, t in ds.columns}
        row.update(build=build, **({"judge_version": JUDGE} if "judge_version" in ds.partition_by else {}))
        if "scenario_id" in row:
            row["scenario_id"] = f"synthetic.s{i // 5:05d}"
        out.append(row)
    return out


def make_home(path: Path, scenarios: int, repeats: int) -> None:
    home = EvalHome(path).ensure()
    for name in ("baseline.yaml", "rebuild.yaml"):
        shutil.copy(ROOT / "examples" / "builds" / name, home.builds / name)
    for src in list(home.builds.glob("*.yaml")):
        import yaml

        data = yaml.safe_load(src.read_text())
        data["judges"] = [JUDGE]
        src.unlink()
        (home.builds / f"{data['id']}.yaml").write_text(yaml.safe_dump(data))
    warehouse = Warehouse(home.warehouse)
    warehouse.initialise()
    rng = random.Random(f"release-status benchmark {scenarios}")
    sizes = {
        "scenario_runs": scenarios * repeats,
        "judge_verdicts": scenarios * repeats,
        "noise_bands": scenarios + 1,
        "capability_reports": scenarios + 1,
        "gate_results": 40,
    }
    for build in (BASE, REBUILD):
        for table, n in sizes.items():
            ds = DATASETS[table]
            partition = {
                "build": build,
                **({"judge_version": JUDGE} if "judge_version" in ds.partition_by else {}),
            }
            warehouse.write_partition(table, partition, rows(table, build, n, rng), f"bench-{table}")
    inputs = capture(warehouse, home, [BASE, REBUILD], [JUDGE], ROOT, decided=REBUILD)
    decision = {
        "build": REBUILD,
        "decision": "allow",
        "reasons": "",
        "judge_versions": JUDGE,
        "baseline": BASE,
    }
    warehouse.write_partition(
        "release_decisions", {"build": REBUILD}, [{**decision, "evidence": inputs}], "bench"
    )
    reason = {c: None for c, _ in DATASETS["release_decision_reasons"].columns}
    reason.update(build=REBUILD, decision="allow", rank=1, severity="info", source=JUDGE, finding="summary")
    warehouse.write_partition("release_decision_reasons", {"build": REBUILD}, [reason], "bench")


def one_run(home: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "evaltrack"), "--home", str(home), "release-status", REBUILD],
        capture_output=True,
        text=True,
        env={**os.environ, "EVAL_PROJECT_ROOT": str(ROOT)},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load_project(ROOT)  # fail early on a broken checkout
    recording = Recording("release_status")
    table = []
    sizes = (22, args.scenarios)
    with tempfile.TemporaryDirectory(prefix="evaltrack-release-status-") as tmp:
        homes = {n: Path(tmp) / f"home-{n}" for n in sizes}
        for n, home in homes.items():
            make_home(home, n, args.repeats)
        results: dict[int, list[tuple[float, float, int]]] = {n: [] for n in sizes}
        for _ in range(args.runs):  # alternating sizes
            for n in sizes:
                results[n].append(one_run(homes[n]))
        evidence_bytes = {
            n: sum(p.stat().st_size for p in (home / "warehouse" / "data").rglob("*.parquet"))
            for n, home in homes.items()
        }
    print(
        f"load average: {os.getloadavg()[0]:.2f} (2 cores); runs per size: {args.runs}; repeats: {args.repeats}"
    )
    print(f"{'scenarios':>9}  {'data bytes':>11}  {'CPU median s':>12}  {'wall median s':>13}  exit codes")
    medians = {}
    for n in sizes:
        cpu = statistics.median(r[0] for r in results[n])
        wall = statistics.median(r[1] for r in results[n])
        medians[n] = cpu
        codes = sorted({r[2] for r in results[n]})
        print(f"{n:>9}  {evidence_bytes[n]:>11}  {cpu:>12.3f}  {wall:>13.3f}  {codes}")
        table.append({"scenarios": n, "data_bytes": evidence_bytes[n], "cpu_median_s": round(cpu, 3),
                      "wall_median_s": round(wall, 3), "exit_codes": codes})
    print(f"CPU ratio {args.scenarios} / 22 scenarios: {medians[args.scenarios] / medians[22]:.2f}")
    print(json.dumps({"cpu_s": {str(n): medians[n] for n in sizes}}))
    recording.figure("cpu_ratio", round(medians[args.scenarios] / medians[22], 3))
    recording.table("sizes", table)
    recording.write()


if __name__ == "__main__":
    main()
