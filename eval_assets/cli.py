"""`evaltrack`: validate, demo, build add, run, ui (and, as they land, release-status and compare)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from eval_assets.config import ConfigError, Project, load_build, load_project, misnamed_yaml
from eval_assets.home import EvalHome, default_home, project_root
from eval_assets.present import shorten
from eval_assets.spend import JournalError

EXAMPLE_BUILDS = ("baseline.yaml", "rebuild.yaml", "candidate.yaml")


def _home(args: argparse.Namespace) -> EvalHome:
    home = EvalHome(Path(args.home).resolve() if args.home else default_home())
    os.environ["EVAL_HOME"] = str(home.root)  # the code location's resources read it
    return home.ensure()


def _project(args: argparse.Namespace) -> Project:
    root = Path(args.project).resolve() if args.project else project_root()
    os.environ["EVAL_PROJECT_ROOT"] = str(root)
    return load_project(root)


def _print_problems(exc: ConfigError) -> int:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
    return 1


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        project = _project(args)
        problems: list = []
        from eval_assets.gates import validate_gates

        problems += validate_gates(project.root)
        examples = project.root / "examples" / "builds"
        problems += misnamed_yaml(examples, project.root)
        for path in sorted(examples.glob("*.yaml")):
            try:
                load_build(path, project)  # a baseline must be one of the examples
            except ConfigError as exc:
                problems += exc.problems
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        return _print_problems(exc)
    print(
        f"ok: {len(project.scenarios)} scenarios, {len(project.rubrics)} rubrics, "
        f"{len(project.judges)} judge versions ({len(project.active_judges)} active)"
    )
    return 0


def cmd_build_add(args: argparse.Namespace) -> int:
    from eval_assets.track import Track

    try:
        project = _project(args)
        track = Track(project, _home(args))
        manifest = track.register_build(Path(args.file))
    except ConfigError as exc:
        return _print_problems(exc)
    from eval_assets.orchestrate import instance_for, register_partition

    register_partition(instance_for(track.home), manifest.id)
    print(f"registered build {manifest.id} -> {track.build_path(manifest.id)}")
    return 0


def _money(value: object) -> str:
    return f"${float(value or 0.0):.3f}"  # type: ignore[arg-type]


def step_line(step: object, expected_attempts: int | None = None) -> str:
    """One progress line for a finished step: what it materialized, its counts, spend and time."""
    from eval_assets.orchestrate import StepResult

    assert isinstance(step, StepResult)
    meta = step.metadata
    took = f"{step.seconds:.0f} s"
    if not step.success and not set(step.assets) <= set(meta):
        return f"{'+'.join(step.assets):<20} FAILED · {shorten(step.error or 'run failed', 140)} · {took}"
    if "scenario_runs" in meta:
        m = meta["scenario_runs"]
        total = expected_attempts if expected_attempts is not None else m.get("attempts")
        return (
            f"{'scenario_runs':<20} {m.get('attempts')}/{total} attempts · {m.get('errors', 0)} errors · "
            f"{m.get('excluded', 0)} excluded · {m.get('reused_from_journal', 0)} reused · "
            f"{_money(m.get('spend_usd'))} · {took}"
        )
    if "judge_verdicts" in meta:
        v, r = meta["judge_verdicts"], meta.get("capability_report", {})
        judge = step.partition.split("|")[-1]
        spend = float(v.get("spend_usd") or 0.0)
        return (
            f"{judge:<20} {v.get('verdicts')} verdicts · {v.get('scored')} scored · {v.get('failed')} failed · "
            f"{v.get('excluded')} excluded · report: {r.get('verdict', 'not made')} · {_money(spend)} · {took}"
        )
    if "deterministic_suite" in meta:
        m = meta["deterministic_suite"]
        counts = m.get("counts") or {}
        blocking = m.get("blocking") or []
        return (
            f"{'deterministic_suite':<20} {sum(counts.values())} results · {counts.get('pass', 0)} pass · "
            f"{len(blocking)} blocking{(' (' + ', '.join(blocking) + ')') if blocking else ''} · {took}"
        )
    if "release_decision" in meta:
        m = meta["release_decision"]
        return f"{'release_decision':<20} {m.get('decision')} · baseline {m.get('baseline')} · {took}"
    return f"{'+'.join(step.assets):<20} {'ok' if step.success else 'FAILED'} · {took}"


def _run_builds(
    args: argparse.Namespace,
    track: object,
    build_ids: Sequence[str],
    judge: str | None,
    fresh: bool = False,
    quiet: bool = False,
) -> tuple[bool, list[dict[str, object]]]:
    """Materialize each build; prints one progress line per step (unless `quiet`). Returns success
    and, per build, its steps as plain data (for `--json`)."""
    from eval_assets.orchestrate import StepResult, materialize_build
    from eval_assets.track import Track

    assert isinstance(track, Track)
    ok = True
    out: list[dict[str, object]] = []
    for build_id in build_ids:
        manifest = track.build(build_id)
        versions = [judge] if judge else [j.version_id for j in track.judges_for(manifest)]
        expected = sum(s.repeats for s in track.scenarios_for(manifest))
        say: Callable[[str], None] = (lambda _line: None) if quiet else (lambda line: print(line, flush=True))
        say(f"build {build_id}: scenario_runs, then {', '.join(versions)}, the suite and the decision")

        def show(step: StepResult, expected: int = expected, say: Callable[[str], None] = say) -> None:
            say(f"  {step_line(step, expected)}")

        tags = {}
        if fresh:
            generation = track.next_generation(build_id)
            tags["evaltrack/generation"] = str(generation)
            say(f"  fresh run: generation {generation} (new attempt keys; earlier spend stays on the ledger)")
        results = materialize_build(track.home, build_id, versions, on_step=show, tags=tags)
        ok = ok and all(r.success for r in results)
        out.append(
            {
                "build": build_id,
                "steps": [
                    {
                        "assets": list(r.assets),
                        "partition": r.partition,
                        "job": r.job,
                        "run_id": r.run_id,
                        "success": r.success,
                        "error": r.error,
                        "seconds": r.seconds,
                    }
                    for r in results
                ],
            }
        )
    return ok, out


def _decision_record(track: object, build_id: str) -> dict[str, object]:
    """A build's recorded decision, its reasons and where its plots are, as plain data."""
    from eval_assets.present import recorded_reasons
    from eval_assets.release import recorded_decision
    from eval_assets.track import Track

    assert isinstance(track, Track)
    row = recorded_decision(track, build_id)
    plots = sorted((track.home.root / "reports" / build_id).glob("*.png"))
    return {
        "build": build_id,
        "decision": str(row["decision"]) if row else "none",
        "recorded": row is not None,
        "baseline": (row or {}).get("baseline") or None,
        "reasons": (
            [{"severity": "none", "source": "release", "message": str(row["reasons"])}]
            if row and row.get("stale")
            else recorded_reasons(track.warehouse, build_id) if row else []
        ),
        "plots": [str(p) for p in plots],
    }


