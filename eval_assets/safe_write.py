"""The one way a command writes a file outside the warehouse: only over a regular file or a new path.

`write_files` stages every file to a temp name beside its target (created exclusively, mode 0666
less the umask), fsyncs it and renames it into place only when every target is still a regular file
or absent, checked with `lstat` (a symlink is refused, never followed): a FIFO, a device node, a
socket, a directory or a symlink at a target is refused naming it, and nothing is written. On any
failure every temp file is removed, so none is left beside a target. (The partition writer,
`warehouse._writer`, is the warehouse's own.)
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnsafeTarget(OSError):
    """A target that is neither a regular file nor a new path; the message names it."""


def unsafe_kind(path: Path) -> str | None:
    """What `path` is when it is neither absent nor a regular file (not following a symlink)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def check_target(path: Path) -> None:
    """Raise UnsafeTarget when `path` exists and is not a regular file."""
    if (kind := unsafe_kind(path)) is not None:
        raise UnsafeTarget(f"{path}: is {kind}, not a regular file; nothing written")


def write_files(files: Sequence[tuple[Path, str | bytes]]) -> list[Path]:
    """Write each (path, text or bytes) atomically, all or none (module docstring); returns the paths."""
    for path, _ in files:
        check_target(path)
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as out:
                out.write(data.encode("utf-8") if isinstance(data, str) else data)
                out.flush()
                os.fsync(out.fileno())
        for _, path in staged:  # again just before the renames: a target made unsafe meanwhile
            check_target(path)
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [path for path, _ in files]


def write_file(path: Path, data: str | bytes) -> Path:
    """`write_files` of one file."""
    write_files([(path, data)])
    return path
