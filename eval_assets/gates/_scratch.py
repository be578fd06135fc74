"""Throwaway places for the gates: scratch directories for the gates that build a throwaway project
or home (case runs)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MEMORY = Path("/dev/shm")


def scratch(prefix: str, memory: Path = MEMORY) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory, removed on exit, on memory-backed storage (`memory`) where the machine
    has it writable and `TMPDIR` does not name another place; else the system's temporary directory.

    What these gates write is thrown away as soon as they have read it back, yet the journal and the
    partition writer fsync every commit and file (their durability is what they promise a real home):
    on a disk each fsync waits for it, a large share of a build's suite."""
    usable = memory.is_dir() and os.access(memory, os.W_OK | os.X_OK) and not os.environ.get("TMPDIR")
    return tempfile.TemporaryDirectory(prefix=prefix, dir=str(memory) if usable else None)
