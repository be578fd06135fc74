"""`evaltrack run`, `demo`, `release-status` and `compare`: materializations on the persistent Dagster
instance (through `eval_assets.cli.orchestrate`), then the recorded decisions as tables or JSON."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from eval_assets import exit_codes
from eval_assets.capability.errors import TrackError
from eval_assets.capability.progress import PROGRESS_LOGGER
from eval_assets.cli.arguments import Commands, command, format_option, id_arg
from eval_assets.cli.common import (
    collector_paused,
    home_of,
    missing_home,
    print_problems,
    project_of,
    track_started_ahead,
)
from eval_assets.config import ConfigError
from eval_assets.present import (
    MAX_LINE,
    reasons_text_rows,
    shorten,
    terminal_width,
    text_table,
    wrapped,
)
from eval_assets.safe_write import UnsafeTarget, check_target

if TYPE_CHECKING:
    from eval_assets.capability.track import Track
    from eval_assets.cli.orchestrate import StepResult
    from eval_assets.home import EvalHome
    from eval_assets.spend import LeaseRow

EXAMPLE_BUILDS = ("baseline.yaml", "rebuild.yaml", "candidate.yaml")

# what `run` and `demo` import to run (Dagster, the release and statistics modules), after their start
COMMAND_MODULES = ("eval_assets.cli.orchestrate", "eval_assets.release", "eval_assets.capability.baselines")


def register(sub: Commands) -> None:
    demo = command(
        sub,
        "demo",
        help="register the example builds and materialize the whole graph",
        run=cmd_demo,
        exits={
            exit_codes.OK: "every step materialized (a block is an answer, not a failure)",
            exit_codes.REFUSED: "a step failed",
        },
    )
    format_option(demo, "text", "json")
    run = command(
        sub,
        "run",
        help="materialize everything for one build",
        run=cmd_run,
        exits={
            exit_codes.OK: "every step materialized (the decision is printed; `release-status B` exits by it)",
            exit_codes.REFUSED: "a step failed, the build is refused or another run holds its lease",
        },
    )
    run.add_argument(
        "--build",
        required=True,
        type=id_arg,
        help="a registered build id (`evaltrack build add FILE` first)",
    )
    run.add_argument(
        "--judge-version",
        dest="judge_version",
        type=id_arg,
        help="one judge version (default: every active version)",
    )
    run.add_argument(
        "--fresh", action="store_true", help="pay again with new attempt keys instead of reusing settled ones"
    )
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another run of this build holds its lease, wait for it (default: refuse at once)",
    )
    format_option(run, "text", "json")
    report = command(
        sub,
        "report",
        help="a build's self-contained HTML report: decision, reports, scenarios, transcripts",
        run=cmd_report,
        exits={
            exit_codes.OK: "written",
            exit_codes.REFUSED: "unknown build, or FILE is not a regular file or a new path (nothing written)",
            exit_codes.INTERNAL_ERROR: "a damaged warehouse file (moved aside, named), or an internal error",
        },
    )
    report.add_argument("build", type=id_arg, help="a registered build id")
    report.add_argument("--html", required=True, type=Path, metavar="FILE", help="where to write the page")
    cmp = command(
        sub,
        "compare",
        help="capability report between two builds under one judge version",
        run=cmd_compare,
        exits={
            exit_codes.OK: "compared",
            exit_codes.REFUSED: "refused (across judge versions, an unknown build)",
            exit_codes.INTERNAL_ERROR: "a damaged warehouse file (moved aside, named), or an internal error",
        },
    )
    cmp.add_argument("--baseline", required=True, type=id_arg, help="the registered build compared against")
    cmp.add_argument("--candidate", required=True, type=id_arg, help="the registered build compared")
    cmp.add_argument(
        "--judge-version",
        dest="judge_version",
        required=True,
        type=id_arg,
        help="judge version, e.g. helpfulness-v1",
    )


def _import_the_command() -> None:
    """Import what `run` and `demo` run with; called with the collector paused (`collector_paused`)."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)


