"""`evaltrack`: validate, demo, build add, run, bridge run, trend, ui, release-status, compare and more."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from typing import Any

import eval_assets.cli.build_commands as build_commands
import eval_assets.cli.fixture_commands as fixture_commands
import eval_assets.cli.gates_commands as gates_commands
import eval_assets.cli.import_commands as import_commands
import eval_assets.cli.init_commands as init_commands
import eval_assets.cli.judge_commands as judge_commands
import eval_assets.cli.project_commands as project_commands
import eval_assets.cli.review_commands as review_commands
import eval_assets.cli.run_commands as run_commands
import eval_assets.cli.spend_commands as spend_commands
import eval_assets.cli.status_commands as status_commands
import eval_assets.cli.ui as ui
from eval_assets import exit_codes
from eval_assets.cli.arguments import CommandParser
from eval_assets.cli.common import is_command_process, set_command_process

# Each family registers its own commands (`register(sub)`), in this order in --help; a command
# module imports what it runs with inside its handler, so `--help`, `validate` and `build add` pay
# only for their own.
FAMILIES = (
    init_commands,
    project_commands,
    build_commands,
    run_commands,
    status_commands,
    judge_commands,
    import_commands,
    fixture_commands,
    review_commands,
    gates_commands,
    spend_commands,
    ui,
)


def parser() -> CommandParser:
    """The `evaltrack` command line: the global options, then every family's commands."""
    p = CommandParser(prog="evaltrack", description=__doc__)
    p.add_argument(
        "--project",
        help="project root (default: the nearest directory from here upward holding evaltrack.yaml)",
    )
    p.add_argument("--home", help="EVAL_HOME (default: $EVAL_HOME, else the project's .eval_home/)")
    p.add_argument(
        "--debug",
        action="store_true",
        help="on a failure, write its cause chain (redacted, one line per exception, no stack frames) "
        "to $EVAL_HOME/logs/debug.log; stdout and stderr only ever get one line",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.register(sub)
    return p


def one_line_error(exc: BaseException, *, debug: bool, home: str | None) -> str:
    """`internal error: Type: message` on one line, redacted, never a traceback; with `debug`, the
    error's cause chain (one redacted line per exception, no stack frames) is appended to
    $EVAL_HOME/logs/debug.log and the line says where."""
    from pathlib import Path

    from eval_assets.home import EvalHome, default_home
    from eval_assets.redact import error_chain, redact, without_traceback

    first = " ".join(without_traceback(str(exc)).split())[:500]
    line = redact(f"internal error: {type(exc).__name__}: {first}")
    if not debug:
        return line + " (run with --debug for the detail)"
    try:
        log = EvalHome(Path(home).resolve() if home else default_home()).append_debug(
            "internal error", error_chain(exc)
        )
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
        return exit_codes.INTERNAL_ERROR
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
        if is_command_process():
            # the process exits next: its heap (Dagster, pandas, the project, a run's rows) frozen, the
            # interpreter's exit skips a full collection of it, which grows with the run
            gc.freeze()
