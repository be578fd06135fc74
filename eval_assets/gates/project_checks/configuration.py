"""Corpus procedures of docs/specs/configuration.md: the project's scenarios and builds load.

Each procedure takes one corpus member and the gate context and returns None (accepted) or the
reasons it is not.
"""

from __future__ import annotations

from pathlib import Path

from eval_assets.config import ConfigError, load_build
from eval_assets.gates._outcome import GateContext


def _relative(path: Path, root: Path) -> str:
    return str(path.resolve().relative_to(root))


def scenario_validates(member: Path, ctx: GateContext) -> list[str] | None:
    """The scenario file loads with the project: the same validation `evaltrack validate` runs
    (fields, types, and references such as its judge)."""
    shown = _relative(member, ctx.root)
    try:
        project = ctx.project()
    except ConfigError as exc:
        mine = [str(p) for p in exc.problems if p.path == shown]
        return mine or None  # the project is invalid elsewhere; this file has no problem of its own
    loaded = {
        str(Path(p).resolve().relative_to(ctx.root))
        for k, p in project.sources.items()
        if k.startswith("scenario")
    }
    return None if shown in loaded else [f"{shown} was not loaded as a scenario"]


def example_build_validates(member: Path, ctx: GateContext) -> list[str] | None:
    """The example build manifest loads against the shipped project (what `evaltrack build add` checks)."""
    try:
        load_build(member, ctx.project())
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return None
