"""The warehouse on object storage beside the local directory, in one run: publish and query times of
10,000 scenarios x 5 repeats x 3 builds (`scenario_runs` and `judge_verdicts`, one partition per build).

    nice -n 19 .venv/bin/python benchmarks/warehouse_object_store.py [--scenarios 10000] [--repeats 5]
        [--builds 3] [--out benchmarks/results/warehouse_object_store.json]

The bucket is moto's S3 server on 127.0.0.1 and the catalog a throwaway PostgreSQL cluster with fsync
on (tests/object_store.py, tests/pg.py): a local stand-in, so the object side's figures are an upper
bound of this code's own cost plus a Python S3 server's, not a cloud's latency. Per side: the seconds
to publish each partition (median over builds), the first read after the writes (binding the views),
and the median of 5 repeats of each query. The machine, its load before and after, the commit and the
command are printed and written to `--out`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from object_store import S3Server  # noqa: E402
from pg import PostgresCluster  # noqa: E402

from eval_assets.warehouse import DATASETS, Warehouse  # noqa: E402

QUERIES = {
    "scenario means (judge_verdicts)": "SELECT build, scenario_id, avg(score) FROM judge_verdicts "
    "WHERE status = 'scored' GROUP BY ALL",
    "runs x verdicts join, per build": "SELECT r.build, count(*), avg(v.score), sum(r.cost_usd) FROM scenario_runs r "
    "JOIN judge_verdicts v USING (build, scenario_id, repeat) GROUP BY 1",
    "one build's worst 5 (QUALIFY)": "SELECT scenario_id, avg(score) AS m FROM judge_verdicts WHERE build = 'b1' "
    "GROUP BY 1 ORDER BY m LIMIT 5",
}


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()


def frames(build: str, scenarios: int, repeats: int) -> tuple[object, object]:
    import numpy as np
    import pandas as pd

    n = scenarios * repeats
    ids = np.repeat([f"s{i:05d}" for i in range(scenarios)], repeats)
    rep = np.tile(np.arange(1, repeats + 1), scenarios)
    rng = np.random.default_rng(len(build))
    runs = {c: None for c, _ in DATASETS["scenario_runs"].columns if c != "build"}
    runs.update(
        scenario_id=ids,
        repeat=rep,
        suite="bench",
        source="sim",
        model="sim/agent",
        status="ok",
        output="an answer of a few words",
        policy_failures=0,
        cost_usd=rng.random(n) / 1000,
        prompt_tokens=100,
        completion_tokens=20,
        tries=1,
        latency_s=0.1,
        turns=1,
        replay_misses=0,
    )
    runs["attempt_id"] = [f"{build}:{i}" for i in range(n)]
    verdicts = {c: None for c, _ in DATASETS["judge_verdicts"].columns if c not in ("build", "judge_version")}
    verdicts.update(
        scenario_id=ids,
        repeat=rep,
        rubric="helpfulness",
        status="scored",
        score=rng.random(n),
        criteria='{"accuracy": 3}',
        source="judge",
        policy_failures=0,
        cost_usd=0.0001,
        tries=1,
        author="bench",
    )
    verdicts["attempt_id"] = runs["attempt_id"]
    return pd.DataFrame(runs), pd.DataFrame(verdicts)


def measure(wh: Warehouse, builds: int, scenarios: int, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    wh.initialise()
    publish: list[float] = []
    for b in range(1, builds + 1):
        runs, verdicts = frames(f"b{b}", scenarios, repeats)
        start = time.perf_counter()
        wh.write_partition("scenario_runs", {"build": f"b{b}"}, runs, f"bench-runs-{b}")  # type: ignore[arg-type]
        wh.write_partition(
            "judge_verdicts",
            {"build": f"b{b}", "judge_version": "helpfulness-v1"},
            verdicts,
            f"bench-v-{b}",  # type: ignore[arg-type]
        )
        publish.append((time.perf_counter() - start) / 2)
    out["publish one partition (median)"] = statistics.median(publish)
    start = time.perf_counter()
    n = wh.rows("SELECT count(*) AS n FROM scenario_runs")[0]["n"]
    out["first read after the writes"] = time.perf_counter() - start
    assert n == builds * scenarios * repeats, n
    for name, sql in QUERIES.items():
        times = []
        for _ in range(5):
            start = time.perf_counter()
            wh.rows(sql)
            times.append(time.perf_counter() - start)
        out[name + " (median of 5)"] = statistics.median(times)
    remote = getattr(wh, "remote_connection", None)
    if remote is not None:  # an analyst's read straight from the bucket (fsspec), no local copies
        import duckdb

        times, failures = [], []
        for _ in range(5):
            start = time.perf_counter()
            con = remote()
            try:
                con.execute(QUERIES["runs x verdicts join, per build"]).fetchall()
                times.append(time.perf_counter() - start)
            except (
                duckdb.Error
            ) as exc:  # printed, never hidden: the fsspec bridge's reads are not reliable yet
                failures.append(str(exc).splitlines()[0][:160])
            finally:
                con.close()
        if times:
            out[f"the join, --remote ({len(times)} of 5 answered)"] = statistics.median(times)
        for failure in failures:
            print(f"--remote read FAILED: {failure}")
    start = time.perf_counter()
    wh.verify(full=True)
    out["verify --full (every file re-hashed)"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/warehouse_object_store.json")
    args = parser.parse_args()
    recording = Recording("warehouse_object_store")
    lines = [
        f"command: {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"commit: {sh('git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD')}"
        f"{' (with uncommitted changes)' if sh('git', '-C', str(ROOT), 'status', '--porcelain', '--untracked-files=no') else ''}",
        f"machine: {platform.platform()}, {os.cpu_count()} cores, python {platform.python_version()}",
        f"load before: {sh('uptime')}",
        f"size: {args.scenarios} scenarios x {args.repeats} repeats x {args.builds} builds "
        f"({args.scenarios * args.repeats} rows per partition)",
    ]
    for line in lines:
        print(line)
    s3, pg = S3Server().start(), PostgresCluster(fsync=True)
    pg.start()
    try:
        os.environ.update(s3.environment())
        url, catalog = s3.create_bucket("evaltrack-bench") + "/bench", pg.create_database()
        from eval_assets.warehouse import ObjectWarehouse

        with tempfile.TemporaryDirectory(prefix="evaltrack-wh-bench-") as tmp:
            figures = {
                "local": measure(Warehouse(Path(tmp) / "local"), args.builds, args.scenarios, args.repeats),
                "object": measure(
                    ObjectWarehouse(Path(tmp) / "stage", url, catalog),
                    args.builds,
                    args.scenarios,
                    args.repeats,
                ),
            }
    finally:
        pg.stop()
        s3.stop()
    table = [f"{'seconds':44} {'local':>9} {'object':>9} {'ratio':>7}"]
    for name in figures["object"]:
        b = figures["object"][name]
        a = figures["local"].get(name)
        if a is None:
            table.append(f"{name:44} {'-':>9} {b:9.3f} {'-':>7}")
        else:
            table.append(f"{name:44} {a:9.3f} {b:9.3f} {b / a:7.1f}")
    table.append(f"load after: {sh('uptime')}")
    for line in table:
        print(line)
    recording.figure("size", {"scenarios": args.scenarios, "repeats": args.repeats, "builds": args.builds})
    recording.table(
        "seconds",
        [
            {"step": name, "local_s": figures["local"].get(name), "object_s": b,
             "ratio": round(b / figures["local"][name], 1) if figures["local"].get(name) else None}
            for name, b in figures["object"].items()
        ],
    )
    recording.write(args.out)


if __name__ == "__main__":
    main()
