"""`evaltrack`: validate, demo, build add, run, bridge run, trend, ui, release-status, compare and more."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, NoReturn

from eval_assets import exit_codes
from eval_assets.cli.build_commands import cmd_build_add
from eval_assets.cli.common import EXIT_INTERNAL_ERROR, is_command_process, set_command_process

# The other commands' modules are imported when the command runs, not before, so that `--help`,
# `validate` and `build add` pay only for their own imports: project_commands the gates,
# review_commands and import_commands the track without its engine, run_commands the engine, pandas,
# scipy, matplotlib and Dagster (litellm only in the worker processes that call models, or at a first
# call in this process), ui Dagster.


def _init(args: argparse.Namespace) -> int:
    from eval_assets.cli.init_commands import cmd_init  # the configuration only

    return cmd_init(args)


def _validate(args: argparse.Namespace) -> int:
    from eval_assets.cli.project_commands import cmd_validate

    return cmd_validate(args)


def _judges_record(args: argparse.Namespace) -> int:
    from eval_assets.cli.project_commands import cmd_judges_record

    return cmd_judges_record(args)


def _demo(args: argparse.Namespace) -> int:
    from eval_assets.cli.common import collector_paused

    with collector_paused():
        from eval_assets.cli.run_commands import cmd_demo
    return cmd_demo(args)


def _run(args: argparse.Namespace) -> int:
    from eval_assets.cli.common import collector_paused, track_started_ahead

    with collector_paused():
        # before the command's own imports (Dagster, the release and statistics modules):
        # the build's fork server, when its run will have worker processes, imports the engine and
        # litellm on the other core meanwhile
        track = track_started_ahead(args)
        from eval_assets.cli.run_commands import cmd_run
    return cmd_run(args, track)


def _release_status(args: argparse.Namespace) -> int:
    from eval_assets.cli.status_commands import cmd_release_status  # configuration and DuckDB only

    return cmd_release_status(args)


def _report(args: argparse.Namespace) -> int:
    from eval_assets.cli.run_commands import cmd_report

    return cmd_report(args)


def _compare(args: argparse.Namespace) -> int:
    from eval_assets.cli.run_commands import cmd_compare

    return cmd_compare(args)


def _trajectory_convert(args: argparse.Namespace) -> int:
    from eval_assets.cli.import_commands import cmd_trajectory_convert

    return cmd_trajectory_convert(args)


def _scores_import(args: argparse.Namespace) -> int:
    from eval_assets.cli.import_commands import cmd_scores_import

    return cmd_scores_import(args)


def _fixtures_record(args: argparse.Namespace) -> int:
    from eval_assets.cli.fixture_commands import cmd_fixtures_record  # the engine, only when recording

    return cmd_fixtures_record(args)


def _review(args: argparse.Namespace) -> int:
    from eval_assets.cli.review_commands import COMMANDS  # the track, warehouse and journal database

    return COMMANDS[args.review_command](args)


def _gates_run(args: argparse.Namespace) -> int:
    from eval_assets.cli.gates_commands import cmd_gates_run  # the gate registry

    return cmd_gates_run(args)


def _gates_no_network(args: argparse.Namespace) -> int:
    from eval_assets.cli.no_network import cmd_gates_no_network  # the gate registry and Dagster

    return cmd_gates_no_network(args)


def _warehouse_verify(args: argparse.Namespace) -> int:
    from eval_assets.cli.status_commands import cmd_warehouse_verify  # configuration and DuckDB only

    return cmd_warehouse_verify(args)


def _warehouse_sql(args: argparse.Namespace) -> int:
    from eval_assets.cli.status_commands import cmd_warehouse_sql  # configuration and DuckDB only

    return cmd_warehouse_sql(args)


def _bridge_run(args: argparse.Namespace) -> int:
    from eval_assets.cli.judge_commands import cmd_bridge_run  # the track and Dagster

    return cmd_bridge_run(args)


def _trend(args: argparse.Namespace) -> int:
    from eval_assets.cli.judge_commands import cmd_trend  # the track and Dagster

    return cmd_trend(args)


def _spend(args: argparse.Namespace) -> int:
    from eval_assets.cli.spend_commands import cmd_spend  # configuration and the journal's database

    return cmd_spend(args)


def _ui(args: argparse.Namespace) -> int:
    from eval_assets.cli.ui import cmd_ui

    return cmd_ui(args)


class _Parser(argparse.ArgumentParser):
    """Usage errors exit USAGE (64), never a decision's code; a parser with `help_exit_code` set
    (release-status, which exits 0 only for allow) exits with that code after printing its help."""

    help_exit_code = 0

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())  # one line, whatever the message held
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {line} (see {self.prog} --help)\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        super().exit(self.help_exit_code if status == 0 else status, message)


class _OldSpelling(argparse.Action):
    """An option's spelling from before a rename, accepted for one more release: it stores into the
    new option's destination (`value`, when the old spelling was a flag: `--json` is `--format json`)
    and says on stderr what to write instead. Hidden from --help."""

    def __init__(
        self, option_strings: list[str], dest: str, new: str = "", value: str | None = None, **kw: object
    ):
        self.new, self.value = new, value
        super().__init__(option_strings, dest, nargs=0 if value is not None else None, **kw)  # type: ignore[arg-type]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(
            f"{parser.prog}: {option_string} is deprecated, use {self.new} (accepted until the next release)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, self.value if self.value is not None else values)


def _old_spelling(
    p: argparse.ArgumentParser,
    old: str,
    new: str,
    dest: str,
    value: str | None = None,
    checked: Callable[[str], object] | None = None,
) -> None:
    """`old`, hidden, storing into `dest`; `checked`: the new option's type, so the old spelling is
    checked the same way."""
    extra: dict[str, Any] = {} if checked is None else {"type": checked}
    p.add_argument(old, dest=dest, action=_OldSpelling, new=new, value=value, help=argparse.SUPPRESS, **extra)


def id_arg(text: str) -> str:
    """An argument that names a build, judge name or judge version: the one id grammar
    (`config.id_problem`), refused as a usage error naming the argument."""
    from eval_assets.config import id_problem  # the grammar alone (config is imported by every command)

    if (problem := id_problem(text)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def count_arg(text: str) -> int:
    """A whole number 0 or more (a milestone): `-1`, `1.5` or `x` is a usage error."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range (0 to 2**63 - 1)")
    return value


