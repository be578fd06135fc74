#!/usr/bin/env python3
"""Assemble the code-location image's build context (what `docker build .` would send) and check it,
with no Docker daemon and no registry:

    .venv/bin/python scripts/image_context.py [--tar OUT.tar]

The context is the checkout minus `.dockerignore`; the checks read the Dockerfile against it: the base
image is pinned by version, every COPY source is in the context, dependencies come only from the lock
files (and those pin dagster-k8s beside dagster-postgres at the locked Dagster release), the code is
byte-compiled, the image runs as a numeric non-root user, and its command serves the code location the
project declares (`[tool.dagster] module_name`). No runtime state, local environment or git data is in
the context. Exit 0 when every check holds, 1 otherwise (each problem on its own line).
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shlex
import sys
import tarfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = (".git", ".venv", ".eval_home", "__pycache__", ".hypothesis", ".mutation", "mutants")


def ignore_patterns(root: Path) -> list[str]:
    path = root / ".dockerignore"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def _ignored(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        for prefix in prefixes:
            if fnmatch.fnmatch(prefix, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatch(prefix.rsplit("/", 1)[-1], bare)
            ):
                return True
    return False


def context_files(root: Path = ROOT) -> list[str]:
    """Every file of the build context, relative to `root`, sorted (directories ignored whole are not entered)."""
    patterns = ignore_patterns(root)
    out: list[str] = []
    stack = [root]
    while stack:
        here = stack.pop()
        for entry in sorted(here.iterdir()):
            rel = entry.relative_to(root).as_posix()
            if _ignored(rel, patterns):
                continue
            if entry.is_dir() and not entry.is_symlink():
                stack.append(entry)
            elif entry.is_file():
                out.append(rel)
    return sorted(out)


def write_tar(out: Path, root: Path = ROOT) -> int:
    """The context as a tar (as `docker build` sends it); returns the number of files."""
    files = context_files(root)
    with tarfile.open(out, "w") as tar:
        for rel in files:
            tar.add(root / rel, arcname=rel, recursive=False)
    return len(files)


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", dockerfile)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _locked(lock: str) -> dict[str, str]:
    pins = {}
    for line in lock.splitlines():
        found = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if found:
            pins[found[1].lower()] = found[2]
    return pins


def check_context(root: Path = ROOT) -> list[str]:
    """Problems with the Dockerfile and its context; empty when the image's context is sound."""
    problems: list[str] = []
    files = set(context_files(root))
    dirs = {str(Path(f).parent) for f in files} | {p for f in files for p in [f.split("/")[0]]}
    for rel in files:
        if any(part in FORBIDDEN for part in rel.split("/")):
            problems.append(f"context holds {rel} (runtime state, local environment or git data)")
    if "Dockerfile" not in files:
        return [*problems, "Dockerfile: missing from the context"]
    steps = _instructions((root / "Dockerfile").read_text())
    bases = [rest for word, rest in steps if word == "FROM"]
    if len(bases) != 1 or not re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", bases[0]):
        problems.append(f"Dockerfile FROM: expected one base image pinned by version, got {bases}")
    for word, rest in steps:
        if word != "COPY":
            continue
        args = [a for a in shlex.split(rest) if not a.startswith("--")]
        for source in args[:-1]:
            if source not in files and source not in dirs:
                problems.append(f"Dockerfile COPY {source}: not in the build context")
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    locks = re.findall(r"requirements[\w.-]*\.lock", runs)
    if "uv pip sync" not in runs or not locks:
        problems.append(
            "Dockerfile RUN: dependencies must be installed with `uv pip sync` from the lock files"
        )
    for name in locks:
        if name not in files:
            problems.append(f"Dockerfile: lock file {name} is not in the context")
    for spec in re.findall(r"pip install ([^&]*)", runs):
        named = [a for a in shlex.split(spec) if not a.startswith("-") and a not in (".",) and "/" not in a]
        loose = [a for a in named if "==" not in a]
        if loose or ("-e" in spec and "--no-deps" not in spec):
            problems.append(
                f"Dockerfile RUN pip install {spec.strip()}: only pinned tools, or the project with --no-deps"
            )
    if "--compile-bytecode" not in runs or "compileall" not in runs:
        problems.append(
            "Dockerfile: dependencies (--compile-bytecode) and eval_assets (compileall) must be byte-compiled"
        )
    users = [rest for word, rest in steps if word == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        problems.append(f"Dockerfile USER: expected a numeric non-root user last, got {users}")
    module = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    commands = [rest for word, rest in steps if word == "CMD"]
    if not commands or module not in commands[-1]:
        problems.append(f"Dockerfile CMD: must serve the code location {module}")
    pins: dict[str, str] = {}
    for name in locks:
        if name in files:
            for package, version in _locked((root / name).read_text()).items():
                if pins.setdefault(package, version) != version:
                    problems.append(
                        f"{name}: {package}=={version} differs from another lock's {pins[package]}"
                    )
    if pins.get("dagster-k8s") is None:
        problems.append("the image's lock files do not pin dagster-k8s")
    elif pins.get("dagster-k8s") != pins.get("dagster-postgres"):
        problems.append(
            f"dagster-k8s {pins.get('dagster-k8s')} and dagster-postgres {pins.get('dagster-postgres')}: "
            "not the same integration release"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tar", type=Path, help="also write the context as a tar here")
    args = parser.parse_args(argv)
    problems = check_context()
    for problem in problems:
        print(problem)
    files = len(context_files())
    if args.tar:
        write_tar(args.tar)
    print(
        f"image context: {files} files, {len(problems)} problem(s)"
        + (f", tar: {args.tar}" if args.tar else "")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
