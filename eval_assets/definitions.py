"""The code location: everything under `defs/` is discovered and loaded, then the settings every asset
shares are applied once here, over every asset spec: owners (evaltrack.yaml `owners`), kinds (all are
Python; those that write a warehouse partition are Parquet too) and the freshness policies of the
nightly outputs that matter."""

import functools
import importlib
import sys
import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import dagster as dg

PACKAGE = Path(__file__).parent

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


@dg.definitions
def defs() -> dg.Definitions:
    # the beta and preview APIs this location uses are pinned with Dagster (pyproject.toml): their
    # warnings say nothing a user of eval-track can act on, from a checkout or a wheel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _loaded()


# modules of defs/ that read no project: kept when the others are imported again for another project
PROJECT_FREE = frozenset({"eval_assets.defs", "eval_assets.defs.failures", "eval_assets.defs.selections"})
_built_for: tuple[object, ...] | None = None


def _for_the_project_in_force() -> None:
    """defs/ modules read the project when imported (judge partitions, pools, owners, the schedule): a
    process that loads the location again for another project, or for the same one changed, imports
    them again, so it never serves the first project's partitions to the second."""
    global _built_for
    from eval_assets.config import ConfigError, project_at
    from eval_assets.home import project_root

    root = project_root()
    try:
        project = project_at(root)
    except ConfigError:  # defs/project.py, imported again below, refuses it with the validate lines
        key: tuple[object, ...] = (str(root), "invalid")
    else:
        key = (str(root), tuple(sorted(project.judges)), repr(project.settings))
    if _built_for is not None and key != _built_for:
        for name in [m for m in sys.modules if m.startswith("eval_assets.defs.") and m not in PROJECT_FREE]:
            del sys.modules[name]
    _built_for = key


def _loaded() -> dg.Definitions:
    # the project (evaltrack.yaml, judges/) is read here, when the location loads, never when this
    # module is imported: the CLI imports it before `--project` has set EVAL_PROJECT_ROOT
    _for_the_project_in_force()
    from eval_assets.defs.owners import OWNERS

    if (PACKAGE.parent / "pyproject.toml").is_file():
        # a checkout: [tool.dg] in pyproject.toml names the tree
        loaded = dg.load_from_defs_folder(path_within_project=PACKAGE)
    else:  # an installed wheel has no pyproject.toml: the same tree, named as pyproject.toml names it
        loaded = dg.ComponentTree(
            defs_module=importlib.import_module("eval_assets.defs"),
            project_root=PACKAGE.parent,
            code_location_name="eval_track",
        ).build_defs()
    # a module that imports another's asset lists it again: map each asset once, not each listing
    unique = list({id(a): a for a in loaded.assets or []}.values())
    everything = dg.Definitions(
        assets=unique,
        asset_checks=loaded.asset_checks,
        schedules=loaded.schedules,
        sensors=loaded.sensors,
        jobs=loaded.jobs,
        resources=loaded.resources,
        metadata=loaded.metadata,
    )
    with warnings.catch_warnings():  # map_asset_specs is a preview feature in Dagster 1.13
        warnings.simplefilter("ignore")
        return everything.map_asset_specs(func=functools.partial(shared_settings, owners=OWNERS))