def _print_decisions(records: Sequence[dict[str, object]], home: Path) -> None:
    """One reasons table per build, then the decisions in one table, last (no line over 200 characters)."""
    from eval_assets.present import reasons_text_rows, text_table

    def rel(path: str) -> str:
        try:
            return str(Path(path).relative_to(home))
        except ValueError:
            return path

    for r in records:
        print()
        print(f"{r['build']}: {r['decision']} (baseline {r['baseline'] or 'none'})")
        rows = reasons_text_rows(r["reasons"])  # type: ignore[arg-type]
        print(text_table(("severity", "source", "reason"), rows) if rows else "  no reasons recorded")
    print()
    print(
        text_table(
            ("build", "decision", "reasons", "plots (under EVAL_HOME)"),
            [
                (
                    r["build"],
                    r["decision"] if r["recorded"] else "no decision recorded",
                    len(r["reasons"]),  # type: ignore[arg-type]
                    ", ".join(rel(p) for p in r["plots"]) or "none",  # type: ignore[attr-defined]
                )
                for r in records
            ],
        )
    )


def cmd_run(args: argparse.Namespace) -> int:
    import json
    from contextlib import ExitStack

    from eval_assets.spend import LeaseRow
    from eval_assets.track import Track, TrackError

    try:
        track = Track(_project(args), _home(args))
        if args.judge:
            track.judge(args.judge)
        manifest = track.build(args.build)
        track.journal  # noqa: B018  (an unreachable or locked journal fails here, before any model call)
    except ConfigError as exc:
        return _print_problems(exc)
    except (TrackError, JournalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def waiting(row: LeaseRow) -> None:
        print(f"waiting: {row.target} is being run by {row.describe()}", flush=True)

    # One run per build, asset and partition (issue 11): the leases of every paying step are taken
    # here, in one global order, before any call; the steps (this process) hold them re-entrantly.
    versions = [args.judge] if args.judge else [j.version_id for j in track.judges_for(manifest)]
    targets = [("scenario_runs", args.build)] + [("judge_verdicts", f"{args.build}|{v}") for v in versions]
    try:
        with ExitStack() as leases:
            for asset, partition in targets:
                leases.enter_context(
                    track.lease(args.build, asset, partition, None, wait=args.wait, on_wait=waiting)
                )
            ok, steps = _run_builds(args, track, [args.build], args.judge, fresh=args.fresh, quiet=args.json)
    except (TrackError, JournalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    record = _decision_record(track, args.build)
    if args.json:
        print(json.dumps({"ok": ok, "builds": [{**steps[0], **record}]}, default=str, sort_keys=True))
    else:
        _print_decisions([record], track.home.root)
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    import json

    from eval_assets.track import Track

    try:
        project = _project(args)
        home = _home(args)
        track = Track(project, home)
        from eval_assets.orchestrate import instance_for, register_partition

        instance = instance_for(home)
        build_ids = []
        for name in EXAMPLE_BUILDS:
            manifest = track.register_build(project.root / "examples" / "builds" / name)
            register_partition(instance, manifest.id)
            build_ids.append(manifest.id)
    except ConfigError as exc:
        return _print_problems(exc)
    ok, steps = _run_builds(args, track, build_ids, None, quiet=args.json)
    records = [_decision_record(track, b) for b in build_ids]
    if args.json:
        builds = [{**s, **r} for s, r in zip(steps, records, strict=True)]
        print(
            json.dumps(
                {"ok": ok, "builds": builds, "warehouse": str(track.warehouse.catalog_path)},
                default=str,
                sort_keys=True,
            )
        )
        return 0 if ok else 1
    print()
    print(f"warehouse: {track.warehouse.catalog_path}  (open read-only; views in docs/warehouse.md)")
    print(f"UI: EVAL_HOME={home.root} evaltrack ui   (then http://127.0.0.1:3000)")
    _print_decisions(records, home.root)
    return 0 if ok else 1


def cmd_release_status(args: argparse.Namespace) -> int:
    import json

    from eval_assets.present import reasons_markdown, reasons_text_rows, text_table
    from eval_assets.stats import exit_code
    from eval_assets.track import Track, TrackError

    try:
        track = Track(_project(args), _home(args))
        track.build(args.build)
    except ConfigError as exc:
        return _print_problems(exc)
    except TrackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if _report_damage(track, [args.build]):
        return EXIT_INTERNAL_ERROR
    record = _decision_record(track, args.build)
    if not record["recorded"]:
        print(
            f"build {args.build}: no decision yet (materialize release_decision, e.g. `evaltrack run --build {args.build}`)"
        )
        return 2
    decision = str(record["decision"])
    rows = record["reasons"]
    assert isinstance(rows, list)
    if args.format == "json":
        print(json.dumps(record, default=str, sort_keys=True))
    elif args.format == "markdown":
        print(reasons_markdown(args.build, decision, rows), end="")
    else:
        print(f"build {args.build}: {decision} (baseline: {record['baseline'] or 'none'})")
        print(text_table(("severity", "source", "reason"), reasons_text_rows(rows)))
    return exit_code(decision)  # type: ignore[arg-type]


def _report_damage(track: object, builds: Sequence[str]) -> bool:
    """Print the warehouse damage of `builds` (after checking every file); True if there is any."""
    from eval_assets.track import Track

    assert isinstance(track, Track)
    track.warehouse.verify()
    damage = [d for build in builds for d in track.warehouse.damage(build)]
    for d in damage:
        print(f"internal error: {d.text()}", file=sys.stderr)
    if damage:
        print(
            f"internal error: {len(damage)} damaged warehouse file(s) of {', '.join(builds)}; the files were "
            "moved aside (never deleted); re-materialize the partition(s) named above "
            "(e.g. `evaltrack run --build BUILD`) to replace them",
            file=sys.stderr,
        )
    return bool(damage)


def cmd_compare(args: argparse.Namespace) -> int:
    from eval_assets.release import build_report
    from eval_assets.stats import CrossJudgeVersionError, summary_markdown
    from eval_assets.track import Track, TrackError

    try:
        track = Track(_project(args), _home(args))
        for build in (args.baseline, args.candidate):
            track.build(build)
        if _report_damage(track, [args.baseline, args.candidate]):
            return EXIT_INTERNAL_ERROR
        run = build_report(track, args.candidate, args.judge, args.baseline)
    except ConfigError as exc:
        return _print_problems(exc)
    except (CrossJudgeVersionError, TrackError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print(summary_markdown(run.report))
    return 0


def cmd_trajectory_convert(args: argparse.Namespace) -> int:
    """Convert a redacted trajectory export into scenario files (issue 7); all or nothing."""
    from eval_assets.trajectory import ExportRefused, convert_export

    try:
        project = _project(args)
        report = convert_export(
            Path(args.export),
            Path(args.out),
            judge=args.judge,
            suite=args.suite,
            known_judges=sorted({j.name for j in project.active_judges}),
            max_bytes=project.settings.bounds.max_trajectory_bytes,
        )
    except ConfigError as exc:
        return _print_problems(exc)
    except ExportRefused as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"refused: {len(exc.problems)} problem(s); nothing was written", file=sys.stderr)
        return 1
    except OSError as exc:  # e.g. --out under a file or a read-only directory; staged files are removed
        print(f"{args.out}: cannot write: {exc.strerror or exc}; nothing was written", file=sys.stderr)
        return 1
    print(report.text())
    print(
        f"cases in {args.out}: source: trajectory, awaiting assertions (never blocking until a person adds them)"
    )
    return 0


def cmd_judges_record(args: argparse.Namespace) -> int:
    from eval_assets.config import record_new_versions

    root = Path(args.project).resolve() if args.project else project_root()
    try:
        lines = record_new_versions(load_project(root, check_registry=False))
    except ConfigError as exc:
        return _print_problems(exc)
    print("\n".join(lines) if lines else "judges/registry.yaml is up to date")
    return 0


def cmd_scores_import(args: argparse.Namespace) -> int:
    import uuid

    from eval_assets.human_scores import HumanScoreError, import_scores
    from eval_assets.track import Track

    try:
        track = Track(_project(args), _home(args))
        summary = import_scores(track, Path(args.file), f"import-{uuid.uuid4().hex[:12]}")
    except ConfigError as exc:
        return _print_problems(exc)
    except HumanScoreError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(summary)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """Run `dagster dev` on 127.0.0.1 in its own process group; SIGTERM/SIGINT stop it cleanly.

    The webserver, the daemon, the code servers and the run workers all live in that group; when
    `dagster dev` has exited, whatever of the group is still running gets UI_STOP_GRACE_S to finish
    and is then killed, so `evaltrack ui` never leaves an orphan holding a run or the port.
    """
    home = _home(args)
    _project(args)
    from eval_assets.orchestrate import instance_for

    instance_for(home)
    root = Path(os.environ["EVAL_PROJECT_ROOT"])
    dagster = Path(sys.executable).with_name("dagster")
    cmd = [str(dagster), "dev", "-w", str(root / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(args.port)]
    stop_signals = {signal.SIGINT, signal.SIGTERM}

    def reset_signals() -> None:  # a background parent may have left these ignored (or, here, blocked)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        os.setsid()

    # a stop signal arriving between the start of dagster dev and the handler below is held, not lost
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        child = subprocess.Popen(cmd, cwd=root, preexec_fn=reset_signals, env=dict(os.environ))

        def forward(signum: int, _frame: object) -> None:
            try:
                os.killpg(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    print(f"Dagster UI on http://127.0.0.1:{args.port} (EVAL_HOME={home.root}); stop with Ctrl-C or SIGTERM")
    try:
        code = child.wait(timeout=None)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        _reap_group(child.pid, UI_STOP_GRACE_S)
    return 0 if code in (0, -signal.SIGTERM, 128 + signal.SIGTERM) else code


UI_STOP_GRACE_S = 30.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_group(pgid: int, grace_s: float) -> None:
    """Wait up to `grace_s` for the rest of process group `pgid` to exit, then SIGKILL what is left.

    An empty group is never signalled: its id may already belong to someone else.
    """
    import time

    deadline = time.monotonic() + grace_s
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.2)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evaltrack", description=__doc__)
    p.add_argument("--project", help="project root (default: this checkout)")
    p.add_argument("--home", help="EVAL_HOME (default: $EVAL_HOME or .eval_home/)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", help="validate scenarios/, rubrics/, judges/ and example builds").set_defaults(
        func=cmd_validate
    )
    demo = sub.add_parser("demo", help="register the example builds and materialize the whole graph")
    demo.add_argument(
        "--json", action="store_true", help="print one JSON document (for CI) instead of tables"
    )
    demo.set_defaults(func=cmd_demo)
    build = sub.add_parser("build", help="build registry").add_subparsers(dest="build_command", required=True)
    add = build.add_parser("add", help="register a build manifest")
    add.add_argument("file")
    add.set_defaults(func=cmd_build_add)
    run = sub.add_parser("run", help="materialize everything for one build")
    run.add_argument("--build", required=True)
    run.add_argument("--judge", help="one judge version (default: every active version)")
    run.add_argument(
        "--fresh", action="store_true", help="pay again with new attempt keys instead of reusing settled ones"
    )
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another run of this build holds its lease, wait for it (default: refuse at once)",
    )
    run.add_argument("--json", action="store_true", help="print one JSON document (for CI) instead of tables")
    run.set_defaults(func=cmd_run)
    status = sub.add_parser(
        "release-status",
        help="print a build's decision; exit 0 allow, 1 block, 2 none, 3 investigate, 4 internal error",
    )
    status.add_argument("build")
    status.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="text (a table), markdown (ready to paste into a pull request) or json",
    )
    status.set_defaults(func=cmd_release_status)
    cmp = sub.add_parser("compare", help="capability report between two builds under one judge version")
    cmp.add_argument("--baseline", required=True)
    cmp.add_argument("--candidate", required=True)
    cmp.add_argument("--judge", required=True, help="judge version, e.g. helpfulness-v1")
    cmp.set_defaults(func=cmd_compare)
    trajectory = sub.add_parser("trajectory", help="trajectory export → converted cases").add_subparsers(
        dest="trajectory_command", required=True
    )
    convert = trajectory.add_parser(
        "convert",
        help="convert a redacted export into scenarios (docs/trajectory-export.md); writes all or nothing",
    )
    convert.add_argument("export", help="the redacted trajectory export (JSONL)")
    convert.add_argument("--out", required=True, help="output directory, e.g. scenarios/converted/")
    convert.add_argument(
        "--judge", default="helpfulness", help="judge name of every case (default: helpfulness)"
    )
    convert.add_argument("--suite", default="converted", help="suite of every case (default: converted)")
    convert.set_defaults(func=cmd_trajectory_convert)
    judges = sub.add_parser("judges", help="judge registry").add_subparsers(
        dest="judges_command", required=True
    )
    judges.add_parser(
        "record", help="record new judge versions' content hashes in judges/registry.yaml"
    ).set_defaults(func=cmd_judges_record)
    scores = sub.add_parser("scores", help="human scores").add_subparsers(
        dest="scores_command", required=True
    )
    imp = scores.add_parser("import", help="append human scores from a CSV or JSONL file (all rows or none)")
    imp.add_argument("file")
    imp.set_defaults(func=cmd_scores_import)
    ui = sub.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=3000)
    ui.set_defaults(func=cmd_ui)
    return p


EXIT_INTERNAL_ERROR = 4
"""An internal error (a damaged warehouse file, a bug): never read as allow (0), block (1), none (2)
or investigate (3)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except Exception as exc:  # anything a command did not turn into its own outcome
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
