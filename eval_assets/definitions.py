"""The code location: everything under `defs/` is discovered and loaded."""

import importlib
from pathlib import Path

import dagster as dg

PACKAGE = Path(__file__).parent


@dg.definitions
def defs() -> dg.Definitions:
    if (PACKAGE.parent / "pyproject.toml").is_file():  # a checkout: [tool.dg] in pyproject.toml names the tree
        return dg.load_from_defs_folder(path_within_project=PACKAGE)
    # an installed wheel has no pyproject.toml: the same tree, named as pyproject.toml names it
    return dg.ComponentTree(
        defs_module=importlib.import_module("eval_assets.defs"),
        project_root=PACKAGE.parent,
        code_location_name="eval_track",
    ).build_defs()
