"""`evaltrack gates no-network`: the recorded no-network run, and the canary gate's Dagster hook.

The command is meant to run inside a network namespace with only loopback and a clean environment
(`scripts/suite_no_network` starts it so); it records what it saw and what ran
(eval_assets/gates/dogfood/network.py) and exits 0 only if the record is a proof.

The Dagster hook (`canary.dagster_run` of eval_assets/gates/dogfood/security.py) runs the canary's
builds through Dagster — a fresh generation, so every call is made again inside Dagster runs while
the canary key is set — on a small copy of the project (one scenario per active judge, two
repeats, an empty gate registry so the canary does not run itself), then writes every event of
every run in the instance's event log and every run record (tags, run config) as serialized by
Dagster to `dagster-events.jsonl` in the canary's home, which the canary's scan then searches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import yaml

from eval_assets.capability.track import Track
from eval_assets.cli.common import home_of, root_of
from eval_assets.cli.orchestrate import instance_for, materialize_build
from eval_assets.config import load_project, read_yaml_file
from eval_assets.gates.dogfood.network import record_no_network, record_problems
from eval_assets.home import EvalHome, environment

EVENTS_DUMP = "dagster-events.jsonl"
GENERATION_TAG = "evaltrack/generation"


def small_project(source: Path, dest: Path) -> Path:
    """Rubrics, judges and settings of `source`, one scenario per active judge (two repeats), and an
    empty gate registry."""
    project = load_project(source)
    for sub in ("rubrics", "judges"):
        shutil.copytree(source / sub, dest / sub)
    shutil.copyfile(source / "evaltrack.yaml", dest / "evaltrack.yaml")
    (dest / "gates").mkdir()
    (dest / "gates" / "none.yaml").write_text("gates: []\n", encoding="utf-8")
    for judge in project.active_judges:
        scenario = project.scenarios_for(judge)[0]
        [path] = [p for p in (source / "scenarios").rglob(f"{scenario.id}.yaml")]
        data = read_yaml_file(path)
        data["repeats"] = 2
        out = dest / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return dest


def dump_event_log(home: EvalHome, out: Path) -> tuple[int, int]:
    """Every run record and every event of every run of the instance in `home`, one serialized value
    a line. Returns (runs, events)."""
    instance = instance_for(home)
    runs = events = 0
    with out.open("w", encoding="utf-8") as sink:
        for run in instance.get_runs():
            runs += 1
            sink.write(dg.serialize_value(run) + "\n")
            for event in instance.all_logs(run.run_id):
                events += 1
                sink.write(dg.serialize_value(event) + "\n")
    return runs, events


def dagster_canary_hook(source: Path) -> Callable[[Path, list[str]], list[Path]]:
    """The `canary.dagster_run` hook over the project at `source`."""

    def hook(home_root: Path, build_ids: list[str]) -> list[Path]:
        root = small_project(source, home_root.parent / "dagster-project")
        home = EvalHome(home_root)
        # instance_for sets DAGSTER_HOME
        with environment(
            {"EVAL_HOME": str(home_root), "EVAL_PROJECT_ROOT": str(root)}, restore=["DAGSTER_HOME"]
        ):
            track = Track(load_project(root), home)
            try:
                versions = {b: [j.version_id for j in track.judges_for(track.build(b))] for b in build_ids}
                generations = {b: track.next_generation(b) for b in build_ids}
            finally:
                track.journal.close()
            for build_id in build_ids:
                tags = {GENERATION_TAG: str(generations[build_id])}
                steps = materialize_build(home, build_id, versions[build_id], tags=tags)
                if not steps:
                    raise RuntimeError(f"no Dagster step ran for {build_id}")
            dump = home_root / EVENTS_DUMP
            runs, events = dump_event_log(home, dump)
        if runs == 0 or events == 0:
            raise RuntimeError(
                f"the Dagster event log is empty ({runs} runs, {events} events): nothing to scan"
            )
        return [dump]

    return hook


def cmd_gates_no_network(args: argparse.Namespace) -> int:
    root = root_of(args)
    home = home_of(args)
    record, path = record_no_network(root, home.root, dagster_canary_hook(root))
    problems = record_problems(root, record)
    problems += [
        f"{b.get('build') or b['manifest']}: exit {b['exit_code']}"
        for b in record["builds"]
        if b["exit_code"] != 0
    ]
    if record["dagster_canary"]["status"] != "pass":
        problems.append(f"Dagster canary: {record['dagster_canary']['message']}")
    for b in record["builds"]:
        print(
            f"{b.get('build') or b['manifest']}: exit {b['exit_code']} {b.get('counts')} ({b['seconds']} s)"
        )
    canary = record["dagster_canary"]
    print(f"Dagster canary: {canary['status']} {canary['message']} ({canary['seconds']} s)")
    print(f"network: {json.dumps(record['network'], sort_keys=True)}")
    print(f"record: {path} ({record['seconds']} s)")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0
