"""What every command shares: EVAL_HOME and the project from the arguments, and problem printing."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from eval_assets import exit_codes
from eval_assets.config import ConfigError, Problem, Project, load_project
from eval_assets.home import EvalHome, NoProjectFound, default_home, project_root
from eval_assets.redact import set_pii

if TYPE_CHECKING:
    from eval_assets.capability.track import Track


def root_of(args: argparse.Namespace) -> Path:
    """The project a command works on: `--project`, else the one found from the current directory
    (`eval_assets.home.find_project`, as git and pytest find theirs). Raises ConfigError when none is."""
    if args.project:
        return Path(args.project).resolve()
    try:
        return project_root()
    except NoProjectFound as exc:
        raise ConfigError([Problem(str(Path.cwd()), "<project>", str(exc).partition(": ")[2])]) from None


def home_path(args: argparse.Namespace) -> EvalHome:
    """The command's EVAL_HOME (`--home`, else $EVAL_HOME, else `<project>/.eval_home`), not created;
    exported as $EVAL_HOME for the code location's resources."""
    home = EvalHome(Path(args.home).resolve() if args.home else default_home(root_of(args)))
    os.environ["EVAL_HOME"] = str(home.root)
    return home


def home_of(args: argparse.Namespace) -> EvalHome:
    """The command's EVAL_HOME, created when missing: for the commands that write into it."""
    return home_path(args).ensure()


def missing_home(args: argparse.Namespace) -> str | None:
    """Why a read-only command has nothing to read (its EVAL_HOME does not exist), else None. The
    read-only commands (validate, release-status, report, compare, spend, warehouse verify, review
    list) ask this first and answer without creating a home. With the warehouse on object storage a
    missing home is no answer: the warehouse and the build registry are in the bucket, and the home is
    only the local copy a read makes (a new pod, a CI job)."""
    home = home_path(args)
    if home.root.is_dir():
        return None
    try:
        if project_of(args).settings.warehouse.url is not None:
            return None
    except ConfigError:
        pass  # the command reports the project's problems itself
    return f"no EVAL_HOME at {home.root}: nothing was registered or run there (--home or $EVAL_HOME names another)"


def project_of(args: argparse.Namespace, *, check_registry: bool = True) -> Project:
    """The command's project, loaded once per command (`missing_home` may have asked for it first);
    its `redaction.pii` is then in force in the command's process (loading itself sets nothing), and
    its root exported for the code location the command loads."""
    loaded: dict[bool, Project] = vars(args).setdefault("_loaded_projects", {})
    if check_registry not in loaded:
        root = root_of(args)
        os.environ["EVAL_PROJECT_ROOT"] = str(root)
        loaded[check_registry] = load_project(root, check_registry=check_registry)
        set_pii(loaded[check_registry].settings.redaction.pii)
    return loaded[check_registry]


_command_process = False


def set_command_process(own: bool) -> None:
    """Say whether this process is the `evaltrack` command itself (`cli.main` called without
    arguments; `main` says so). Then what its start made is frozen after it (`collector_paused`) and its
    whole heap as it returns, out of the collector's way; a caller of `main(argv)` in a process that goes
    on (a test) keeps its collector as it was, since freezing would also keep the garbage it had not
    collected yet."""
    global _command_process
    _command_process = own


def is_command_process() -> bool:
    """Whether this process is the `evaltrack` command itself (`set_command_process`)."""
    return _command_process


@contextmanager
def collector_paused() -> Iterator[None]:
    """A command's start (its imports, the project, the track) with the cyclic garbage collector off:
    it makes long-lived objects and no garbage worth a collection. In the command's own process what
    it made is then frozen, else the first full collection after it would scan all of it on the first
    block's path; the collector is back as it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _command_process:
            gc.freeze()
        if was:
            gc.enable()


def track_started_ahead(args: argparse.Namespace) -> Track | None:
    """`evaltrack run`'s track, its build's fork server started first when the run will have worker
    processes (`capability.track.start_workers_ahead`): called before the command imports Dagster and
    the rest, and before the track opens its warehouse, so the server's import of the engine and
    litellm overlaps them on the other core. None when the project, home or build is wrong:
    the command then makes the track itself and reports the problem."""
    from eval_assets.capability.builds import Builds  # the engine's floor, not Dagster
    from eval_assets.capability.track import Track, TrackError, start_workers_ahead

    try:
        project, home = project_of(args), home_of(args)
        start_workers_ahead(project, Builds(project, home).resolve(args.build))
        return Track(project, home)
    except (ConfigError, TrackError):
        return None


def print_problems(exc: ConfigError) -> int:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
    return exit_codes.REFUSED
