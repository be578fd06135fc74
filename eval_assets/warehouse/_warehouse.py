"""The warehouse: Parquet partitions (the one partition writer) and the DuckDB catalog of views.

Result tables are Parquet files under `<home>/warehouse/data/<dataset>/<key>=<value>/...`, one file per
materialization of a partition, written to a temp name, fsynced and renamed into place, tagged with the
run id. The `<dataset>` view picks the newest file per partition; `<dataset>_history` shows them all.
`warehouse.duckdb` holds only views (absolute paths), is rebuilt in a temp file and renamed, and is
never opened read-write by a run, so analysts holding it read-only never block a writer.

Damage: the partition writer records every file it writes in the manifest
`partitions.sqlite` (path, dataset, partition, build, size, SHA-256, mtime) before renaming it into
place. Every read through `connect()`/`query()` first checks the files against it: a file that is
missing, whose size changed, whose content no longer has its hash, that DuckDB cannot read, or that
the partition writer never wrote is *damaged*: it is moved (never deleted) to
`<home>/warehouse/quarantine/` with a note naming file, table, build and reason, and marked damaged in
the manifest. In its place the writer puts a *tombstone*: a one-row file with the damaged file's
partition and `written_at` and run_id `quarantined:<file>`. The views drop tombstone rows, and a
tombstone that is the newest file of its partition makes the partition empty, so a damaged current
file never lets an older one pass for current. Everything else reads on. `damage(build)` lists the
damage that no newer file of the same partition has replaced: `release-status` exits 4 on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from eval_assets.warehouse._datasets import DATASETS, Dataset, WarehouseError, check_rows
from eval_assets.warehouse._views import TOMBSTONE_PREFIX, view_sql
from eval_assets.warehouse._writer import (
    MANIFEST_SCHEMA,
    Entry,
    Manifest,
    first_line,
    fsync,
    literal_path,
    scratch_connection,
    sha256,
    shared_memory_database,
    write_file,
    written_at_of,
)

if TYPE_CHECKING:  # pandas is imported where frames are made: release-status reads none
    import pandas as pd


@dataclass(frozen=True)
class Damage:
    """A damaged partition file, as the manifest records it."""

    file: str  # where it was, relative to the data directory
    table: str
    build: str | None
    partition: dict[str, str]
    reason: str
    moved_to: str | None  # None: it was missing
    noticed_at: str
    resolved: bool = False  # a newer file of the same partition has been written since

    def text(self) -> str:
        where = f"moved to {self.moved_to}" if self.moved_to else "nothing left to move"
        return (
            f"damaged warehouse file {self.file} (table {self.table}, build {self.build or '-'}): "
            f"{self.reason}; {where}"
        )


class Warehouse:
    """Parquet datasets under `root/data` and the catalog `root/warehouse.duckdb`."""

    def __init__(self, root: Path, datasets: Mapping[str, Dataset] = DATASETS):
        self.root = root.resolve()
        self.data = self.root / "data"
        self.catalog_path = self.root / "warehouse.duckdb"
        self.manifest_path = self.root / "partitions.sqlite"
        self.quarantine = self.root / "quarantine"
        self.datasets = dict(datasets)

    @property
    def location(self) -> str:
        """Where the data files are, for messages."""
        return str(self.data)

    @property
    def manifest_location(self) -> str:
        """Where the record of every file is, for messages."""
        return str(self.manifest_path)

    @property
    def for_analysts(self) -> str:
        """What an analyst opens to query it."""
        return str(self.catalog_path)

    # --- initialisation ------------------------------------------------------------------------

    def initialise(self) -> None:
        """Create the dataset directories, a schema-only file per dataset, and the catalog if stale.

        Raises ManifestError when data files exist but the partition manifest is missing or damaged:
        nothing is re-trusted silently (`rebuild_manifest` is the explicit way back)."""
        self.require_manifest()
        for ds in self.datasets.values():
            self._ensure_schema_file(ds)
        if not self._catalog_current():
            self._build_catalog()

    def view_sql(self) -> list[str]:
        """CREATE VIEW statements for every dataset (`<name>_history`, the current `<name>`) and the
        derived views, from the SQL files under `views/`."""
        return view_sql(self.data, self.datasets)

    def _catalog_current(self) -> bool:
        if not self.catalog_path.exists():
            return False
        try:
            con = duckdb.connect(str(self.catalog_path), read_only=True)
            try:
                row = con.execute("SELECT version, data_root FROM _catalog").fetchone()
            finally:
                con.close()
        except duckdb.Error:
            return False
        return row == (self._catalog_version(), str(self.data))

    def _catalog_version(self) -> str:
        """Changes whenever any view definition changes, so a stale catalog is rebuilt."""
        return hashlib.sha256("\n".join(self.view_sql()).encode()).hexdigest()[:16]

    def _build_catalog(self) -> None:
        """Build the catalog in a temp file and rename it over the old one (readers keep the old inode)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for _ in range(_MAX_QUARANTINES_PER_QUERY):
            try:
                return self._write_catalog()
            except duckdb.Error as exc:  # a damaged file fails the views' binding: set it aside, go on
                if not self._quarantine_named_in(exc):
                    raise
        raise WarehouseError(f"more than {_MAX_QUARANTINES_PER_QUERY} damaged files met building the catalog")

    def _write_catalog(self) -> None:
        tmp = self.root / f".warehouse.{os.getpid()}.{time.time_ns()}.duckdb.tmp"
        con = duckdb.connect(str(tmp))
        try:
            for stmt in self.view_sql():
                con.execute(stmt)
            con.execute(
                "CREATE TABLE _catalog AS SELECT ? AS version, ? AS data_root",
                [self._catalog_version(), str(self.data)],
            )
            con.execute("CHECKPOINT")
        except BaseException:
            con.close()
            tmp.unlink(missing_ok=True)
            raise
        else:
            con.close()
        fsync(tmp)
        os.replace(tmp, self.catalog_path)
        wal = tmp.with_name(tmp.name + ".wal")
        if wal.exists():
            wal.unlink()

    # --- the one partition writer --------------------------------------------------------------

    def write_partition(
        self,
        dataset: str,
        partition: Mapping[str, str],
        rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
        run_id: str,
    ) -> Path:
        """Write one partition's rows as a new file; readers see the old file or the new, never a mix.

        Every row must carry the partition's key values. The file is recorded in the manifest (size,
        hash) before it is renamed into place. Returns the path written.
        """
        return self.write_partition_chunks(dataset, partition, [rows], run_id)

    def write_partition_chunks(
        self,
        dataset: str,
        partition: Mapping[str, str],
        chunks: Iterable[Sequence[Mapping[str, Any]] | pd.DataFrame],
        run_id: str,
    ) -> Path:
        """`write_partition` for rows that come in bounded chunks (an iterator of row batches): each
        chunk is checked against the table's schema and written out before the next is asked for, so
        memory stays bounded by a chunk; the partition still appears whole or not at all."""
        if run_id.startswith(TOMBSTONE_PREFIX):
            raise WarehouseError(f"{dataset}: run ids starting {TOMBSTONE_PREFIX!r} are reserved")
        return self._write_partition(dataset, partition, chunks, run_id)

    def _write_partition(
        self,
        dataset: str,
        partition: Mapping[str, str],
        chunks: Iterable[Sequence[Mapping[str, Any]] | pd.DataFrame],
        run_id: str,
        written_at: int | None = None,
    ) -> Path:
        import pandas as pd  # paid only where frames are made (release-status makes none)

        ds = self.datasets[dataset]
        if set(partition) != set(ds.partition_by):
            raise WarehouseError(f"{dataset}: partition must be {ds.partition_by}, got {tuple(partition)}")
        tombstone = written_at is not None
        stamp = written_at if written_at is not None else time.time_ns()

        def frames() -> Iterator[pd.DataFrame]:
            for rows in chunks:
                if tombstone:  # a tombstone carries only its partition's key values (module docstring)
                    frame = pd.DataFrame(list(rows)).reindex(columns=[c for c, _ in ds.columns])
                    frame = frame.assign(**{k: v for k, v in partition.items()})
                else:
                    frame = check_rows(ds, partition, rows)
                frame["run_id"] = run_id
                frame["written_at"] = pd.Timestamp(stamp, unit="ns")
                yield frame

        directory = self.data / dataset
        for key in ds.partition_by:
            directory = directory / f"{key}={partition[key]}"
        name = f"{stamp}-quarantined-{time.time_ns()}" if tombstone else f"{stamp}-{run_id}"
        target = directory / f"{name}.parquet"
        self._write_file(ds, frames(), target, dict(partition), run_id, stamp)
        return target

    def _write_file(
        self,
        ds: Dataset,
        frames: pd.DataFrame | Iterable[pd.DataFrame],
        target: Path,
        partition: dict[str, str] | None = None,
        run_id: str = "",
        written_at: int = 0,
    ) -> None:
        write_file(self.data, self.manifest_path, ds, frames, target, partition or {}, run_id, written_at)

    # --- reading (an in-memory connection over the same views; never the catalog file) ---------

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every view defined, over verified files (`verify`)."""
        return self._with_quarantine(lambda con: con)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run `sql` over the views. A file DuckDB cannot read is quarantined and the query run again."""
        return self._read(sql, params, lambda cursor: cursor.df())

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """`query`'s answer as a list of dicts of Python values (NULL as None), without a DataFrame:
        for a caller that walks the rows one by one, which pandas would only slow down."""

        def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        return self._read(sql, params, dicts)

    def _read(
        self, sql: str, params: Sequence[Any] | None, fetch: Callable[[duckdb.DuckDBPyConnection], Any]
    ) -> Any:
        """`fetch` of `sql`'s answer over the views (`_with_quarantine`), the connection closed after."""

        def run(con: duckdb.DuckDBPyConnection) -> Any:
            try:
                return fetch(con.execute(sql, params or []))
            finally:
                con.close()

        return self._with_quarantine(run)

    def _with_quarantine(self, use: Any) -> Any:
        """`use(connection with the views)`; a data file DuckDB names in an error is quarantined, and
        the whole thing done again (at most _MAX_QUARANTINES_PER_QUERY times)."""
        for _ in range(_MAX_QUARANTINES_PER_QUERY):
            self.verify()
            con = None
            try:
                # the views live in one in-memory database per process and view text, made once
                # (defining them binds every table's files, too costly per read); a view binds its files
                # again at every query, so each read sees the files as they are now
                con = self._views_connection(tuple(self.view_sql()))
                return use(con)
            except duckdb.Error as exc:
                if con is not None:
                    con.close()
                if not self._quarantine_named_in(exc):
                    raise
        raise WarehouseError(f"more than {_MAX_QUARANTINES_PER_QUERY} damaged files met by one read")

    def _views_connection(self, statements: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
        return shared_memory_database(("views", statements), statements)

    def _quarantine_named_in(self, exc: duckdb.Error) -> bool:
        """Set aside every data file a DuckDB error names (a damaged file fails a read or the views'
        binding); False when it names none, so the caller re-raises it."""
        bad = self._files_named_in(str(exc))
        for rel in bad:
            self._quarantine(rel, f"unreadable: {first_line(exc)}")
        return bool(bad)

    # --- damage (see the module docstring) -----------------------------------------------------

    def verify(self, *, full: bool = False) -> list[Damage]:
        """Check every data file against the manifest; quarantine what is damaged. Returns the new damage.

        A file whose size and mtime are as written is re-hashed only when `full` (every read that an
        answer rests on re-hashes its own files in full: `rehash`).

        Files are listed before the manifest is read (a listed file's row, written before its rename, is
        then always seen); a row whose file was not listed is looked up again before it counts as missing.
        """
        if not self.manifest_path.exists():
            self.initialise()  # raises ManifestError unless the warehouse holds no data yet
        listed = {p.relative_to(self.data).as_posix() for p in self.data.rglob("*.parquet")}
        entries = {e.path: e for e in self._entries()}
        found = []
        for rel in sorted(listed - set(entries)):
            found += self._quarantine(rel, "not written by the partition writer (no manifest entry)")
        for rel, entry in sorted(entries.items()):
            if entry.state == "damaged":
                continue
            path = self.data / rel
            try:
                stat = path.stat()
            except FileNotFoundError:
                if entry.state == "written":
                    found += self._quarantine(rel, "missing: the file was deleted")
                continue
            if stat.st_size != entry.size:
                found += self._quarantine(rel, f"size is {stat.st_size} bytes, {entry.size} were written")
            elif full or stat.st_mtime_ns != entry.mtime_ns:  # also `writing`: renamed, never marked written
                if sha256(path) != entry.sha256:
                    found += self._quarantine(rel, "content changed since it was written (SHA-256 differs)")
                else:
                    with self._manifest() as mf:
                        mf.execute(
                            "UPDATE partition_files SET mtime_ns = ? WHERE path = ?", [stat.st_mtime_ns, rel]
                        )
        return found

    def damage(self, build: str | None = None, *, include_resolved: bool = False) -> list[Damage]:
        """Recorded damage (of one build's partitions, if given), oldest first. Unresolved unless a newer
        file of the same partition (not a tombstone) was written since."""
        entries = self._entries()
        newest: dict[tuple[str, str], int] = {}
        for e in entries:
            if e.state != "damaged" and not e.run_id.startswith(TOMBSTONE_PREFIX):
                key = (e.dataset, json.dumps(e.partition, sort_keys=True))
                newest[key] = max(newest.get(key, 0), e.written_at_ns)
        out = []
        for e in sorted(entries, key=lambda e: (e.noticed_at or "", e.path)):
            if e.state != "damaged" or (build is not None and e.build != build):
                continue
            resolved = newest.get((e.dataset, json.dumps(e.partition, sort_keys=True)), 0) > e.written_at_ns
            if resolved and not include_resolved:
                continue
            out.append(
                Damage(
                    e.path,
                    e.dataset,
                    e.build,
                    e.partition,
                    e.reason or "",
                    e.moved_to,
                    e.noticed_at or "",
                    resolved,
                )
            )
        return out

    def _quarantine(self, rel: str, reason: str) -> list[Damage]:
        """Move `rel` aside (never delete it), mark it damaged and tombstone its partition. Returns the
        damage, or nothing when another process already did it."""
        path = self.data / rel
        entry = next((e for e in self._entries() if e.path == rel), None)
        if entry is None:  # not the writer's: recorded now, so it is named like any other damage
            dataset = rel.split("/", 1)[0]
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            entry = Entry(
                rel, dataset, parts, parts.get("build"), "", written_at_of(rel), -1, "", None, "written"
            )
            with self._manifest() as mf:
                mf.execute(
                    "INSERT OR IGNORE INTO partition_files (path, dataset, partition_json, build, run_id, "
                    "written_at_ns, size, sha256, state) VALUES (?, ?, ?, ?, '', ?, -1, '', 'written')",
                    [rel, dataset, json.dumps(parts, sort_keys=True), entry.build, entry.written_at_ns],
                )
        noticed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._manifest() as mf:  # one process claims it
            claimed = mf.execute(
                "UPDATE partition_files SET state = 'damaged', reason = ?, noticed_at = ? "
                "WHERE path = ? AND state <> 'damaged'",
                [reason, noticed, rel],
            ).rowcount
        if not claimed:
            return []
        target = self.quarantine / f"{time.time_ns()}" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, target)
            moved: str | None = str(target)
        except FileNotFoundError:
            moved = None
        note = {
            "file": str(path),
            "table": entry.dataset,
            "build": entry.build,
            "partition": entry.partition,
            "reason": reason,
            "noticed_at": noticed,
            "moved_to": moved,
        }
        notes = self.quarantine / "notes"
        notes.mkdir(parents=True, exist_ok=True)
        (notes / f"{time.time_ns()}-{rel.replace('/', '__')}.json").write_text(json.dumps(note, indent=2))
        with self._manifest() as mf:
            mf.execute("UPDATE partition_files SET moved_to = ? WHERE path = ?", [moved, rel])
        ds = self.datasets.get(entry.dataset)
        if ds is not None and rel.split("/")[1] == "_schema":
            self._ensure_schema_file(ds)
        elif ds is not None and set(entry.partition) == set(ds.partition_by):
            self._write_partition(
                ds.name,
                entry.partition,
                [[dict(entry.partition)]],
                TOMBSTONE_PREFIX + rel,
                entry.written_at_ns,
            )
        return [Damage(rel, entry.dataset, entry.build, entry.partition, reason, moved, noticed)]

    def _ensure_schema_file(self, ds: Dataset) -> None:
        import pandas as pd  # paid only where frames are made (release-status makes none)

        schema_file = self.data / ds.name / "_schema" / "empty.parquet"
        if not schema_file.exists():
            self._write_file(ds, pd.DataFrame(columns=[c for c, _ in ds.all_columns]), schema_file)

    def require_manifest(self) -> None:
        """The partition manifest exists and reads, or the warehouse holds no data file yet (then an
        empty manifest is made). Raises ManifestError naming it otherwise: every file's trust comes
        from it, so without it nothing is read (`rebuild_manifest` re-trusts explicitly)."""
        if not self.manifest_path.exists():
            stray = next(iter(self.data.rglob("*.parquet")), None) if self.data.is_dir() else None
            if stray is not None:
                raise ManifestError(
                    self.manifest_path, f"missing, while {stray.relative_to(self.data)} exists"
                )
        try:
            with self._manifest() as con:
                con.execute(MANIFEST_SCHEMA)
                con.execute("SELECT count(*) FROM partition_files").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ManifestError(self.manifest_path, f"damaged ({first_line(exc)})") from exc

    def manifest_healthy(self) -> bool:
        """Whether the partition manifest exists and reads (`require_manifest` passes)."""
        if not self.manifest_path.exists():
            return False
        try:
            self.require_manifest()
        except ManifestError:
            return False
        return True

    def rebuild_manifest(self) -> list[str]:
        """Re-trust every data file as it is now, only when the manifest is missing or damaged: it is
        moved aside (never deleted) and a new one records each file's size and SHA-256, and names it
        in `retrusted_files` (a decision file re-trusted is never current again: `evidence.check`); a
        file DuckDB cannot read is quarantined. Returns the files re-trusted. Raises ManifestHealthy
        when the manifest reads: a healthy manifest is never overridden (a stray file is damage)."""
        if self.manifest_healthy():
            raise ManifestHealthy(self.manifest_path)
        if self.manifest_path.exists():
            aside = self.quarantine / f"{time.time_ns()}-partitions.sqlite"
            aside.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.manifest_path, aside)
        for suffix in ("-wal", "-shm"):
            Path(str(self.manifest_path) + suffix).unlink(missing_ok=True)
        trusted = []
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for path in sorted(self.data.rglob("*.parquet")) if self.data.is_dir() else []:
            rel = path.relative_to(self.data).as_posix()
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            run_id = _run_id_of(rel)
            with self._manifest() as mf:
                mf.execute(
                    "INSERT OR REPLACE INTO retrusted_files (path, retrusted_at) VALUES (?, ?)", [rel, at]
                )
                mf.execute(
                    "INSERT OR IGNORE INTO partition_files (path, dataset, partition_json, build, run_id, "
                    "written_at_ns, size, sha256, mtime_ns, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'written')",
                    [
                        rel,
                        rel.split("/", 1)[0],
                        json.dumps(parts, sort_keys=True),
                        parts.get("build"),
                        run_id,
                        written_at_of(rel),
                        path.stat().st_size,
                        sha256(path),
                        path.stat().st_mtime_ns,
                    ],
                )
            con = scratch_connection()
            try:
                con.execute("SELECT count(*) FROM read_parquet(?)", [literal_path(path)]).fetchall()
                trusted.append(rel)
            except duckdb.Error as exc:
                self._quarantine(rel, f"unreadable: {first_line(exc)}")
            finally:
                con.close()
        self.initialise()
        return trusted

    # --- evidence: the files a decision read, hashed in full (no size or mtime shortcut) ---------

    def current_files(self, datasets: Iterable[str], builds: Iterable[str]) -> dict[tuple[str, str], Entry]:
        """The current file of every partition of `datasets` whose build is in `builds`, keyed by
        (dataset, partition JSON): what the `<dataset>` view reads (the newest file of the partition,
        tombstones included: a tombstone as the current file is a damaged partition)."""
        wanted, of = set(datasets), set(builds)
        current: dict[tuple[str, str], Entry] = {}
        for e in self._entries():
            if e.dataset not in wanted or e.build not in of or e.state == "damaged":
                continue
            if e.state == "writing" and not (self.data / e.path).exists():
                continue  # a write that never became visible
            key = (e.dataset, json.dumps(e.partition, sort_keys=True))
            held = current.get(key)
            if held is None or (e.written_at_ns, e.run_id) > (held.written_at_ns, held.run_id):
                current[key] = e
        return current

    def rehash(self, entries: Iterable[Entry]) -> list[Damage]:
        """Hash each file in full now and compare with what the writer recorded; a file that differs,
        is missing or is a tombstone is damage (quarantined, named). Returns the damage found."""
        found: list[Damage] = []
        for e in entries:
            if e.run_id.startswith(TOMBSTONE_PREFIX):
                found += self.damage(e.build)
                continue
            path = self.data / e.path
            try:
                digest = sha256(path)
            except FileNotFoundError:
                found += self._quarantine(e.path, "missing: the file was deleted")
                continue
            if digest != e.sha256:
                found += self._quarantine(e.path, "content changed since it was written (SHA-256 differs)")
        return found

    def retrusted(self, paths: Iterable[str]) -> set[str]:
        """Those of `paths` (relative to the data directory) that `rebuild_manifest` re-trusted
        rather than the partition writer recorded."""
        wanted = set(paths)
        with self._manifest() as mf:
            return {r[0] for r in mf.execute("SELECT path FROM retrusted_files").fetchall() if r[0] in wanted}

    def read_file(self, rel: str) -> list[dict[str, Any]]:
        """The rows of one data file (relative to the data directory), read from that file only: its
        own columns, never values taken from its directory names (a file copied into another
        partition still says whose it is)."""
        con = scratch_connection()
        try:
            cur = con.execute(
                "SELECT * FROM read_parquet(?, hive_partitioning = false)", [literal_path(self.data / rel)]
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            con.close()

    def _files_named_in(self, message: str) -> list[str]:
        root = str(self.data) + os.sep
        out = []
        for found in re.finditer(re.escape(root) + r"[^'\"\n*?]*?\.parquet", message):
            rel = found[0][len(root) :]
            if (self.data / rel).is_file():
                out.append(rel)
        return sorted(set(out))

    def _manifest(self) -> Manifest:
        return Manifest(self.manifest_path)

    def _entries(self) -> list[Entry]:
        try:
            with self._manifest() as mf:
                rows = mf.execute(
                    "SELECT path, dataset, partition_json, build, run_id, written_at_ns, size, sha256, "
                    "mtime_ns, state, reason, moved_to, noticed_at FROM partition_files"
                ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ManifestError(self.manifest_path, f"damaged ({first_line(exc)})") from exc
        return [
            Entry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12])
            for r in rows
        ]


_MAX_QUARANTINES_PER_QUERY = 20


class ManifestError(WarehouseError):
    """The partition manifest is missing or damaged: no file can be trusted until it is rebuilt."""

    def __init__(self, path: Path | str, what: str):
        self.path = path
        super().__init__(
            f"partition manifest {path} is {what}: no warehouse file is trusted without it; check the "
            "files, then re-trust them with `evaltrack warehouse verify --rebuild`"
        )


class ManifestHealthy(WarehouseError):
    """`rebuild_manifest` asked of a manifest that exists and reads: nothing is re-trusted."""

    def __init__(self, path: Path):
        self.path = path
        super().__init__(
            f"partition manifest {path} is healthy: nothing re-trusted (`--rebuild` re-trusts only when "
            "it is missing or damaged); a file it does not record is damage, set aside by `warehouse verify`"
        )


def _run_id_of(rel: str) -> str:
    stem = rel.rsplit("/", 1)[-1].removesuffix(".parquet")
    return stem.split("-", 1)[1] if "-" in stem else "rebuilt"