def port_arg(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = count_arg(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1 to 65535)")
    return value


def _utc_day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a day YYYY-MM-DD: {text!r}") from None


def _format_option(p: argparse.ArgumentParser, *choices: str) -> None:
    """The one output flag, `--format` (text by default); `--json`, its old spelling, still works."""
    p.add_argument("--format", choices=choices, default="text", help=f"output: {', '.join(choices)}")
    if "json" in choices:
        _old_spelling(p, "--json", "--format json", "format", value="json")


# What each command's exit code means, printed at the end of its --help (docs/reference/exit-codes.md lists them too).
# Every command: 4 an internal error (a damaged input, a bug; one line, never a traceback), 64 usage.
EXITS = {
    "init": "0 written; 1 DIR is not empty (nothing written)",
    "validate": "0 valid; 1 problems, each printed as `path: field: message`",
    "demo": "0 every step materialized (a block is an answer, not a failure); 1 a step failed",
    "build add": "0 registered; 1 refused, each problem printed (nothing registered)",
    "run": "0 every step materialized (the decision is printed; `release-status B` exits by it); "
    "1 a step failed, the build is refused or another run holds its lease",
    "release-status": "0 allow (only on verified, current evidence); 1 block, or an id the grammar refuses; "
    "2 no decision yet, or stale; 3 investigate (0 only ever means allow: --help exits 64)",
    "report": "0 written; 1 unknown build, or FILE is not a regular file or a new path (nothing written)",
    "compare": "0 compared; 1 refused (across judge versions, an unknown build)",
    "warehouse verify": "0 every file matches; 4 damage (moved aside, each named)",
    "warehouse sql": "0 answered; 1 the query failed (DuckDB's message); 4 the warehouse cannot be read",
    "bridge run": "0 published; 1 not published or refused; 4 failed",
    "gates run": "0 nothing blocks; 1 something blocks",
    "spend": "0 printed (a home that never paid has spent nothing); 4 the journal cannot be read",
}


def _with_exit_codes(p: argparse.ArgumentParser, path: str = "") -> None:
    """Append each command's exit codes (`EXITS`) to its --help, walking the sub-commands."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _with_exit_codes(child, f"{path} {name}".strip())
    if path in EXITS:
        p.epilog = f"exit codes: {EXITS[path]}; 4 internal error; 64 usage"


def parser() -> argparse.ArgumentParser:
    p = _build_parser()
    _with_exit_codes(p)
    return p


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evaltrack", description=__doc__)
    p.add_argument(
        "--project",
        help="project root (default: the nearest directory from here upward holding evaltrack.yaml)",
    )
    p.add_argument("--home", help="EVAL_HOME (default: $EVAL_HOME, else the project's .eval_home/)")
    p.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error, write the full detail (redacted) to $EVAL_HOME/logs/debug.log; "
        "stdout and stderr only ever get one line",
    )
    sub = p.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="write a minimal evaluation project (an entry-point agent) into DIR")
    init.add_argument("dir")
    init.set_defaults(func=_init)
    sub.add_parser("validate", help="validate scenarios/, rubrics/, judges/ and example builds").set_defaults(
        func=_validate
    )
    demo = sub.add_parser("demo", help="register the example builds and materialize the whole graph")
    _format_option(demo, "text", "json")
    demo.set_defaults(func=_demo)
    build = sub.add_parser("build", help="build registry").add_subparsers(dest="build_command", required=True)
    add = build.add_parser("add", help="register a build manifest")
    add.add_argument(
        "file",
        help="a build manifest (YAML; docs/specs/configuration.md), e.g. examples/builds/baseline.yaml",
    )
    add.set_defaults(func=cmd_build_add)
    run = sub.add_parser("run", help="materialize everything for one build")
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
    _old_spelling(run, "--judge", "--judge-version", "judge_version", checked=id_arg)
    run.add_argument(
        "--fresh", action="store_true", help="pay again with new attempt keys instead of reusing settled ones"
    )
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another run of this build holds its lease, wait for it (default: refuse at once)",
    )
    _format_option(run, "text", "json")
    run.set_defaults(func=_run)
    status = sub.add_parser(
        "release-status",
        help="print a build's decision; exit 0 allow, 1 block, 2 none, 3 investigate, 4 internal error, "
        "64 usage (its --help too)",
    )
    status.help_exit_code = exit_codes.USAGE  # it exits 0 only for allow, so not for its help either
    status.add_argument("build", help="a build id (the id grammar: docs/specs/configuration.md)")
    _format_option(status, "text", "markdown", "json")  # markdown: ready to paste into a pull request
    status.set_defaults(func=_release_status)
    report = sub.add_parser(
        "report", help="a build's self-contained HTML report: decision, reports, scenarios, transcripts"
    )
    report.add_argument("build", type=id_arg, help="a registered build id")
    report.add_argument("--html", required=True, type=Path, metavar="FILE", help="where to write the page")
    report.set_defaults(func=_report)
    cmp = sub.add_parser("compare", help="capability report between two builds under one judge version")
    cmp.add_argument("--baseline", required=True, type=id_arg)
    cmp.add_argument("--candidate", required=True, type=id_arg)
    cmp.add_argument(
        "--judge-version", dest="judge_version", type=id_arg, help="judge version, e.g. helpfulness-v1"
    )
    _old_spelling(cmp, "--judge", "--judge-version", "judge_version", checked=id_arg)
    cmp.set_defaults(func=_compare)
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
        "--judge-name",
        dest="judge_name",
        default="helpfulness",
        type=id_arg,
        help="judge name of every case (default: helpfulness)",
    )
    _old_spelling(convert, "--judge", "--judge-name", "judge_name", checked=id_arg)
    convert.add_argument("--suite", default="converted", help="suite of every case (default: converted)")
    convert.set_defaults(func=_trajectory_convert)
    judges = sub.add_parser("judges", help="judge registry").add_subparsers(
        dest="judges_command", required=True
    )
    judges.add_parser(
        "record", help="record new judge versions' content hashes in judges/registry.yaml"
    ).set_defaults(func=_judges_record)
    scores = sub.add_parser("scores", help="human scores").add_subparsers(
        dest="scores_command", required=True
    )
    imp = scores.add_parser("import", help="append human scores from a CSV or JSONL file (all rows or none)")
    imp.add_argument("file")
    imp.set_defaults(func=_scores_import)
    fixtures = sub.add_parser("fixtures", help="model scripts (gates/fixtures/models/)").add_subparsers(
        dest="fixtures_command", required=True
    )
    rec = fixtures.add_parser(
        "record",
        help="run a case once live against a model and write its script for review (never automatic)",
    )
    rec.add_argument("--case", required=True, help="a case id (gates/cases/) or a converted scenario id")
    rec.add_argument("--model", required=True, help="a priced litellm model, e.g. openai/gpt-4o-mini")
    rec.add_argument("--name", help="script name (default: the case id) -> gates/fixtures/models/NAME.yaml")
    rec.add_argument(
        "--api-base", dest="api_base", help="the model's endpoint, if not its provider's default"
    )
    rec.add_argument("--force", action="store_true", help="overwrite an existing script")
    rec.set_defaults(func=_fixtures_record)
    review = sub.add_parser("review", help="the human review queue (docs/review.md)").add_subparsers(
        dest="review_command", required=True
    )
    fill = review.add_parser("fill", help="queue failed verdicts, bridge disagreements and the seeded sample")
    fill.add_argument("--build", type=id_arg, help="one build (default: every registered build)")
    nxt = review.add_parser(
        "next", help="claim one item exclusively and show it (exit 1: nothing open / taken)"
    )
    nxt.add_argument("--reviewer", required=True)
    nxt.add_argument("--item", help="claim this item instead of the next open one")
    _format_option(nxt, "text", "json")
    submit = review.add_parser(
        "submit", help="store your scores for a claimed item (validated; all or nothing)"
    )
    submit.add_argument("item")
    submit.add_argument("--reviewer", required=True)
    submit.add_argument(
        "--scores",
        required=True,
        nargs="+",
        help="NAME=VALUE ... or one JSON object, e.g. '{\"accuracy\": 4}'",
    )
    release = review.add_parser("release", help="return your claimed item to the pool")
    release.add_argument("item")
    release.add_argument("--reviewer", required=True)
    listing = review.add_parser("list", help="the queue's items and their state")
    listing.add_argument("--build", type=id_arg)
    for command in (fill, nxt, submit, release, listing):
        command.set_defaults(func=_review)
    gates = sub.add_parser("gates", help="the deterministic suite (gates/)").add_subparsers(
        dest="gates_command", required=True
    )
    grun = gates.add_parser(
        "run",
        help="run the gate registry for a build manifest or a milestone; exit 0 none blocks, 1 some block",
    )
    grun.add_argument("--manifest", help="a build manifest file (its milestone and subject)")
    _old_spelling(grun, "--build", "--manifest", "manifest")
    grun.add_argument("--milestone", type=count_arg, help="a milestone (no build, no subject)")
    grun.add_argument("--only", action="append", help="run only this id (repeatable)")
    grun.add_argument("--exclude", action="append", help="leave this id out (repeatable)")
    grun.add_argument(
        "--kind", action="append", help="run only this kind: structural, property, corpus, case, test"
    )
    _format_option(grun, "text", "json")
    grun.set_defaults(func=_gates_run)
    gates.add_parser(
        "no-network",
        help="record the no-network proof (scripts/suite_no_network runs it inside a network namespace)",
    ).set_defaults(func=_gates_no_network)
    warehouse = sub.add_parser("warehouse", help="the warehouse's files").add_subparsers(
        dest="warehouse_command", required=True
    )
    wverify = warehouse.add_parser(
        "verify",
        help="re-hash every file against the partition manifest; exit 0 clean, 4 damage (moved aside, named)",
    )
    wverify.add_argument(
        "--rebuild",
        action="store_true",
        help="only when the manifest is missing or damaged: re-trust every file as it is now, printing "
        "each (earlier decisions then read as stale until `run` decides again)",
    )
    wverify.set_defaults(func=_warehouse_verify)
    wsql = warehouse.add_parser(
        "sql",
        help="run SQL over the warehouse's views (the directory's, or the bucket's current catalogued "
        "objects) and print the answer",
    )
    wsql.add_argument("query", nargs="?", help="the SQL (default: read it from standard input)")
    wsql.add_argument("--format", choices=("text", "csv", "json"), default="text")
    wsql.add_argument(
        "--remote",
        action="store_true",
        help="on object storage: read the objects straight from the bucket, keeping no local copies",
    )
    wsql.set_defaults(func=_warehouse_sql)
    bridge = sub.add_parser("bridge", help="bridge runs between judge versions").add_subparsers(
        dest="bridge_command", required=True
    )
    brun = bridge.add_parser(
        "run",
        help="calibrate --to against --from on the same stored outputs; exit 0 published, 1 not published "
        "or refused, 4 failed",
    )
    brun.add_argument(
        "--from", dest="from_version", required=True, type=id_arg, help="the older judge version"
    )
    brun.add_argument(
        "--to",
        dest="to_version",
        required=True,
        type=id_arg,
        help="the version that declares bridges_from it",
    )
    brun.add_argument(
        "--builds",
        nargs="+",
        type=id_arg,
        help="builds to bridge over (default: the judge file's bridge_builds, else the newest 3)",
    )
    _format_option(brun, "text", "markdown", "json")
    brun.set_defaults(func=_bridge_run)
    trend = sub.add_parser(
        "trend", help="draw and print the score trend over the registered builds (splices, intervals, breaks)"
    )
    trend.add_argument(
        "--judge", type=id_arg, help="a judge version or judge name (default: every active version)"
    )
    _format_option(trend, "text", "markdown", "json")
    trend.set_defaults(func=_trend)
    spend = sub.add_parser(
        "spend", help="the spend journal's running totals (spent and in flight) against the ceilings"
    )
    spend.add_argument(
        "--day", type=_utc_day, help="the UTC day YYYY-MM-DD whose total is shown (default: today)"
    )
    spend.add_argument("--build", type=id_arg, help="only this build's suites, and its scenarios")
    _format_option(spend, "text", "json")
    spend.set_defaults(func=_spend)
    ui = sub.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    ui.add_argument("--port", type=port_arg, default=3000)
    ui.set_defaults(func=_ui)
    return p


def one_line_error(exc: BaseException, *, debug: bool, home: str | None) -> str:
    """`internal error: Type: message` on one line, redacted, never a traceback; with `debug`, the
    full traceback (redacted) is appended to $EVAL_HOME/logs/debug.log and the line says where."""
    import traceback
    from pathlib import Path

    from eval_assets.home import default_home
    from eval_assets.redact import redact, without_traceback
    from eval_assets.safe_write import check_target

    first = " ".join(without_traceback(str(exc)).split())[:500]
    line = redact(f"internal error: {type(exc).__name__}: {first}")
    if not debug:
        return line + " (run with --debug for the detail)"
    try:
        root = Path(home).resolve() if home else default_home()
        log = root / "logs" / "debug.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        check_target(log)  # appending to a FIFO would block, to a symlink write elsewhere
        with log.open("a", encoding="utf-8") as out:
            out.write(redact("".join(traceback.format_exception(exc))) + "\n")
    except (OSError, ValueError) as why:  # ValueError: no project, so no home to write the log into
        return f"{line} (the debug log could not be written: {type(why).__name__})"
    return f"{line} (detail in {log})"


class _ClosedPipeTolerant:
    """stdout for one command: once its reader has gone (`evaltrack release-status B | head -1`), what is
    left to print is dropped, so the exit code stays the command's own (a decision's) instead of an
    internal error; the descriptor is pointed at /dev/null so nothing fails at the interpreter's exit."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return int(self._inner.write(text))
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        import os

        self.reader_gone = True
        try:
            fd = self._inner.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
            return
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(argv: Sequence[str] | None = None) -> int:
    """The `evaltrack` command; `argv` None: this process is the command (its arguments from sys.argv)."""
    args = parser().parse_args(argv)
    set_command_process(argv is None)
    stdout = sys.stdout
    sys.stdout = _ClosedPipeTolerant(stdout)  # type: ignore[assignment]
    try:
        return int(args.func(args))
    except Exception as exc:  # anything a command did not turn into its own outcome
        print(one_line_error(exc, debug=bool(getattr(args, "debug", False)), home=args.home), file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
        if is_command_process():
            # the process exits next: its heap (Dagster, pandas, the project, a run's rows) frozen, the
            # interpreter's exit skips a full collection of it, which grows with the run
            gc.freeze()
