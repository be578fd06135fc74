"""`evaltrack build add`: validate and register a manifest. It loads only the configuration: a
refused manifest costs the project load, a registered one no more. The build's Dagster partition is
added by what opens the instance for it (`orchestrate.add_build_partitions`): `run` and `demo` before
its first run, `ui` at its start (every registered build), the daemon's `build_sensor` within its
interval."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.capability.builds import Builds
from eval_assets.cli.arguments import Commands, command, group
from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError


def register(sub: Commands) -> None:
    build = group(sub, "build", help="build registry")
    add = command(
        build,
        "add",
        help="register a build manifest",
        run=cmd_build_add,
        exits={
            exit_codes.OK: "registered",
            exit_codes.REFUSED: "refused, each problem printed (nothing registered)",
        },
    )
    add.add_argument(
        "file",
        help="a build manifest (YAML; docs/specs/configuration.md), e.g. examples/builds/baseline.yaml",
    )


def cmd_build_add(args: argparse.Namespace) -> int:
    try:
        builds = Builds(project_of(args), home_of(args))
        manifest = builds.register(Path(args.file))
    except ConfigError as exc:
        return print_problems(exc)
    print(f"registered build {manifest.id} -> {builds.path(manifest.id)}")
    return exit_codes.OK
