"""`evaltrack ui`: the Dagster UI (`dagster dev`) as a child process group that never outlives it."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, port_arg
from eval_assets.cli.common import home_of, project_of


def register(sub: Commands) -> None:
    ui = command(
        sub,
        "ui",
        help="start the Dagster UI on 127.0.0.1",
        run=cmd_ui,
        exits={
            exit_codes.OK: "stopped (Ctrl-C or SIGTERM)",
            exit_codes.INTERNAL_ERROR: "`dagster dev` failed (its exit code printed), or an internal error",
        },
    )
    ui.add_argument("--port", type=port_arg, default=3000, help="the UI's port on 127.0.0.1")

SUPERSEDED = "ignore:Function `dev_command` is superseded"


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_ui(args: argparse.Namespace) -> int:
    """Run `dagster dev` on 127.0.0.1 in its own process group; SIGTERM/SIGINT stop it cleanly.

    The webserver, the daemon, the code servers and the run workers all live in that group; when
    `dagster dev` has exited, whatever of the group is still running gets UI_STOP_GRACE_S to finish
    and is then killed, so `evaltrack ui` never leaves an orphan holding a run or the port.
    """
    from eval_assets.cli.orchestrate import add_registered_build_partitions  # Dagster

    home = home_of(args)
    # the partitions of builds registered since a command last opened the instance (`build add` only
    # stores the manifest), so the UI lists them from its first page
    add_registered_build_partitions(home, project_of(args), _warn)
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
        # `dagster dev` warns on stderr that `dg dev` supersedes it: the one way to start webserver and
        # daemon together that this Dagster has, so the notice is not for a user of `evaltrack ui`
        env = {
            **os.environ,
            "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), SUPERSEDED])),
        }
        child = subprocess.Popen(cmd, cwd=root, preexec_fn=reset_signals, env=env)

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
    if code in (exit_codes.OK, -signal.SIGTERM, 128 + signal.SIGTERM):
        return exit_codes.OK
    print(f"evaltrack ui: dagster dev exited with {code}", file=sys.stderr)
    return exit_codes.INTERNAL_ERROR


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
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.2)
