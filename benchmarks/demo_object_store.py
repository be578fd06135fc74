"""`evaltrack demo` on the local warehouse and on object storage, side by side in one run: the same
decisions and the same rows?

    .venv/bin/python benchmarks/demo_object_store.py

Starts an S3-compatible server (moto's server mode) and a throwaway PostgreSQL cluster on 127.0.0.1
(tests/object_store.py, tests/pg.py), copies the project (every tracked file: the demo's
deterministic suite checks the project's code and docs) to a temporary directory with
`warehouse: {url: s3://evaltrack-demo/team, catalog: postgresql+psycopg://...}` added to its
evaltrack.yaml, and runs `evaltrack demo` twice, each in a fresh EVAL_HOME: on the shipped project
(the local directory) and on the copy (the bucket; AWS_* variables point at the local server, test
credentials only). Then compares the demo's printed lines (timings, the home's path and the
warehouse's location blanked), the current rows of every table (`DATASETS`) without run ids,
timestamps, timings and evidence (which names files: tests/object_store.py `comparable_rows`) and the
decisions. Wall seconds of each side are printed, with the machine's load. Exits 1 when anything
differs (tests/test_e2e_demo_object_store.py runs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

from demo import TIMINGS, uptime  # noqa: E402
from object_store import S3Server, comparable_rows  # noqa: E402
from pg import PostgresCluster  # noqa: E402

from eval_assets.warehouse import DATASETS, Warehouse  # noqa: E402

WAREHOUSE_LINE = re.compile(r"^warehouse: .*$", re.M)


def run_demo(project: Path, home: Path, env: dict[str, str]) -> tuple[float, str]:

    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "eval_assets.cli", "--project", str(project), "--home", str(home), "demo"],
        cwd=project,
        env={**os.environ, **env, "EVAL_HOME": str(home), "EVAL_PROJECT_ROOT": str(project)},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"the demo on {project} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return wall, proc.stdout


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only-object", action="store_true", help="run the object-store side alone")
    parser.add_argument(
        "--out", type=Path, help="where the results go (default benchmarks/results/demo_object_store.json)"
    )
    args = parser.parse_args()
    recording = Recording("demo_object_store")
    print(f"load before: {uptime()}")
    s3, pg = S3Server().start(), PostgresCluster()
    pg.start()
    try:
        env = s3.environment()
        os.environ.update(env)
        url = s3.create_bucket("evaltrack-demo") + "/team"
        catalog = pg.create_database()
        with tempfile.TemporaryDirectory(prefix="evaltrack-demo-object-") as tmp:
            copy = Path(tmp) / "project"
            copy.mkdir()
            # every tracked file: the demo's deterministic suite checks the project's own code and docs
            listed = subprocess.run(
                ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
            ).stdout.decode()
            for rel in filter(None, listed.split("\0")):
                if (ROOT / rel).is_file():
                    (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / rel, copy / rel)
            with (copy / "evaltrack.yaml").open("a", encoding="utf-8") as f:
                f.write(f"\nwarehouse:\n  url: {url}\n  catalog: {catalog}\n")
            homes = {"local": Path(tmp) / "home-local", "object": Path(tmp) / "home-object"}
            outputs = {}
            for side, project in (("local", ROOT), ("object", copy)):
                if args.only_object and side == "local":
                    continue
                wall, out = run_demo(project, homes[side], env if side == "object" else {})
                outputs[side] = out
                print(f"{side:>6}: evaltrack demo wall {wall:6.1f} s   ({uptime()})")
                recording.figure(f"{side}_wall_s", round(wall, 1))
            if args.only_object:
                print(outputs["object"])
                recording.write(args.out)
                return
            shown = {
                side: WAREHOUSE_LINE.sub(
                    "warehouse: ·", TIMINGS.sub("·", out.replace(str(homes[side]), "$EVAL_HOME"))
                )
                .replace(str(copy), "$PROJECT")
                .replace(str(ROOT), "$PROJECT")
                .splitlines()
                for side, out in outputs.items()
            }
            same = shown["local"] == shown["object"]
            print(
                f"demo output (timings, paths blanked): {len(shown['object'])} lines, {'same' if same else 'DIFFERENT'}"
            )
            for a, b in zip(shown["local"], shown["object"], strict=False):
                if a != b:
                    print(f"  local:  {a}\n  object: {b}")
            from eval_assets.warehouse import ObjectWarehouse

            sides = {
                "local": Warehouse(homes["local"] / "warehouse"),
                "object": ObjectWarehouse(homes["object"] / "warehouse", url, catalog),
            }
            recording.figure("output_same", same)
            rows = {side: comparable_rows(wh) for side, wh in sides.items()}
            compared = []
            for table in DATASETS:
                a, b = rows["local"][table], rows["object"][table]
                verdict = "identical" if a == b else "DIFFERENT"
                same = same and a == b
                print(f"{table:26} local {len(a):5}  object {len(b):5}  {verdict}")
                compared.append({"table": table, "local": len(a), "object": len(b), "rows": verdict})
            recording.table("stored_rows", compared)
            decisions = {
                side: wh.rows("SELECT build, decision FROM release_decisions ORDER BY build")
                for side, wh in sides.items()
            }
            same = same and decisions["local"] == decisions["object"]
            print(f"decisions: local {decisions['local']}  object {decisions['object']}")
            print(f"decisions {'same' if decisions['local'] == decisions['object'] else 'DIFFERENT'}")
            recording.figure("decisions_same", decisions["local"] == decisions["object"])
            recording.write(args.out)
    finally:
        pg.stop()
        s3.stop()
    print(f"load after: {uptime()}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
