"""The project's files: what the secret scan reads and the no-network record fingerprints."""

from __future__ import annotations

import subprocess
from pathlib import Path


def tracked_files(root: Path) -> list[Path]:
    """Every file git tracks under `root` (`git ls-files`). Raises RuntimeError when git cannot list them."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"git ls-files failed in {root}: {exc}") from exc
    return [root / name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]


UNTRACKED_DIRS = frozenset(
    {".git", ".venv", ".eval_home", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
)


def _all_files(root: Path) -> list[Path]:
    """Every file under `root` but virtual environments, EVAL_HOME and caches."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not UNTRACKED_DIRS.intersection(p.relative_to(root).parts[:-1])
    )


def project_files(root: Path) -> tuple[list[Path], str]:
    """The project's files and how they were listed: `git ls-files` in a git work tree, else every
    file under `root` but virtual environments, EVAL_HOME and caches."""
    try:
        return tracked_files(root), "tracked"
    except RuntimeError:  # not a git work tree (an unpacked release, a copy): every file under root
        return _all_files(root), "(no git work tree: every file under the root)"
