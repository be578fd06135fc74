"""The one partition writer's file write: a Parquet file made visible atomically, recorded first.

The rows come as one frame or as a stream of bounded chunks (each already checked against the
table's schema): each chunk is copied by DuckDB to a numbered temp part next to the target as it
arrives, so no more than one chunk is held in memory; the parts are then streamed, in order, into
one temp file (a single chunk is written there directly). That file is fsynced, recorded in the manifest
`partitions.sqlite` (path, dataset, partition, build, size, SHA-256) in state `writing`, renamed into
place, the directory fsynced, and the record marked `written` with the file's mtime. A reader sees
the old file or the new one, never a half-written one, and every visible file has a manifest row.
No other module writes Parquet (the gate `arch.one-partition-writer`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from eval_assets.warehouse._datasets import Dataset, WarehouseError

if TYPE_CHECKING:  # pandas is imported where frames are made: release-status reads none
    import pandas as pd


def write_file(
    data: Path,
    manifest_path: Path,
    ds: Dataset,
    frames: pd.DataFrame | Iterable[pd.DataFrame],
    target: Path,
    partition: dict[str, str],
    run_id: str,
    written_at: int,
) -> None:
    """Write `frames` (one frame, or chunks, already in the table's columns) to `target` under `data`,
    atomically: readers see the old file or the whole new one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.part"
    _parquet_file(ds, frames, tmp, target.name)
    rel = target.relative_to(data).as_posix()
    size, digest = tmp.stat().st_size, sha256(tmp)
    with Manifest(manifest_path) as mf:  # recorded before it is visible, so a listed file always has a row
        mf.execute(
            "INSERT OR REPLACE INTO partition_files (path, dataset, partition_json, build, run_id, "
            "written_at_ns, size, sha256, mtime_ns, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 'writing')",
            [
                rel,
                ds.name,
                json.dumps(partition, sort_keys=True),
                partition.get("build"),
                run_id,
                written_at,
                size,
                digest,
            ],
        )
    os.replace(tmp, target)
    fsync_dir(target.parent)
    with Manifest(manifest_path) as mf:
        mf.execute(
            "UPDATE partition_files SET state = 'written', mtime_ns = ? WHERE path = ? AND state = 'writing'",
            [target.stat().st_mtime_ns, rel],
        )


def _parquet_file(ds: Dataset, frames: pd.DataFrame | Iterable[pd.DataFrame], tmp: Path, name: str) -> None:
    """`frames` (one frame, or chunks) as one Parquet file `tmp`, every column cast to the table's
    type, fsynced; nothing is left at `tmp` when it fails (the error names `name`). Chunks go to numbered parts beside it first."""
    import pandas as pd  # paid only where frames are made (release-status makes none)

    chunks = iter([frames] if isinstance(frames, pd.DataFrame) else frames)
    cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in ds.all_columns)
    parts: list[Path] = []
    con = scratch_connection()
    try:
        first = next(chunks, None)
        if first is None:  # no chunk at all: an empty partition, still a file with the schema
            first = pd.DataFrame(columns=[c for c, _ in ds.all_columns])
        following = next(chunks, None)
        if following is None:  # one chunk: straight to the temp file
            _copy(con, first, cols, tmp)
        else:
            for n, frame in enumerate(itertools.chain([first, following], chunks)):
                part = tmp.parent / f"{tmp.name}.{n:06d}.chunk"
                parts.append(part)
                _copy(con, frame, cols, part)
                del frame
            listed = ", ".join(_read_quoted(p) for p in parts)
            con.execute("SET preserve_insertion_order = true")  # the chunks' rows, in their order
            con.execute(f"COPY (SELECT * FROM read_parquet([{listed}])) TO {_quoted(tmp)} (FORMAT parquet)")
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        raise WarehouseError(f"{ds.name}: could not write {name}: {exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        con.close()
        for part in parts:
            part.unlink(missing_ok=True)
    fsync(tmp)


def stage_file(
    ds: Dataset, frames: pd.DataFrame | Iterable[pd.DataFrame], tmp: Path, name: str
) -> tuple[int, str]:
    """The partition writer's file for a store that publishes it elsewhere (object storage): `frames`
    as the Parquet file `tmp`, fsynced; returns its size and SHA-256. The error names `name`."""
    _parquet_file(ds, frames, tmp, name)
    return tmp.stat().st_size, sha256(tmp)


# In-memory DuckDB databases kept open by this process, opened on first use: opening one costs far
# more than a connection to an open one, and the warehouse opens one per file written and per read
# (the demo: ~250). A forked child never touches its parent's (they are set aside, never
# closed, since closing one could wait on a lock held by a thread that did not survive the fork).
_SHARED: dict[object, duckdb.DuckDBPyConnection] = {}
_SHARED_PID = [os.getpid()]
_INHERITED: list[dict[object, duckdb.DuckDBPyConnection]] = []
_SHARED_LOCK = threading.Lock()
_MAX_SHARED_DATABASES = 8  # e.g. a test process making many homes: the oldest is let go


def shared_memory_database(
    key: object, setup: Iterable[str] = (), filesystem: object = None
) -> duckdb.DuckDBPyConnection:
    """A new connection to this process's in-memory DuckDB database named `key`, created on first
    use by registering the fsspec `filesystem` (if any) and running the statements `setup` on it (a
    failing statement raises and keeps nothing).
    Its external file cache is off, so every read reads the file as it is now, as a fresh database
    would. Close the connection when done; frames registered on it are its own."""
    with _SHARED_LOCK:
        if _SHARED_PID[0] != os.getpid():
            _INHERITED.append(dict(_SHARED))
            _SHARED.clear()
            _SHARED_PID[0] = os.getpid()
        base = _SHARED.get(key)
        if base is None:
            base = duckdb.connect()
            try:
                base.execute("SET enable_external_file_cache = false")
                if filesystem is not None:
                    base.register_filesystem(filesystem)
                for stmt in setup:
                    base.execute(stmt)
            except BaseException:
                base.close()
                raise
            if len(_SHARED) >= _MAX_SHARED_DATABASES:
                # let go of the oldest, never close it: closing would close connections still in use
                del _SHARED[next(iter(_SHARED))]
            _SHARED[key] = base
        return base.cursor()


def scratch_connection() -> duckdb.DuckDBPyConnection:
    """A new connection to the process's scratch in-memory database (no tables or views)."""
    return shared_memory_database("scratch")


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


_GLOB_CHARS = re.compile(r"([\[\]*?{}])")


def literal_path(path: Path | str) -> str:
    """`path` as DuckDB's file readers take it literally: glob characters (`[ ] * ? { }`) each in
    a bracket class of its own, so a home path like `/srv/eval[1]` never reads as a pattern."""
    return _GLOB_CHARS.sub(r"[\1]", str(path))


def _read_quoted(path: Path) -> str:
    """`path` as a quoted literal for DuckDB's file readers (which glob): glob characters escaped."""
    return "'" + literal_path(path).replace("'", "''") + "'"


def _copy(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, cols: str, to: Path) -> None:
    """One frame to one Parquet file, every column cast to the table's type."""
    con.register("frame", frame)
    try:
        con.execute(f"COPY (SELECT {cols} FROM frame) TO {_quoted(to)} (FORMAT parquet)")
    finally:
        con.unregister("frame")


MANIFEST_SCHEMA = """
CREATE TABLE IF NOT EXISTS partition_files (
    path TEXT PRIMARY KEY,      -- relative to the data directory
    dataset TEXT NOT NULL,
    partition_json TEXT NOT NULL,
    build TEXT,
    run_id TEXT NOT NULL,
    written_at_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    mtime_ns INTEGER,
    state TEXT NOT NULL CHECK (state IN ('writing', 'written', 'damaged')),
    reason TEXT,
    moved_to TEXT,
    noticed_at TEXT
)
"""
RETRUSTED_SCHEMA = """
CREATE TABLE IF NOT EXISTS retrusted_files (
    path TEXT PRIMARY KEY,      -- a file recorded by `warehouse verify --rebuild`, not by the writer
    retrusted_at TEXT NOT NULL
)
"""


@dataclass
class Entry:
    path: str
    dataset: str
    partition: dict[str, str]
    build: str | None
    run_id: str
    written_at_ns: int
    size: int
    sha256: str
    mtime_ns: int | None
    state: str
    reason: str | None = None
    moved_to: str | None = None
    noticed_at: str | None = None


class Manifest:
    """One short SQLite transaction on the manifest (WAL; waits for another process's write lock)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(self.path, timeout=30.0)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute(MANIFEST_SCHEMA)  # a warehouse used without `initialise()` gets it too
        self.con.execute(RETRUSTED_SCHEMA)
        return self.con

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if exc_type is None:
                self.con.commit()
            else:
                self.con.rollback()
        finally:
            self.con.close()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def written_at_of(rel: str) -> int:
    """The write time a file's name starts with (ns); 0 when it has none that fits a 64-bit integer
    (a stranger's name: it must still be recorded and set aside, never crash the check)."""
    stem = rel.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(stem) if stem.isdigit() and int(stem) < 2**63 else 0


def first_line(exc: object) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
