"""The loader's bad-input corpus (tests/bad_config): each case is refused with each expected line.

A test of eval-track's own loader, run in the test command (tests/test_own_invariants.py).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from eval_assets.config import ConfigError, load_build, load_project

BAD_CONFIG_BASE = "_base"
CONTROL_FILES = frozenset({"expected.txt", "remove.txt"})
BUILD_FILE = "build.yaml"


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


def bad_config_fails_as_expected(member: Path) -> list[str] | None:
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
    with tempfile.TemporaryDirectory(prefix="evaltrack-bad-config-") as tmp:
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
