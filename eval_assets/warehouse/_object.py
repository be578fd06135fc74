"""The warehouse on object storage: Parquet objects in an S3-compatible bucket, their catalog in PostgreSQL.

The same partition writer, views, damage and quarantine as the local directory (`_warehouse`), with
the two things that need a shared POSIX filesystem there replaced:

- **files** are objects under `s3://bucket/prefix/data/<dataset>/<key>=<value>/...`, read and written
  through pyarrow's `S3FileSystem` (credentials, region and endpoint from the AWS environment or the
  provider's default chain) and read by DuckDB through the same filesystem registered with it (fsspec);
- **the manifest** is the catalog in PostgreSQL (`warehouse_files`: every object's key, table,
  partition, build, run id, size, SHA-256, state; `warehouse_current`: which object makes each
  partition current).

Publishing a partition: the Parquet file is written to a local staging file, its key claimed in the
catalog (`writing`; a key is never reused: the claim of a used one fails), the object uploaded, then
one catalog transaction marks it `written` and makes it current (under the partition's advisory lock,
the newest `(written_at, run_id)` wins, as in the views). Readers take one snapshot of the catalog and
read only the `written` objects it names, so a half-published partition is never seen.

Damage is as for the local directory: an object missing, of another size, whose content no longer
has its hash, that DuckDB cannot read, or that is not in the catalog, is moved (copy, then delete of
the original) under `prefix/quarantine/<ns>/`, a note beside it under `prefix/quarantine/notes/`,
marked damaged and tombstoned, in one catalog transaction.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from eval_assets.warehouse._datasets import DATASETS, Dataset, WarehouseError
from eval_assets.warehouse._views import TOMBSTONE_PREFIX
from eval_assets.warehouse._views import view_sql as make_view_sql
from eval_assets.warehouse._warehouse import Damage, ManifestError, Warehouse
from eval_assets.warehouse._writer import (
    Entry,
    first_line,
    literal_path,
    sha256,
    shared_memory_database,
    stage_file,
    written_at_of,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd
    from pyarrow import fs as pafs


CATALOG_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS warehouse_files (
        key TEXT PRIMARY KEY,           -- relative to <prefix>/data; never reused
        dataset TEXT NOT NULL,
        partition_json TEXT NOT NULL,
        build TEXT,
        run_id TEXT NOT NULL,
        written_at_ns BIGINT NOT NULL,
        size BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        mtime_ns BIGINT,
        state TEXT NOT NULL CHECK (state IN ('writing', 'written', 'damaged')),
        reason TEXT,
        moved_to TEXT,
        noticed_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS warehouse_current (
        dataset TEXT NOT NULL,
        partition_json TEXT NOT NULL,
        key TEXT NOT NULL REFERENCES warehouse_files (key),
        written_at_ns BIGINT NOT NULL,
        run_id TEXT NOT NULL,
        PRIMARY KEY (dataset, partition_json)
    )""",
)

_COLUMNS = (
    "key, dataset, partition_json, build, run_id, written_at_ns, size, sha256, mtime_ns, state, reason, "
    "moved_to, noticed_at"
)


_MAX_SNAPSHOTS = 20
_ENGINES: dict[tuple[int, str], Engine] = {}
_ENGINES_LOCK = threading.Lock()
_CHECKED: dict[str, dict[str, tuple[int, int]]] = {}  # cache directory -> its copies checked by this process


class _SnapshotChanged(Exception):
    """An object of the snapshot being read was just quarantined: read a new snapshot."""


def _entry(r: Sequence[Any]) -> Entry:
    return Entry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12])