def _money(value: object) -> str:
    return f"${float(value or 0.0):.3f}"  # type: ignore[arg-type]


def step_line(step: StepResult, expected_attempts: int | None = None) -> str:
    """One progress line for a finished step: what it materialized, its counts, spend and time."""
    meta = step.metadata
    took = f"{step.seconds:.0f} s"
    if step.withheld:
        return f"{'release_approval':<20} not approved (may not ship) · {took}"
    if not step.success and not set(step.assets) <= set(meta):
        build = step.partition.split("|")[0]
        return shorten(
            f"{'+'.join(step.assets):<20} FAILED · build {build}: {step.error or 'run failed'} · {took}",
            MAX_LINE,
        )
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
    if "release_approval" in meta:
        return f"{'release_approval':<20} approved: {meta['release_approval'].get('decision')} · {took}"
    if "release_board" in meta:
        m = meta["release_board"]
        return f"{'release_board':<20} {m.get('builds')} builds · may ship: {m.get('may_ship')} · {took}"
    if "release_decision" in meta:
        m = meta["release_decision"]
        return f"{'release_decision':<20} {m.get('decision')} · baseline {m.get('baseline')} · {took}"
    return f"{'+'.join(step.assets):<20} {'ok' if step.success else 'FAILED'} · {took}"


def step_failures(step: StepResult, debug: bool, home: EvalHome) -> list[str]:
    """The lines under a step's own: each distinct failure of its attempts (scenario_runs), and, for a
    step that failed, where its detail is (`debug`: written, redacted, to EVAL_HOME/logs/debug.log)."""
    lines = [
        shorten(str(x), MAX_LINE - 4) for x in step.metadata.get("scenario_runs", {}).get("failures") or []
    ]
    if not step.success and not step.withheld and step.detail:
        if not debug:
            lines.append("(run with --debug for the detail)")
        else:
            try:
                log = home.append_debug(f"{step.job} {step.partition} run {step.run_id}", [step.detail])
                lines.append(f"(detail in {log})")
            except (OSError, UnsafeTarget) as why:
                lines.append(f"(the debug log could not be written: {type(why).__name__})")
    return lines


