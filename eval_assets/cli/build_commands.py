"""`evaltrack build add`: validate and register a manifest. A refused manifest costs only the
project load: the Dagster instance is opened only once the build is registered."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval_assets.capability.builds import Builds
from eval_assets.cli.common import collector_paused, home_of, print_problems, project_of
from eval_assets.config import ConfigError


def cmd_build_add(args: argparse.Namespace) -> int:
    try:
        builds = Builds(project_of(args), home_of(args))
        manifest = builds.register(Path(args.file))
    except ConfigError as exc:
        return print_problems(exc)
    # Dagster costs ~3 s CPU to import: only a registered build needs its partition added (its import
    # and the instance's storage modules make long-lived objects only: no collection meanwhile)
    with collector_paused():
        from eval_assets.cli.orchestrate import instance_for, register_partition

        instance = instance_for(builds.home, builds.project)
    register_partition(instance, manifest.id)
    print(f"registered build {manifest.id} -> {builds.path(manifest.id)}")
    return 0