class Bucket:
    """`s3://bucket/prefix` through pyarrow's S3FileSystem: keys are relative to the prefix."""

    def __init__(self, url: str):
        from pyarrow import fs as pafs

        found = re.fullmatch(r"s3://([^/]+)(?:/(.*))?", url.rstrip("/"))
        if not found:
            raise WarehouseError(f"warehouse url {url!r}: not s3://bucket/prefix")
        self.url = url.rstrip("/")
        self.base = found[1] + (f"/{found[2]}" if found[2] else "")
        options: dict[str, Any] = {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:  # an S3-compatible server (MinIO, Ceph, a test server); AWS itself needs none
            scheme, _, rest = endpoint.partition("://")
            options.update(endpoint_override=rest or scheme, scheme=scheme if rest else "https")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options["region"] = region
        self.fs: pafs.S3FileSystem = pafs.S3FileSystem(**options)
        self._duckdb_fs: Any = None

    def path(self, key: str) -> str:
        return f"{self.base}/{key}"

    def uri(self, key: str) -> str:
        return f"s3://{self.path(key)}"

    def put_file(self, local: Path, key: str) -> int | None:
        """Upload `local` as `key`; returns the object's mtime (ns) as the store reports it."""
        with local.open("rb") as src, self.fs.open_output_stream(self.path(key)) as out:
            for block in iter(lambda: src.read(8 << 20), b""):
                out.write(block)
        return self.stat(key)[1]

    def get_file(self, key: str, local: Path) -> None:
        """Download `key` to `local`; FileNotFoundError when there is no such object."""
        self.stat(key)
        with self.fs.open_input_stream(self.path(key)) as src, local.open("wb") as out:
            for block in iter(lambda: src.read(8 << 20), b""):
                out.write(block)

    def get_bytes(self, key: str) -> bytes:
        """The whole object `key` (a small one); FileNotFoundError when there is no such object."""
        self.stat(key)
        with self.fs.open_input_stream(self.path(key)) as src:
            return bytes(src.read())

    def put_bytes(self, key: str, data: bytes) -> None:
        with self.fs.open_output_stream(self.path(key)) as out:
            out.write(data)

    def stat(self, key: str) -> tuple[int, int | None]:
        """(size, mtime ns); FileNotFoundError when there is no such object."""
        from pyarrow import fs as pafs

        info = self.fs.get_file_info(self.path(key))
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(self.uri(key))
        return int(info.size), info.mtime_ns

    def sha256(self, key: str) -> str:
        digest = hashlib.sha256()
        try:
            with self.fs.open_input_stream(self.path(key)) as f:
                for block in iter(lambda: f.read(8 << 20), b""):
                    digest.update(block)
        except FileNotFoundError:
            raise
        except OSError as exc:  # pyarrow raises OSError for a missing object on some servers
            if "NoSuchKey" in str(exc) or "not found" in str(exc).lower():
                raise FileNotFoundError(self.uri(key)) from exc
            raise
        return digest.hexdigest()

    def listing(self, under: str) -> dict[str, tuple[int, int | None]]:
        """Every object under `under/` (key relative to it) with its (size, mtime ns)."""
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(self.path(under), recursive=True, allow_not_found=True)
        root = self.path(under) + "/"
        return {
            i.path[len(root) :]: (int(i.size), i.mtime_ns)
            for i in self.fs.get_file_info(selector)
            if i.type == pafs.FileType.File
        }

    def move(self, key: str, to: str) -> bool:
        """Move `key` to `to` (copy, then delete the original); False when `key` is not there."""
        try:
            self.stat(key)
        except FileNotFoundError:
            return False
        self.fs.move(self.path(key), self.path(to))
        return True

    def duckdb_filesystem(self) -> Any:
        """This bucket's filesystem as fsspec, for `DuckDBPyConnection.register_filesystem`; files
        opened for reading are `PositionalReads` (DuckDB reads one handle from several threads)."""
        if self._duckdb_fs is None:
            from fsspec.implementations.arrow import ArrowFSWrapper

            class S3(ArrowFSWrapper):  # type: ignore[misc]  # fsspec has no type hints
                protocol = "s3"

                def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
                    if mode != "rb":
                        return super()._open(path, mode, **kwargs)
                    return PositionalReads(self.fs.open_input_file(self._strip_protocol(path)), path)

            self._duckdb_fs = S3(self.fs)
        return self._duckdb_fs


class PositionalReads:
    """A read-only file over a pyarrow random-access file whose position is each thread's own.

    DuckDB's Python-filesystem bridge reads at an offset as `seek(offset)` then `read(n)` on one shared
    handle, from its async I/O threads at once (`async_threads`, Parquet prefetching), and the Python
    calls let other threads run between the two: with one shared position a thread reads from where
    another seeked (DuckDB: "Out of buffer", "Snappy decompression failure"). Here `seek` sets the
    calling thread's position and `read` is pyarrow's `read_at` from it (thread-safe), repeated until
    `n` bytes or the end: DuckDB copies whatever one call returns and never asks again."""

    def __init__(self, stream: Any, path: str):
        self._stream = stream
        self.path = path
        self.size = int(stream.size())
        self._position = threading.local()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.tell(), os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.path}: seek to {base + offset}, before the start")
        self._position.at = base + offset
        return int(self._position.at)

    def tell(self) -> int:
        return int(getattr(self._position, "at", 0))

    def read(self, n: int | None = -1) -> bytes:
        at = self.tell()
        want = max(0, self.size - at) if n is None or n < 0 else max(0, min(n, self.size - at))
        parts: list[bytes] = []
        got = 0
        while got < want:
            part = bytes(self._stream.read_at(want - got, at + got))
            if not part:  # the object is shorter than its size said: an error, never a short answer
                raise OSError(f"{self.path}: ended at byte {at + got} of {self.size}")
            parts.append(part)
            got += len(part)
        self._position.at = at + got
        return b"".join(parts)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._stream.closed)

    def close(self) -> None:
        self._stream.close()

    def flush(self) -> None:
        pass

    def __enter__(self) -> PositionalReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ObjectWarehouse(Warehouse):
    """The warehouse in an S3-compatible bucket (`url`), catalogued in PostgreSQL (`catalog`).

    `root` is a local directory for staging files while they are written (module docstring)."""

    def __init__(self, root: Path, url: str, catalog: str, datasets: Mapping[str, Dataset] = DATASETS):
        super().__init__(root, datasets)
        self.bucket = Bucket(url)
        self.catalog_url = catalog
        self.data = self.root / "staging"  # where the partition writer's files are made, then uploaded
        self.cache = self.root / "cache"  # checked local copies of objects, by key (`_local_copy`)
        self._checked = _CHECKED.setdefault(
            str(self.cache), {}
        )  # key -> (size, mtime ns) of its checked copy
        self._engine: Engine | None = None
        self._local = threading.local()  # `tx`: this thread's quarantine transaction, writing its tombstone
        self._lock = threading.RLock()

    # --- where it is ---------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return f"{self.bucket.url}/data"

    @property
    def manifest_location(self) -> str:
        shown = sa.make_url(self.catalog_url).render_as_string(hide_password=True)
        return f"{shown} (tables warehouse_files, warehouse_current)"

    @property
    def for_analysts(self) -> str:
        return f"{self.bucket.url} (query it with `evaltrack warehouse sql`)"

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            url = sa.make_url(self.catalog_url)
            if url.get_backend_name() != "postgresql":
                raise WarehouseError(f"warehouse catalog {self.manifest_location}: not a PostgreSQL URL")
            with _ENGINES_LOCK:  # one pool per catalog and process: a run opens many warehouses
                key = (os.getpid(), self.catalog_url)
                if key not in _ENGINES:
                    _ENGINES[key] = sa.create_engine(
                        url.set(drivername="postgresql+psycopg"),
                        connect_args={"connect_timeout": 10, "application_name": "eval-track-warehouse"},
                        pool_size=4,
                        max_overflow=8,
                        pool_pre_ping=True,
                    )
                self._engine = _ENGINES[key]
        return self._engine

    @contextmanager
    def _catalog(self) -> Iterator[Connection]:
        """One catalog transaction (the quarantine's own one, when a tombstone is written inside it)."""
        held: Connection | None = getattr(self._local, "tx", None)
        if held is not None:
            yield held
            return
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.OperationalError as exc:
            raise WarehouseError(
                f"warehouse catalog {self.manifest_location} cannot be reached: {first_line(exc.orig)}"
            ) from exc

    @staticmethod
    def _lock_partition(conn: Connection, dataset: str, partition_json: str) -> None:
        conn.execute(
            sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"{dataset}|{partition_json}"}
        )

    # --- initialisation ------------------------------------------------------------------------

    def initialise(self) -> None:
        """The catalog tables and a schema-only object per dataset. Raises ManifestError when objects
        exist but the catalog tables do not (nothing is re-trusted silently)."""
        self.require_manifest()
        for ds in self.datasets.values():
            self._ensure_schema_file(ds)

    def require_manifest(self) -> None:
        try:
            with self._catalog() as conn:
                present = conn.execute(sa.text("SELECT to_regclass('warehouse_files') IS NOT NULL")).scalar()
        except sa.exc.DBAPIError as exc:
            raise ManifestError(self.manifest_location, f"unreadable ({first_line(exc.orig)})") from exc
        if present:
            return
        stray = next(iter(self.bucket.listing("data")), None)
        if stray is not None:
            raise ManifestError(
                self.manifest_location, f"missing, while {self.bucket.uri('data/' + stray)} exists"
            )
        self._create_tables()

    def _create_tables(self) -> None:
        with self._catalog() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('evaltrack-warehouse-catalog'))"))
            for stmt in CATALOG_SCHEMA:
                conn.execute(sa.text(stmt))

    def _ensure_schema_file(self, ds: Dataset) -> None:
        import pandas as pd

        with self._catalog() as conn:
            held = conn.execute(
                sa.text(
                    "SELECT 1 FROM warehouse_files WHERE dataset = :d AND key LIKE :k AND state <> 'damaged'"
                ),
                {"d": ds.name, "k": f"{ds.name}/_schema/%"},
            ).first()
        if held is None:  # a new key each time: a damaged schema object's key is never reused
            target = self.data / ds.name / "_schema" / f"{time.time_ns()}.parquet"
            self._write_file(ds, pd.DataFrame(columns=[c for c, _ in ds.all_columns]), target)

    # --- the partition writer's last step: staging file -> object -> catalog --------------------

    def _write_file(
        self,
        ds: Dataset,
        frames: pd.DataFrame | Iterable[pd.DataFrame],
        target: Path,
        partition: dict[str, str] | None = None,
        run_id: str = "",
        written_at: int = 0,
    ) -> None:
        partition = partition or {}
        key = target.relative_to(self.data).as_posix()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.part"
        size, digest = stage_file(ds, frames, tmp, target.name)
        try:
            part_json = json.dumps(partition, sort_keys=True)
            row = {
                "k": key,
                "d": ds.name,
                "p": part_json,
                "b": partition.get("build"),
                "r": run_id,
                "w": written_at,
                "s": size,
                "h": digest,
            }
            with self._catalog() as conn:  # the key claimed before the object exists: never reused
                claimed = conn.execute(
                    sa.text(
                        "INSERT INTO warehouse_files (key, dataset, partition_json, build, run_id, written_at_ns, "
                        "size, sha256, state) VALUES (:k, :d, :p, :b, :r, :w, :s, :h, 'writing') "
                        "ON CONFLICT (key) DO NOTHING"
                    ),
                    row,
                ).rowcount
            if not claimed:
                raise WarehouseError(f"{ds.name}: object key {key} was used before; a key is never reused")
            mtime = self.bucket.put_file(tmp, "data/" + key)
            with self._catalog() as conn:  # one transaction makes it current
                if partition:
                    self._lock_partition(conn, ds.name, part_json)
                conn.execute(
                    sa.text("UPDATE warehouse_files SET state = 'written', mtime_ns = :m WHERE key = :k"),
                    {"m": mtime, "k": key},
                )
                if partition and set(partition) == set(ds.partition_by):
                    conn.execute(
                        sa.text(
                            "INSERT INTO warehouse_current (dataset, partition_json, key, written_at_ns, run_id) "
                            "VALUES (:d, :p, :k, :w, :r) ON CONFLICT (dataset, partition_json) DO UPDATE SET "
                            "key = excluded.key, written_at_ns = excluded.written_at_ns, run_id = excluded.run_id "
                            'WHERE (warehouse_current.written_at_ns, warehouse_current.run_id COLLATE "C") '
                            '< (excluded.written_at_ns, excluded.run_id COLLATE "C")'
                        ),
                        row,
                    )
        finally:
            tmp.unlink(missing_ok=True)

    # --- reading -------------------------------------------------------------------------------

    def _snapshot(self) -> dict[str, list[tuple[str, str]]]:
        """(key, SHA-256) of the `written` objects of every dataset, from one catalog read (one
        consistent snapshot)."""
        with self._catalog() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT dataset, key, sha256 FROM warehouse_files WHERE state = 'written' ORDER BY key"
                )
            ).all()
        out: dict[str, list[tuple[str, str]]] = {name: [] for name in self.datasets}
        for dataset, key, digest in rows:
            out.setdefault(dataset, []).append((key, digest))
        return out

    def view_sql(self, *, remote: bool = False) -> list[str]:
        """The views over one catalog snapshot: each object's local copy, downloaded once and checked
        against its catalogued SHA-256 (keys are never reused, so a checked copy stays right), or with
        `remote` the objects themselves through the bucket's filesystem. An object that is missing or
        fails its hash is quarantined and a new snapshot taken."""
        for _ in range(_MAX_SNAPSHOTS):
            snapshot = self._snapshot()

            def files(dataset: str, snapshot: dict[str, list[tuple[str, str]]] = snapshot) -> str:
                entries = snapshot.get(dataset) or []
                if not entries:
                    raise WarehouseError(
                        f"{dataset}: no schema object in the catalog (initialise the warehouse)"
                    )
                paths = (
                    self.bucket.uri("data/" + k) if remote else str(self._local_copy(k, h))
                    for k, h in entries
                )
                return "[" + ", ".join("'" + literal_path(p).replace("'", "''") + "'" for p in paths) + "]"

            try:
                return make_view_sql(self.data, self.datasets, files)
            except _SnapshotChanged:
                continue
        raise WarehouseError(f"more than {_MAX_SNAPSHOTS} damaged objects met by one read")

    def _local_copy(self, key: str, digest: str) -> Path:
        """The checked local copy of `key` (module docstring); raises _SnapshotChanged after
        quarantining an object that is missing or does not hash to `digest`."""
        path = self.cache / key
        try:
            stat = path.stat()
        except FileNotFoundError:
            stat = None
        if stat is not None:
            if self._checked.get(key) == (stat.st_size, stat.st_mtime_ns):
                return path
            if sha256(path) == digest:
                self._checked[key] = (stat.st_size, stat.st_mtime_ns)
                return path
            path.unlink()  # a copy, not the warehouse's file: fetched again below
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.part"
        try:
            self.bucket.get_file("data/" + key, tmp)
        except FileNotFoundError:
            self._quarantine(key, "missing: the object was deleted")
            raise _SnapshotChanged(key) from None
        if sha256(tmp) != digest:
            tmp.unlink()
            self._quarantine(key, "content changed since it was written (SHA-256 differs)")
            raise _SnapshotChanged(key)
        os.replace(tmp, path)
        stat = path.stat()
        self._checked[key] = (stat.st_size, stat.st_mtime_ns)
        return path

    def remote_connection(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection whose views read the current catalogued objects straight from the bucket
        (its filesystem registered with DuckDB; no local copies), after the same check as every read:
        for an analyst anywhere with the AWS variables and the catalog's URL. Close it when done."""
        self.verify()
        return self._views_connection(tuple(self.view_sql(remote=True)))

    def _views_connection(self, statements: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
        return shared_memory_database(
            ("object-views", self.bucket.url, statements), statements, self.bucket.duckdb_filesystem()
        )

    def read_file(self, rel: str) -> list[dict[str, Any]]:
        con = shared_memory_database(("object-scratch", self.bucket.url), (), self.bucket.duckdb_filesystem())
        try:
            uri = literal_path(self.bucket.uri("data/" + rel))
            cur = con.execute("SELECT * FROM read_parquet(?)", [uri])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            con.close()

    def _files_named_in(self, message: str) -> list[str]:
        known = {e.path for e in self._entries()}
        out = []
        for root in (self.bucket.uri("data/"), str(self.cache) + os.sep):
            for found in re.finditer(re.escape(root) + r"[^'\"\n*?]*?\.parquet", message):
                rel = found[0][len(root) :]
                if rel in known:  # also one already set aside by another reader: read a new snapshot
                    out.append(rel)
        return sorted(set(out))

    # --- damage --------------------------------------------------------------------------------

    def verify(self, *, full: bool = False) -> list[Damage]:
        """Check every object against the catalog; quarantine what is damaged (as `Warehouse.verify`).
        Objects are listed before the catalog is read, so a listed object's claimed row is seen."""
        self.require_manifest()
        listed = self.bucket.listing("data")
        entries = {e.path: e for e in self._entries()}
        found: list[Damage] = []
        for rel in sorted(set(listed) - set(entries)):
            found += self._quarantine(rel, "not written by the partition writer (not in the catalog)")
        for rel, entry in sorted(entries.items()):
            if entry.state == "damaged":
                continue
            if rel not in listed:
                if entry.state == "written":
                    try:
                        listed[rel] = self.bucket.stat("data/" + rel)
                    except FileNotFoundError:
                        found += self._quarantine(rel, "missing: the object was deleted")
                        continue
                else:
                    continue  # claimed, not uploaded yet
            size, mtime = listed[rel]
            if size != entry.size:
                found += self._quarantine(rel, f"size is {size} bytes, {entry.size} were written")
            elif full or mtime != entry.mtime_ns:
                try:
                    digest = self.bucket.sha256("data/" + rel)
                except FileNotFoundError:
                    found += self._quarantine(rel, "missing: the object was deleted")
                    continue
                if digest != entry.sha256:
                    found += self._quarantine(rel, "content changed since it was written (SHA-256 differs)")
                elif entry.state == "written":
                    with self._catalog() as conn:
                        conn.execute(
                            sa.text("UPDATE warehouse_files SET mtime_ns = :m WHERE key = :k"),
                            {"m": mtime, "k": rel},
                        )
        return found

    def rehash(self, entries: Iterable[Entry]) -> list[Damage]:
        found: list[Damage] = []
        for e in entries:
            if e.run_id.startswith(TOMBSTONE_PREFIX):
                found += self.damage(e.build)
                continue
            try:
                digest = self.bucket.sha256("data/" + e.path)
            except FileNotFoundError:
                found += self._quarantine(e.path, "missing: the object was deleted")
                continue
            if digest != e.sha256:
                found += self._quarantine(e.path, "content changed since it was written (SHA-256 differs)")
        return found

    def _quarantine(self, rel: str, reason: str) -> list[Damage]:
        """Move the object aside (never delete it), note it, mark it damaged and tombstone its partition,
        in one catalog transaction (the row lock of the claim held throughout: one process does it)."""
        with self._lock:
            return self._quarantine_locked(rel, reason)

    def _quarantine_locked(self, rel: str, reason: str) -> list[Damage]:
        entry = next((e for e in self._entries() if e.path == rel), None)
        if entry is None:  # not the writer's: recorded now, so it is named like any other damage
            dataset = rel.split("/", 1)[0]
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            entry = Entry(
                rel, dataset, parts, parts.get("build"), "", written_at_of(rel), -1, "", None, "written"
            )
            with self._catalog() as conn:
                conn.execute(
                    sa.text(
                        "INSERT INTO warehouse_files (key, dataset, partition_json, build, run_id, written_at_ns, "
                        "size, sha256, state) VALUES (:k, :d, :p, :b, '', :w, -1, '', 'written') "
                        "ON CONFLICT (key) DO NOTHING"
                    ),
                    {
                        "k": rel,
                        "d": dataset,
                        "p": json.dumps(parts, sort_keys=True),
                        "b": entry.build,
                        "w": entry.written_at_ns,
                    },
                )
        noticed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ds = self.datasets.get(entry.dataset)
        part_json = json.dumps(entry.partition, sort_keys=True)
        with self._catalog() as conn:
            self._lock_partition(conn, entry.dataset, part_json)
            claimed = conn.execute(
                sa.text(
                    "UPDATE warehouse_files SET state = 'damaged', reason = :r, noticed_at = :n "
                    "WHERE key = :k AND state <> 'damaged'"
                ),
                {"r": reason, "n": noticed, "k": rel},
            ).rowcount
            if not claimed:
                return []
            aside = f"quarantine/{time.time_ns()}/{rel}"
            moved = self.bucket.uri(aside) if self.bucket.move("data/" + rel, aside) else None
            note = {
                "file": self.bucket.uri("data/" + rel),
                "table": entry.dataset,
                "build": entry.build,
                "partition": entry.partition,
                "reason": reason,
                "noticed_at": noticed,
                "moved_to": moved,
            }
            notes_key = f"quarantine/notes/{time.time_ns()}-{rel.replace('/', '__')}.json"
            self.bucket.put_bytes(notes_key, json.dumps(note, indent=2).encode())
            conn.execute(
                sa.text("UPDATE warehouse_files SET moved_to = :m WHERE key = :k"), {"m": moved, "k": rel}
            )
            # the partition's current object: the newest one left (the tombstone below, if it is newer)
            conn.execute(
                sa.text("DELETE FROM warehouse_current WHERE dataset = :d AND partition_json = :p"),
                {"d": entry.dataset, "p": part_json},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO warehouse_current (dataset, partition_json, key, written_at_ns, run_id) "
                    "SELECT dataset, partition_json, key, written_at_ns, run_id FROM warehouse_files "
                    "WHERE dataset = :d AND partition_json = :p AND state = 'written' AND key NOT LIKE :schema "
                    'ORDER BY written_at_ns DESC, run_id COLLATE "C" DESC LIMIT 1'
                ),
                {"d": entry.dataset, "p": part_json, "schema": f"{entry.dataset}/_schema/%"},
            )
            self._local.tx = conn
            try:
                if ds is not None and rel.split("/")[1] == "_schema":
                    pass  # a new schema object is written after this transaction
                elif ds is not None and set(entry.partition) == set(ds.partition_by):
                    self._write_partition(
                        ds.name,
                        entry.partition,
                        [[dict(entry.partition)]],
                        TOMBSTONE_PREFIX + rel,
                        entry.written_at_ns,
                    )
            finally:
                self._local.tx = None
        if ds is not None and rel.split("/")[1] == "_schema":
            self._ensure_schema_file(ds)
        return [Damage(rel, entry.dataset, entry.build, entry.partition, reason, moved, noticed)]

    def rebuild_manifest(self) -> list[str]:
        """Re-trust every uncatalogued object as it is now (size, SHA-256); one DuckDB cannot read is
        quarantined. Returns the objects re-trusted. Only ever run on a person's explicit request."""
        self._create_tables()
        known = {e.path for e in self._entries()}
        trusted = []
        for rel, (size, mtime) in sorted(self.bucket.listing("data").items()):
            if rel in known:
                continue
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            stem = rel.rsplit("/", 1)[-1].removesuffix(".parquet")
            run_id = stem.split("-", 1)[1] if "-" in stem else "rebuilt"
            part_json = json.dumps(parts, sort_keys=True)
            dataset = rel.split("/", 1)[0]
            row = {
                "k": rel,
                "d": dataset,
                "p": part_json,
                "b": parts.get("build"),
                "r": run_id,
                "w": written_at_of(rel),
                "s": size,
                "h": self.bucket.sha256("data/" + rel),
                "m": mtime,
            }
            with self._catalog() as conn:
                conn.execute(
                    sa.text(
                        "INSERT INTO warehouse_files (key, dataset, partition_json, build, run_id, written_at_ns, "
                        "size, sha256, mtime_ns, state) VALUES (:k, :d, :p, :b, :r, :w, :s, :h, :m, 'written') "
                        "ON CONFLICT (key) DO NOTHING"
                    ),
                    row,
                )
                ds = self.datasets.get(dataset)
                if ds is not None and parts and set(parts) == set(ds.partition_by):
                    self._lock_partition(conn, dataset, part_json)
                    conn.execute(
                        sa.text(
                            "INSERT INTO warehouse_current (dataset, partition_json, key, written_at_ns, run_id) "
                            "VALUES (:d, :p, :k, :w, :r) ON CONFLICT (dataset, partition_json) DO UPDATE SET "
                            "key = excluded.key, written_at_ns = excluded.written_at_ns, run_id = excluded.run_id "
                            'WHERE (warehouse_current.written_at_ns, warehouse_current.run_id COLLATE "C") '
                            '< (excluded.written_at_ns, excluded.run_id COLLATE "C")'
                        ),
                        row,
                    )
            try:
                self.read_file(rel)
                trusted.append(rel)
            except duckdb.Error as exc:
                self._quarantine(rel, f"unreadable: {first_line(exc)}")
        self.initialise()
        return trusted

    # --- the catalog ---------------------------------------------------------------------------

    def current_files(self, datasets: Iterable[str], builds: Iterable[str]) -> dict[tuple[str, str], Entry]:
        """The current object of every partition of `datasets` whose build is in `builds`, as the
        catalog's `warehouse_current` names it (a tombstone as current is a damaged partition)."""
        wanted, of = sorted(set(datasets)), sorted(set(builds))
        with self._catalog() as conn:
            rows = conn.execute(
                sa.text(
                    f"SELECT {', '.join('f.' + c.strip() for c in _COLUMNS.split(','))} FROM warehouse_current c "
                    "JOIN warehouse_files f ON f.key = c.key WHERE c.dataset = ANY(:d) AND f.build = ANY(:b) "
                    "AND f.state = 'written'"
                ),
                {"d": wanted, "b": of},
            ).all()
        return {(r[1], r[2]): _entry(r) for r in rows}

    def _entries(self) -> list[Entry]:
        with self._catalog() as conn:
            rows = conn.execute(sa.text(f"SELECT {_COLUMNS} FROM warehouse_files")).all()
        return [_entry(r) for r in rows]

    def current_keys(self) -> dict[tuple[str, str], str]:
        """(dataset, partition JSON) -> the key `warehouse_current` names: what the views take as current."""
        with self._catalog() as conn:
            rows = conn.execute(sa.text("SELECT dataset, partition_json, key FROM warehouse_current")).all()
        return {(r[0], r[1]): r[2] for r in rows}

    def close(self) -> None:
        """Close the catalog's connections held by this process (a test's database about to be dropped)."""
        with _ENGINES_LOCK:
            engine = _ENGINES.pop((os.getpid(), self.catalog_url), None)
        if engine is not None:
            engine.dispose()
        self._engine = None
