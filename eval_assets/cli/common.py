"""What every command shares: EVAL_HOME and the project from the arguments, and problem printing."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.config import ConfigError, Project, load_project
from eval_assets.home import EvalHome, default_home, project_root

EXIT_INTERNAL_ERROR = exit_codes.INTERNAL_ERROR


def home_of(args: argparse.Namespace) -> EvalHome:
    home = EvalHome(Path(args.home).resolve() if args.home else default_home())
    os.environ["EVAL_HOME"] = str(home.root)  # the code location's resources read it
    return home.ensure()


def project_of(args: argparse.Namespace, *, check_registry: bool = True) -> Project:
    root = Path(args.project).resolve() if args.project else project_root()
    os.environ["EVAL_PROJECT_ROOT"] = str(root)
    return load_project(root, check_registry=check_registry)


def print_problems(exc: ConfigError) -> int:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
    return 1