class ProgressPrinter(logging.Handler):
    """Draws `scenario_runs` progress (the `evaltrack.progress` log): a bar redrawn in place on a
    terminal, one plain line per report otherwise (CI logs, pipes). Writes to `stream`, by default to
    `sys.stdout` as it is when the printer is made (not as it was when this module was imported)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(logging.INFO)
        stream = sys.stdout if stream is None else stream
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = False

    def emit(self, record: logging.LogRecord) -> None:
        p = getattr(record, "progress", None)
        if p is None:
            return
        if not self.tty:
            self.stream.write(f"  {shorten(p.line(), MAX_LINE - 2)}\n")
        else:
            filled = round(20 * p.done / p.planned) if p.planned else 0
            bar = "#" * filled + "." * (20 - filled)
            self.stream.write("\r\x1b[2K" + shorten(f"  [{bar}] {p.line()}", MAX_LINE))
            self.drawn = True
        self.stream.flush()

    def finish(self) -> None:
        """End a bar drawn in place (the step's line comes next)."""
        if self.drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.drawn = False


@contextmanager
def progress_shown(quiet: bool) -> Iterator[ProgressPrinter | None]:
    """While inside, the subject runs' progress is printed (not when `quiet`: `--format json` prints one document)."""
    if quiet:
        yield None
        return
    printer = ProgressPrinter()
    PROGRESS_LOGGER.addHandler(printer)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    try:
        yield printer
    finally:
        PROGRESS_LOGGER.removeHandler(printer)
        printer.finish()


def _run_builds(
    args: argparse.Namespace,
    track: Track,
    build_ids: Sequence[str],
    judge: str | None,
    fresh: bool = False,
    quiet: bool = False,
) -> tuple[bool, list[dict[str, object]]]:
    """Materialize each build; prints one progress line per step (unless `quiet`). Returns success
    and, per build, its steps as plain data (for `--format json`)."""
    from eval_assets.cli.orchestrate import launch_board, launch_build

    ok = True
    out: list[dict[str, object]] = []
    say: Callable[[str], None] = (lambda _line: None) if quiet else (lambda line: print(line, flush=True))
    for build_id in build_ids:
        manifest = track.build(build_id)
        # a build whose runs have worker processes: their fork server imports the engine and litellm
        # beside this process's own start (the definitions), not while the first run waits for it
        track.start_workers_ahead(manifest)
        versions = [judge] if judge else [j.version_id for j in track.judges_for(manifest)]
        expected = sum(s.repeats for s in track.scenarios_for(manifest))
        say(f"build {build_id}: scenario_runs, then {', '.join(versions)}, the suite and the decision")

        def show(step: StepResult, expected: int = expected, say: Callable[[str], None] = say) -> None:
            if printer is not None:
                printer.finish()
            say(f"  {step_line(step, expected)}")
            for line in step_failures(step, bool(getattr(args, "debug", False)), track.home):
                say(f"    {line}")

        tags = {}
        if fresh:
            generation = track.next_generation(build_id)
            tags["evaltrack/generation"] = str(generation)
            say(f"  fresh run: generation {generation} (new attempt keys; earlier spend stays on the ledger)")
        with progress_shown(quiet) as printer:
            results = launch_build(track.home, build_id, versions, on_step=show, tags=tags)
        ok = ok and all(r.success or r.withheld for r in results)
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
                        "withheld": r.withheld,
                        "error": r.error,
                        "seconds": r.seconds,
                    }
                    for r in results
                ],
            }
        )
    board = launch_board(track.home)  # once, after every build of the command
    ok = ok and board.success
    say(f"  {step_line(board)}")
    return ok, out


def _decision_record(track: Track, build_id: str) -> dict[str, object]:
    """A build's recorded decision (checked against its evidence), its reasons and where its plots
    are, as plain data. A damaged decision or input reads as an internal error, never a decision."""
    from eval_assets.cli.status_commands import decision_record
    from eval_assets.evidence import DecisionDamaged
    from eval_assets.release import checked_decision
    from eval_assets.warehouse import WarehouseError

    try:
        record = decision_record(checked_decision(track, build_id), build_id)
    except (DecisionDamaged, WarehouseError) as exc:
        record = {
            "build": build_id,
            "decision": "error",
            "recorded": True,
            "baseline": None,
            "reasons": [{"severity": "error", "source": "evidence", "message": str(exc)}],
        }
    if not record["recorded"]:  # no decision to read it from: the baseline the manifest names
        record["baseline"] = track.build(build_id).baseline
    plots = sorted(track.home.reports(build_id).glob("*.png"))
    page = track.home.reports(build_id) / "report.html"
    return {**record, "plots": [str(p) for p in plots], "report": str(page) if page.is_file() else None}


def _print_decisions(records: Sequence[dict[str, object]], home: Path) -> None:
    """One reasons table per build, then the decisions in one table, last (no line over 200 characters)."""

    def rel(path: str) -> str:
        try:
            return str(Path(path).relative_to(home))
        except ValueError:
            return path

    width = terminal_width()
    for r in records:
        print()
        print(
            "\n".join(wrapped(f"{r['build']}: {r['decision']} (baseline {r['baseline'] or 'none'})", width))
        )
        rows = reasons_text_rows(r["reasons"])  # type: ignore[arg-type]
        print(
            text_table(("severity", "source", "reason"), rows, width, wrap=True)
            if rows
            else "  no reasons recorded"
        )
        plots = ", ".join(rel(p) for p in r["plots"]) or "none"  # type: ignore[attr-defined]
        print(shorten(f"plots (under EVAL_HOME): {plots}", MAX_LINE))
    print()
    # the plots are listed per build above: a row of three plot paths ran past 200 characters
    print(
        text_table(
            ("build", "decision", "reasons", "report (under EVAL_HOME)"),
            [
                (
                    r["build"],
                    r["decision"] if r["recorded"] else "no decision recorded",
                    len(r["reasons"]),  # type: ignore[arg-type]
                    rel(str(r["report"])) if r["report"] else "none",
                )
                for r in records
            ],
        )
    )


