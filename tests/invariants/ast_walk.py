"""Helpers for structural checks: walk Python sources and report `path:line` findings."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path


def python_files(root: Path, package: str, exclude: Iterable[str] = ()) -> list[Path]:
    """Every `.py` file under `root/package`, minus the excluded paths (files or directories,
    relative to `root`), sorted."""
    excluded = [root / e for e in exclude]
    out = []
    for path in sorted((root / package).rglob("*.py")):
        if any(path == e or e in path.parents for e in excluded):
            continue
        out.append(path)
    return out


def parsed(paths: Iterable[Path], root: Path) -> Iterator[tuple[str, ast.Module]]:
    """(path relative to root, parsed module) for each file. A file that does not parse raises.

    The trees are shared between checks (several gates walk the same files, and the suite runs once
    per build in one process): a file is read every time, parsed again only when its text changed, and
    no check may modify a tree it is given."""
    for path in paths:
        yield str(path.relative_to(root)), _parse(path.read_text(encoding="utf-8"), str(path))


@lru_cache(maxsize=4096)
def _parse(source: str, filename: str) -> ast.Module:
    return ast.parse(source, filename=filename)


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""
