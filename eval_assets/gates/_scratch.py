"""Throwaway places for the gates: scratch directories for the gates that build a throwaway project
or home (the canary's materialization, the bad-config cases, case runs), and fresh interpreters for the
work a gate does outside this process (the import probe, the property draws started ahead)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

MEMORY = Path("/dev/shm")


def scratch(prefix: str, memory: Path = MEMORY) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory, removed on exit, on memory-backed storage (`memory`) where the machine
    has it writable and `TMPDIR` does not name another place; else the system's temporary directory.

    What these gates write is thrown away as soon as they have read it back, yet the journal and the
    partition writer fsync every commit and file (their durability is what they promise a real home):
    on a disk each fsync waits for it, 2-4 s of a build's suite on this project's machines."""
    usable = memory.is_dir() and os.access(memory, os.W_OK | os.X_OK) and not os.environ.get("TMPDIR")
    return tempfile.TemporaryDirectory(prefix=prefix, dir=str(memory) if usable else None)


def fresh_interpreter(
    code: str, args: Sequence[str], cwd: Path, *, check: bool
) -> subprocess.CompletedProcess[str]:
    """`python -c code *args` in a new interpreter of this environment, in `cwd`, with this process's
    environment variables but PYTHONPATH (the code puts the package it means first on its sys.path),
    output captured as text, ten minutes at most; `check` raises on a non-zero exit."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
        check=check,
    )
