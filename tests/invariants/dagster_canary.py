"""The Dagster canary's hook: the canary's builds run again through Dagster and every event and run
record of the instance is dumped for the canary's scan (tests/invariants/security.py).

The hook (`canary.dagster_run`) runs the canary's builds through Dagster — a fresh generation, so
every call is made again inside Dagster runs while the canary key is set — on a small copy of the
project (one scenario per active judge, two repeats, an empty gate registry), then writes every event
of every run in the instance's event log and every run record (tags, run config) as serialized by
Dagster to `dagster-events.jsonl` in the canary's home, which the canary's scan then searches.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import yaml

from eval_assets.capability.track import Track
from eval_assets.cli.orchestrate import instance_for, launch_build
from eval_assets.config import load_project, read_yaml_file
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
        scenario = project.scenarios_judged_by(judge)[0]
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
                steps = launch_build(home, build_id, versions[build_id], tags=tags)
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
