"""The one partition writer's file write: a Parquet file made visible atomically, recorded first.

The rows are copied by DuckDB to a temp file next to the target, fsynced, recorded in the manifest
`partitions.sqlite` (path, dataset, partition, build, size, SHA-256) in state `writing`, renamed into
place, the directory fsynced, and the record marked `written` with the file's mtime. A reader sees
the old file or the new one, never a half-written one, and every visible file has a manifest row.
No other module writes Parquet (the gate `arch.one-partition-writer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from eval_assets.warehouse._datasets import Dataset, WarehouseError


def write_file(
    data: Path,
    manifest_path: Path,
    ds: Dataset,
    frame: pd.DataFrame,
    target: Path,
    partition: dict[str, str],
    run_id: str,
    written_at: int,
) -> None:
    """Write `frame` (already in the table's columns) to `target` under `data`, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.part"
    cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in ds.all_columns)
    con = duckdb.connect()
    try:
        con.register("frame", frame)
        quoted = str(tmp).replace("'", "''")
        con.execute(f"COPY (SELECT {cols} FROM frame) TO '{quoted}' (FORMAT parquet)")
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        raise WarehouseError(f"{ds.name}: could not write {target.name}: {exc}") from exc
    finally:
        con.close()
    fsync(tmp)
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
    stem = rel.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(stem) if stem.isdigit() else 0


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
