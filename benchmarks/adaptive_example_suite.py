"""Adaptive repeats on the example suite: paid attempts and the report's verdicts, against fixed 5.

    .venv/bin/python benchmarks/adaptive_example_suite.py [--rebuilds 10] [--home DIR] [--plan F/S/T]
        [--repeats adaptive|fixed]

The shipped project with `repeats: adaptive`, on the sim provider, through the track's own
materializations (`materialize_scenario_runs`, `materialize_judge_verdicts`, `build_report`): the
example baseline (no baseline of its own: fixed count), then `--rebuilds` unchanged rebuilds of it (the
example rebuild's manifest with subject seeds 100, 101, ...: an A/A comparison each) and the example
candidate (three scenarios broken). Prints per build the attempts paid (fixed count: every scenario's
`repeats`), the scenarios topped up, and each judge version's report verdict with the looks combined,
then the mean saving over the rebuilds. A fresh EVAL_HOME under a temporary directory unless `--home`.
`--repeats fixed` runs the same rebuilds at the fixed count instead (the same draws: a rebuild's first
repeats, and the top-ups it would pay, are the fixed run's repeats of the same numbers), so a home kept
from it holds both arms of every comparison. Rebuild ids are zero-padded to sort in registration order
(`rebuild-00` .. `rebuild-99`; three digits from 101 rebuilds, which draws other repeats: the id is
part of the sim's seed). `--plan` sets the adaptive design's bounds (futility / suite / tail, as in decision_calibration.py's
`--plans`) for this process in place of the shipped ones, so a plan's cost on this suite can be seen.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from _results import Recording

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import load_project
from eval_assets.home import EvalHome
from eval_assets.release import build_report
from eval_assets.stats import AdaptiveDesign

ROOT = Path(__file__).resolve().parents[1]
BASE = "agent-2026-11-28-base"
BOUNDS = ("futility", "suite_futility", "tail_futility")  # what --plan sets, in its order


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run(track: Track, build: str) -> tuple[dict[str, object], list[str]]:
    values = dict(materialize_scenario_runs(track, build, f"bench-{build}").values)
    manifest = track.build(build)
    verdicts = []
    for judge in track.judges_for(manifest):
        materialize_judge_verdicts(track, build, judge.version_id, f"bench-{build}-{judge.version_id}")
        if manifest.baseline:
            report = build_report(track, manifest, judge.version_id, manifest.baseline).report
            verdicts.append(f"{judge.version_id} {report.verdict}")
    return values, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuilds", type=int, default=10, help="unchanged rebuilds (A/A comparisons)")
    parser.add_argument("--home", type=Path, default=None, help="EVAL_HOME to use (default: a temporary one)")
    parser.add_argument("--plan", default=None, help="futility/suite/tail bounds, e.g. 0.05/0.4/0.15")
    parser.add_argument(
        "--repeats",
        choices=("adaptive", "fixed"),
        default="adaptive",
        help="the project's repeats setting (fixed: the same draws at the fixed count, the paired arm)",
    )
    args = parser.parse_args()
    if args.plan:  # every AdaptiveDesign made in this process (the run's, the report's) takes these bounds
        # by name: every field has a default, in field order (a field added later must not shift them)
        bounds = dict(zip(BOUNDS, (float(x) for x in args.plan.split("/")), strict=True))
        names = [field.name for field in dataclasses.fields(AdaptiveDesign)]
        defaults = list(AdaptiveDesign.__init__.__defaults__ or ())
        assert len(defaults) == len(names)
        for name, value in bounds.items():
            defaults[names.index(name)] = value
        AdaptiveDesign.__init__.__defaults__ = tuple(defaults)
    recording = Recording(f"adaptive_example_suite_{args.repeats}")
    plan = "/".join(str(getattr(AdaptiveDesign(), f)) for f in BOUNDS)
    plan += f" (collapse_futility {AdaptiveDesign().collapse_futility})"
    print(f"load before: {uptime()}; plan {plan}")
    started = time.perf_counter()
    loaded = load_project(ROOT)
    settings = loaded.settings.model_copy(update={"repeats": args.repeats})
    project = dataclasses.replace(loaded, settings=settings)
    with tempfile.TemporaryDirectory(prefix="adaptive-example-") as tmp:
        home = args.home or Path(tmp) / "home"
        track = Track(project, EvalHome(home))
        builds = Path(tmp) / "builds"
        builds.mkdir()
        for name in ("baseline", "candidate"):
            track.register_build(ROOT / "examples" / "builds" / f"{name}.yaml")
        rebuild = yaml.safe_load((ROOT / "examples" / "builds" / "rebuild.yaml").read_text())
        ids = []
        width = max(2, len(str(args.rebuilds - 1)))  # ids sort in registration order
        for i in range(args.rebuilds):
            manifest = {**rebuild, "id": f"rebuild-{i:0{width}d}"}
            manifest["subject"] = {
                **rebuild["subject"],
                "params": {**rebuild["subject"]["params"], "seed": 100 + i},
            }
            path = builds / f"{manifest['id']}.yaml"
            path.write_text(yaml.safe_dump(manifest))
            track.register_build(path)
            ids.append(manifest["id"])
        print(
            f"project {ROOT.name}: {len(track.scenarios_for(track.build(BASE)))} scenarios, repeats: adaptive "
            f"(start {project.settings.adaptive.start}); baseline {BASE} at the fixed count"
        )
        print(f"{'build':<24} {'attempts':>8} {'fixed':>6} {'saved':>6} {'topped up':>9}  reports")
        saved = []
        rows = []
        for build in [BASE, *ids, "agent-2026-11-30-cand"]:
            values, verdicts = run(track, build)
            attempts = int(values["attempts"])  # type: ignore[call-overload]
            fixed = int(values.get("attempts_fixed_count", attempts))  # type: ignore[call-overload]
            share = 1.0 - attempts / fixed
            if build.startswith("rebuild-"):
                saved.append(share)
            topped = values.get("topped_up_scenarios", [])
            print(
                f"{build:<24} {attempts:>8} {fixed:>6} {100 * share:>5.1f}% {len(topped):>9}  "  # type: ignore[arg-type]
                + (", ".join(verdicts) or "no baseline")
            )
            rows.append(
                {"build": build, "attempts": attempts, "fixed": fixed, "saved": round(share, 4),
                 "topped_up": len(topped), "reports": ", ".join(verdicts) or "no baseline"}  # type: ignore[arg-type]
            )
        mean = sum(saved) / len(saved) if saved else float("nan")
        print(
            f"unchanged rebuilds: {100 * mean:.1f}% fewer paid attempts than fixed 5 on average "
            f"({100 * min(saved):.1f}% to {100 * max(saved):.1f}%, {len(saved)} rebuilds)"
        )
    print(f"wall {time.perf_counter() - started:.0f} s; load after: {uptime()}")
    recording.figure("plan", plan)
    recording.figure("mean_saved", mean)
    recording.figure("wall_s", round(time.perf_counter() - started, 1))
    recording.table("builds", rows)
    recording.write()


if __name__ == "__main__":
    main()
