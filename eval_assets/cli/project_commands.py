"""`evaltrack validate` and `evaltrack judges record`: the project files only (no engine, no Dagster)."""

from __future__ import annotations

import argparse

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, group
from eval_assets.cli.common import print_problems, project_of, root_of
from eval_assets.config import ConfigError, load_build, load_project, misnamed_yaml, record_new_versions


def register(sub: Commands) -> None:
    command(
        sub,
        "validate",
        help="validate scenarios/, rubrics/, judges/ and example builds",
        run=cmd_validate,
        exits={
            exit_codes.OK: "valid",
            exit_codes.REFUSED: "problems, each printed as `path: field: message`",
        },
    )
    judges = group(sub, "judges", help="judge registry")
    command(
        judges,
        "record",
        help="record new judge versions' content hashes in judges/registry.yaml",
        run=cmd_judges_record,
        exits={
            exit_codes.OK: "recorded, or already up to date",
            exit_codes.REFUSED: "problems, each printed as `path: field: message` (nothing recorded)",
        },
    )


def cmd_validate(args: argparse.Namespace) -> int:
    from eval_assets.gates import validate_gates  # the gate registry

    try:
        project = project_of(args)
        problems: list = []
        problems += validate_gates(project.root)
        examples = project.root / "examples" / "builds"
        problems += misnamed_yaml(examples, project.root)
        for path in sorted(examples.glob("*.yaml")):
            try:
                load_build(path, project)  # a baseline must be one of the examples
            except ConfigError as exc:
                problems += exc.problems
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        return print_problems(exc)
    print(
        f"ok: {len(project.scenarios)} scenarios, {len(project.rubrics)} rubrics, "
        f"{len(project.judges)} judge versions ({len(project.active_judges)} active)"
    )
    return exit_codes.OK


def cmd_judges_record(args: argparse.Namespace) -> int:
    try:
        lines = record_new_versions(load_project(root_of(args), check_registry=False))
    except ConfigError as exc:
        return print_problems(exc)
    print("\n".join(lines) if lines else "judges/registry.yaml is up to date")
    return exit_codes.OK
