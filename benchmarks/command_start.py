"""What a command's start costs and what it imports: each command in a fresh interpreter beside
`import dagster` alone, side by side in one run.

    .venv/bin/python benchmarks/command_start.py [--rounds 3]

The commands that only read or write the configuration (`build add`) and the instance open that
`ui` and every materializing command do first (`add_registered_build_partitions`) are meant to import
no more than they use: the table names which of Dagster, pandas, DuckDB, litellm and the code location
each one imported, and its wall time over `import dagster`'s. `evaltrack run` of a build on two worker
processes records what it had imported, and whether the cyclic collector was on, when it first
started the fork server: the fork server's imports (the engine, litellm) overlap the command's own
(Dagster, the statistics) only when it starts before them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the two-worker project the worker tests run on

from worker_project import two_worker_project  # noqa: E402

HEAVY = ("dagster", "pandas", "duckdb", "litellm", "scipy", "eval_assets.definitions")
_IMPORTED = f"sorted(m for m in {HEAVY!r} if m in sys.modules)"

_IMPORT_DAGSTER = f"import json, sys\nimport dagster\nprint(json.dumps({{'exit': 0, 'imported': {_IMPORTED}}}))"

_BUILD_ADD = f"""
import json, sys
from eval_assets.cli import main
code = main(["--project", sys.argv[1], "--home", sys.argv[2], "build", "add", sys.argv[3]])
print(json.dumps({{"exit": code, "imported": {_IMPORTED}}}))
"""

_OPEN_INSTANCE = f"""
import json, sys
from eval_assets.cli.orchestrate import add_registered_build_partitions
from eval_assets.config import project_at
from eval_assets.home import EvalHome
from pathlib import Path
add_registered_build_partitions(EvalHome(Path(sys.argv[2])), project_at(Path(sys.argv[1])), print)
print(json.dumps({{"exit": 0, "imported": {_IMPORTED}}}))
"""

_RUN = f"""
import gc, json, sys
import eval_assets.capability.track as track
started_with = []
real_start = track.start_fork_server
def recording_start(imports):
    started_with.append({{"imported": {_IMPORTED}, "collector": gc.isenabled()}})
    real_start(imports)
track.start_fork_server = recording_start
from eval_assets.cli import main
code = main(["--project", sys.argv[1], "--home", sys.argv[2], "run", "--build", "bench", "--format", "json"])
print(json.dumps({{"exit": code, "imported": {_IMPORTED}, "fork_server_started_with": started_with}}))
"""


def timed(script: str, *args: str, cwd: Path) -> dict[str, Any]:
    """`python -c script ARGS` in a fresh interpreter (this checkout first, no EVAL_/DAGSTER_ variable):
    the JSON its last line prints, with the wall time from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "DAGSTER_"))}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"command_start: a probe failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["exit"] != 0:
        raise SystemExit(f"command_start: a command exited {result['exit']}:\n{done.stderr[-2000:]}")
    return {**result, "wall_s": wall}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    recording = Recording("command_start")
    walls: dict[str, list[float]] = {}
    imported: dict[str, list[str]] = {}
    first_start: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="command-start-") as tmp:
        for n in range(args.rounds):
            where = Path(tmp) / f"round{n}"
            project = where / "project"
            manifest = two_worker_project(project)
            home = str(where / "home")
            # one of each per round, in turn, so a change of load falls on all of them alike
            for name, script, extra in (
                ("import dagster", _IMPORT_DAGSTER, ()),
                ("evaltrack build add", _BUILD_ADD, (str(manifest),)),
                ("open the instance (ui, run)", _OPEN_INSTANCE, ()),
                ("evaltrack run (2 workers)", _RUN, ()),
            ):
                result = timed(script, str(project), home, *extra, cwd=where)
                walls.setdefault(name, []).append(result["wall_s"])
                imported[name] = result["imported"]
                if "fork_server_started_with" in result:
                    first_start.append(result["fork_server_started_with"][0])
    yardstick = statistics.median(walls["import dagster"])
    rows = [
        {
            "what": name,
            "wall_s": round(statistics.median(values), 2),
            "over_import_dagster": round(statistics.median(values) / yardstick, 2),
            "imported": ", ".join(imported[name]) or "none of them",
            "rounds": len(values),
        }
        for name, values in walls.items()
    ]
    starts = [
        {
            "round": n,
            "imported_when_the_fork_server_started": ", ".join(s["imported"]) or "none of them",
            "collector_on": s["collector"],
        }
        for n, s in enumerate(first_start)
    ]
    recording.table("commands", rows)
    recording.table("fork_server_start", starts)
    recording.write(args.out)
    for row in rows:
        print(
            f"{row['what']:<30} {row['wall_s']:6.2f} s  x{row['over_import_dagster']:<5} "
            f"imported: {row['imported']}"
        )
    for row in starts:
        print(
            f"run round {row['round']}: the fork server started with {row['imported_when_the_fork_server_started']} "
            f"imported, collector {'on' if row['collector_on'] else 'off'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
