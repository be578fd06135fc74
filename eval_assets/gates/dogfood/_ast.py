"""Helpers for structural checks: walk Python sources and report `path:line` findings."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
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
    """(path relative to root, parsed module) for each file. A file that does not parse raises."""
    for path in paths:
        yield str(path.relative_to(root)), ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""
