"""Corpus procedures of docs/specs/configuration.md: the loader accepts what ships, rejects what is bad.

Each procedure takes one corpus member and the gate context and returns None (accepted) or the
reasons it is not.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from eval_assets.config import ConfigError, load_build, load_project
from eval_assets.gates._outcome import GateContext
from eval_assets.gates._scratch import scratch

BAD_CONFIG_BASE = "_base"
CONTROL_FILES = frozenset({"expected.txt", "remove.txt"})
BUILD_FILE = "build.yaml"


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


def assemble_cases(base: Path, cases: Sequence[Path], dest: Path) -> Path:
    """Bad-config cases as one project: `base` copied to `dest`, then each case in turn, its files
    over it (all but expected.txt and remove.txt) and the paths its remove.txt lists deleted."""
    shutil.copytree(base, dest)
    for case in cases:
        for src in sorted(case.rglob("*")):
            rel = src.relative_to(case)
            if src.is_file() and str(rel) not in CONTROL_FILES:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest / rel)
        remove = case / "remove.txt"
        if remove.exists():
            for line in remove.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    (dest / line.strip()).unlink()
    return dest


def _assemble(case: Path, dest: Path) -> Path:
    """The bad-config case as a project: the base, the case's files over it, remove.txt applied."""
    return assemble_cases(case.parent / BAD_CONFIG_BASE, [case], dest)


def bad_config_fails_as_expected(member: Path, ctx: GateContext) -> list[str] | None:
    """The bad-config case (tests/bad_config/README.md) is refused with each of its expected lines.

    A project case must make `load_project` raise; a build case (with build.yaml) must load as a
    project and make `load_build` raise. Each expected line must equal one printed line (the
    manifest shown as `build.yaml`); extra printed lines are allowed.
    """
    expected_file = member / "expected.txt"
    if not expected_file.is_file():
        return ["no expected.txt"]
    expected = [
        line
        for line in expected_file.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    if not expected:
        return ["expected.txt lists no problem line"]
    with scratch("evaltrack-bad-config-") as tmp:
        root = _assemble(member, Path(tmp) / "project")
        try:
            project = load_project(root)
            if not (root / BUILD_FILE).exists():
                return ["the loader accepted it"]
            load_build(root / BUILD_FILE, project)
        except ConfigError as exc:
            printed = [str(p).replace(f"{root / BUILD_FILE}:", f"{BUILD_FILE}:", 1) for p in exc.problems]
        else:
            return ["the loader accepted the build manifest"]
    missing = [line for line in expected if line not in printed]
    if missing:
        return [f"expected line not printed: {line}" for line in missing] + [f"printed: {p}" for p in printed]
    return None


def example_build_validates(member: Path, ctx: GateContext) -> list[str] | None:
    """The example build manifest loads against the shipped project (what `evaltrack build add` checks)."""
    try:
        load_build(member, ctx.project())
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return None
