"""`evaltrack init DIR`: a minimal evaluation project of one's own (configuration only, no engine)."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from importlib.resources import as_file, files
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command
from eval_assets.cli.common import print_problems
from eval_assets.config import ConfigError, load_project, record_new_versions
from eval_assets.home import HOME_DIR

TEMPLATE = "project_template"
RENAMED = {"agent.py.tmpl": "agent.py"}  # kept as text in the package: not a module of eval_assets


def register(sub: Commands) -> None:
    init = command(
        sub,
        "init",
        help="write a minimal evaluation project (an entry-point agent) into DIR",
        run=cmd_init,
        exits={exit_codes.OK: "written", exit_codes.REFUSED: "DIR is not empty (nothing written)"},
    )
    init.add_argument("dir", help="a new or empty directory")


def cmd_init(args: argparse.Namespace) -> int:
    """Write evaltrack.yaml, one scenario, rubric, judge (recorded in judges/registry.yaml), gate and
    spec, a starter entry-point agent and its build manifest into DIR. Refuses (nothing written) when
    DIR exists and is not empty."""
    given = Path(args.dir)
    if given.is_symlink():  # never written through: the project would land where the link points
        print(f"{args.dir}: is a symbolic link; nothing written", file=sys.stderr)
        return exit_codes.REFUSED
    dest = given.resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        print(f"{args.dir}: exists and is not an empty directory; nothing written", file=sys.stderr)
        return exit_codes.REFUSED
    with as_file(files("eval_assets.cli") / TEMPLATE) as template:
        shutil.copytree(template, dest, dirs_exist_ok=True)
    for old, new in RENAMED.items():
        (dest / old).rename(dest / new)
    (dest / ".gitignore").write_text(f"{HOME_DIR}/\n")  # the project's state, never committed
    try:
        record_new_versions(load_project(dest, check_registry=False))
        load_project(dest)
    except ConfigError as exc:  # the shipped template must load; say so rather than leave half a project
        return print_problems(exc)
    print(
        f"wrote an evaluation project to {dest}\n"
        f"next, from the project (commands find it there as git does; its state goes to .eval_home/ in it):\n"
        f"  cd {shlex.quote(str(dest))}\n"
        f"  evaltrack validate\n"
        f"  evaltrack build add examples/builds/my-agent.yaml\n"
        f"  evaltrack run --build my-agent-1"
    )
    return exit_codes.OK
