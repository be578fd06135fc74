"""The code location: built from one loaded project when Dagster loads it (`defs`), or from the project
a command loaded (`location`); importing this module or any under `defs/` reads no project. The
settings every asset shares are applied once here, over every asset spec: owners (evaltrack.yaml
`owners`), kinds (all are Python; those that write a warehouse partition are Parquet too) and the
freshness policies of the nightly outputs that matter."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from datetime import timedelta

import dagster as dg

from eval_assets.capability.builds import Builds
from eval_assets.config import ConfigError, Project, project_at
from eval_assets.defs.automation.schedules import nightly_schedule
from eval_assets.defs.automation.sensors import (
    automation_condition_sensor,
    build_sensor,
    release_block_sensor,
)
from eval_assets.defs.capability.assets import capability_assets
from eval_assets.defs.failures import mask_user_code_errors
from eval_assets.defs.jobs import JOB_DEFINITIONS
from eval_assets.defs.judges.assets import judge_assets
from eval_assets.defs.partitions import Partitions
from eval_assets.defs.release.assets import release_assets
from eval_assets.defs.resources import resources
from eval_assets.defs.suite.assets import deterministic_suite
from eval_assets.home import EvalHome, default_home, project_root

# assets whose materialization writes no warehouse partition (the rest write Parquet)
NOT_PARQUET = frozenset({"release_block_notice", "release_approval", "release_board"})
# the nightly track (02:00 UTC): these land at least once a day; warn after 25 h, fail after 26 h
NIGHTLY = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26), warn_window=timedelta(hours=25))
FRESHNESS = {"scenario_runs": NIGHTLY, "capability_report": NIGHTLY, "release_decision": NIGHTLY}


def shared_settings(spec: dg.AssetSpec, owners: Sequence[str]) -> dg.AssetSpec:
    """`spec` with the owners, kinds and freshness policy every asset of the location gets."""
    name = spec.key.to_user_string()
    kinds = {"python"} if name in NOT_PARQUET else {"python", "parquet"}
    spec = spec.replace_attributes(owners=list(owners), kinds=kinds)
    if name in FRESHNESS:
        spec = spec.replace_attributes(freshness_policy=FRESHNESS[name])
    return spec


class InvalidProject(Exception):
    """The project the location was asked to load does not validate (the lines `evaltrack validate`
    prints)."""


@dg.definitions
def defs() -> dg.Definitions:
    """The location Dagster loads (workspace.yaml): the project at EVAL_PROJECT_ROOT (else the one found
    from the working directory), its state in EVAL_HOME; read when Dagster loads it, never at import."""
    root = project_root()
    try:
        project = project_at(root)
    except ConfigError as exc:
        raise InvalidProject(f"eval-track configuration is invalid:\n{exc}") from None
    return location(project, EvalHome(default_home(root)))


def location(project: Project, home: EvalHome) -> dg.Definitions:
    """Every asset, check, job, schedule, sensor and resource of `project`'s code location over `home`."""
    mask_user_code_errors(home)
    parts, pools = Partitions.of(project), project.asset_pools()
    builds = Builds(project, home)  # what the automation conditions read the builds' manifests from
    # the beta and preview APIs this location uses are pinned with Dagster (pyproject.toml): their
    # warnings say nothing a user of eval-track can act on, from a checkout or a wheel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        everything = dg.Definitions(
            assets=[
                *capability_assets(pools, builds, parts),
                deterministic_suite,
                *judge_assets(pools, parts),
                *release_assets(builds, parts),
            ],
            jobs=JOB_DEFINITIONS,
            schedules=[nightly_schedule(project.settings.nightly_cron)],
            sensors=[build_sensor, release_block_sensor, automation_condition_sensor],
            resources=resources(home, project.root),
        )
        warnings.simplefilter("ignore")  # map_asset_specs is a preview feature in Dagster 1.13
        return everything.map_asset_specs(
            func=functools.partial(shared_settings, owners=project.settings.owners)
        )