def cmd_run(args: argparse.Namespace) -> int:
    """`evaltrack run --build B`."""
    with collector_paused():
        # before the command's own imports: the build's fork server, when its run will have worker
        # processes, imports the engine and litellm on the other core meanwhile
        track = track_started_ahead(args)
        _import_the_command()
    return _run(args, track)


def _run(args: argparse.Namespace, track: Track | None) -> int:
    """`evaltrack run --build B`; `track` when `track_started_ahead` made it already."""
    from eval_assets.capability.track import Track, track_opened_once
    from eval_assets.spend import JournalError

    try:
        track = track or Track(project_of(args), home_of(args))
        if args.judge_version:
            track.judge(args.judge_version)
        manifest = track.build(args.build)
        track.journal  # noqa: B018  (an unreachable or locked journal fails here, before any model call)
    except ConfigError as exc:
        return print_problems(exc)
    except (TrackError, JournalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.REFUSED

    def waiting(row: LeaseRow) -> None:
        print(f"waiting: {row.target} is being run by {row.describe()}", flush=True)

    # One run per build, asset and partition: the leases of every paying step are taken
    # here, in one global order, before any call; the steps (this process) hold them re-entrantly.
    versions = (
        [args.judge_version] if args.judge_version else [j.version_id for j in track.judges_for(manifest)]
    )
    targets = [("scenario_runs", args.build)] + [("judge_verdicts", f"{args.build}|{v}") for v in versions]
    try:
        with ExitStack() as leases:
            leases.enter_context(track_opened_once(track))  # once per command, not per run
            for asset, partition in targets:
                leases.enter_context(
                    track.lease(args.build, asset, partition, None, wait=args.wait, on_wait=waiting)
                )
            # a local model's server comes up before the first step (or the run is refused, one line)
            track.serve_local([manifest.subject.model, *(track.judge(v).model for v in versions)])
            ok, steps = _run_builds(
                args, track, [args.build], args.judge_version, fresh=args.fresh, quiet=args.format == "json"
            )
    except (TrackError, JournalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.REFUSED
    record = _decision_record(track, args.build)
    if args.format == "json":
        print(json.dumps({"ok": ok, "builds": [{**steps[0], **record}]}, default=str, sort_keys=True))
    else:
        _print_decisions([record], track.home.root)
    return exit_codes.OK if ok else exit_codes.REFUSED


def cmd_demo(args: argparse.Namespace) -> int:
    """`evaltrack demo`: the example builds, registered and run, and the score trends over them."""
    with collector_paused():
        _import_the_command()
    return _demo(args)


def _demo(args: argparse.Namespace) -> int:
    from eval_assets.capability.track import Track, track_opened_once
    from eval_assets.cli.orchestrate import add_build_partitions, instance_for, launch_trends

    try:
        project = project_of(args)
        home = home_of(args)
        track = Track(project, home)
        instance = instance_for(home, project)
        build_ids = []
        for name in EXAMPLE_BUILDS:
            manifest = track.register_build(project.root / "examples" / "builds" / name)
            build_ids.append(manifest.id)
        add_build_partitions(instance, build_ids)
    except ConfigError as exc:
        return print_problems(exc)
    with track_opened_once(track):  # once per command, not per run (about twenty runs)
        try:  # a local model's server comes up before the first run (or the demo is refused, one line)
            track.serve_local(
                [track.build(b).subject.model for b in build_ids] + [j.model for j in project.active_judges]
            )
        except TrackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exit_codes.REFUSED
        ok, steps = _run_builds(args, track, build_ids, None, quiet=args.format == "json")
        records = [_decision_record(track, b) for b in build_ids]
        # the score trend of each active judge version over the builds just run (a plot in the UI)
        trends = launch_trends(home, [j.version_id for j in project.active_judges])
    ok = ok and all(t.success for t in trends)
    trend_lines = [
        f"score trend {t.partition}: "
        + (f"{t.metadata['score_trend'].get('plot_file')}" if t.success else f"FAILED ({t.error})")
        for t in trends
    ]
    if args.format == "json":
        builds = [{**s, **r} for s, r in zip(steps, records, strict=True)]
        print(
            json.dumps(
                {
                    "ok": ok,
                    "builds": builds,
                    "trends": trend_lines,
                    "warehouse": track.warehouse.for_analysts,
                },
                default=str,
                sort_keys=True,
            )
        )
        return exit_codes.OK if ok else exit_codes.REFUSED
    print()
    print(f"warehouse: {track.warehouse.for_analysts}  (open read-only; views in docs/warehouse.md)")
    print(f"UI: EVAL_HOME={home.root} evaltrack ui   (then http://127.0.0.1:3000)")
    for line in trend_lines:
        print(line)
    _print_decisions(records, home.root)
    return exit_codes.OK if ok else exit_codes.REFUSED


def _report_damage(track: Track, builds: Sequence[str]) -> bool:
    """Print the warehouse damage of `builds` (after checking every file); True if there is any."""
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


def cmd_report(args: argparse.Namespace) -> int:
    """Write the build's HTML report; refuse an unknown build or an unsafe FILE (a FIFO, device,
    directory or symlink is never written over); a damaged file is an internal error."""
    from eval_assets.capability.track import Track
    from eval_assets.release import write_build_report

    try:
        check_target(Path(args.html))
        project = project_of(args)
        if (why := missing_home(args)) is not None:
            print(f"error: unknown build {args.build}: {why}", file=sys.stderr)
            return exit_codes.REFUSED
        track = Track(project, home_of(args))
        track.build(args.build)
    except ConfigError as exc:
        return print_problems(exc)
    except (TrackError, UnsafeTarget) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.REFUSED
    if _report_damage(track, [args.build]):
        return exit_codes.INTERNAL_ERROR
    try:
        path = write_build_report(track, args.build, Path(args.html))
    except UnsafeTarget as exc:  # made unsafe while the page was rendered
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.REFUSED
    print(f"wrote {path}")
    return exit_codes.OK


def cmd_compare(args: argparse.Namespace) -> int:
    from eval_assets.capability.baselines import build_reliability
    from eval_assets.capability.track import Track
    from eval_assets.release import build_report
    from eval_assets.stats import CrossJudgeVersionError, reliability_markdown, summary_markdown

    try:
        project = project_of(args)
        if (why := missing_home(args)) is not None:
            print(f"refused: unknown builds {args.baseline} and {args.candidate}: {why}", file=sys.stderr)
            return exit_codes.REFUSED
        track = Track(project, home_of(args))
        track.build(args.baseline)
        candidate = track.build(args.candidate)  # resolved once, passed down
        if _report_damage(track, [args.baseline, args.candidate]):
            return exit_codes.INTERNAL_ERROR
        run = build_report(track, candidate, args.judge_version, args.baseline)
    except ConfigError as exc:
        return print_problems(exc)
    except (CrossJudgeVersionError, TrackError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return exit_codes.REFUSED
    print(summary_markdown(run.report))
    for role, build in (("baseline", args.baseline), ("candidate", args.candidate)):
        table = reliability_markdown(build_reliability(track, build, args.judge_version))
        if table:
            print(f"{role} {build}: {table}")
    return exit_codes.OK
