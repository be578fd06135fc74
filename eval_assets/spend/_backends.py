"""The two backends: opening SQLite (WAL) or PostgreSQL from a journal URL, and recognising a lock
timeout."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from ._location import sqlite_file
from ._values import JournalError

_WRITE_OPTION = "eval_track_journal_write"

DEFAULT_LOCK_WAIT_S = 5.0


"""How long `open_journal` waits for another writer's lock before calling the journal locked."""


BUSY_TIMEOUT_S = 30.0


"""How long an operation on an open SQLite journal waits for another process's write lock."""


def _is_lock_timeout(exc: sa.exc.DBAPIError) -> bool:
    orig = exc.orig
    if getattr(orig, "sqlstate", None) == "55P03":  # PostgreSQL lock_not_available
        return True
    return getattr(orig, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _parse_url(url: str) -> sa.URL:
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise JournalError(f"not a database URL: {url!r}") from exc
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if backend == "sqlite" and driver == "pysqlite":
        return parsed
    if backend == "postgresql" and "+" not in parsed.drivername:
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "postgresql" and driver == "psycopg":
        return parsed
    raise JournalError(
        f"unsupported journal URL {parsed.render_as_string(hide_password=True)}: "
        "use sqlite:///path/journal.sqlite or postgresql+psycopg://user@host:port/db"
    )


def _sqlite_path(parsed: sa.URL) -> Path:
    path = sqlite_file(parsed)
    if path is None:
        raise JournalError(
            "a SQLite journal needs a file (sqlite:///path/journal.sqlite): an in-memory database "
            "cannot be shared between processes"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JournalError(f"cannot create the journal directory {path.parent}: {exc}") from exc
    return path


def _probe_sqlite(path: Path, lock_wait_s: float) -> None:
    """Open `path`, switch it to WAL, check its integrity and take and drop the write lock."""
    try:
        con = sqlite3.connect(path, timeout=lock_wait_s, isolation_level=None)
    except sqlite3.Error as exc:
        raise JournalError(f"cannot open the SQLite journal {path}: {exc}") from exc
    try:
        (mode,) = con.execute("PRAGMA journal_mode=WAL").fetchone()
        if str(mode).lower() != "wal":
            raise JournalError(f"the SQLite journal {path} cannot use WAL mode (got {mode!r})")
        con.execute("BEGIN IMMEDIATE")
        try:  # a write, rolled back: a read-only journal passes BEGIN IMMEDIATE and fails at its first write
            con.execute("CREATE TABLE evaltrack_write_probe (x)")
        finally:
            con.execute("ROLLBACK")
        problems = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise JournalError(f"the SQLite journal {path} is corrupt: {'; '.join(problems[:3])}")
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise JournalError(
                f"the SQLite journal {path} is locked by another program (waited {lock_wait_s:g} s); "
                "close it (or stop the process holding it) and retry"
            ) from exc
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY:
            raise JournalError(
                f"the SQLite journal {path} is read-only ({exc}): make it (and its directory) writable, "
                "or set spend.journal_url in evaltrack.yaml to a writable journal"
            ) from exc
        raise JournalError(f"cannot use the SQLite journal {path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"the SQLite journal {path} is not a usable SQLite database ({exc})") from exc
    finally:
        con.close()


_SHORT_WAIT_S = 0.01  # a wait for the write turn up to this long is polled every 50 us


class WriteTurn:
    """The processes of one host take turns at a SQLite journal's write lock through an advisory lock
    on a file beside it (`<journal>-writelock`), taken just before BEGIN IMMEDIATE.

    SQLite's own busy handler sleeps between polls, 1, 2, 5, 10 ... 100 ms: two busy processes lose
    most of their time asleep while the lock sits free. This lock is polled 50 us apart for the first
    10 ms of a wait, then at most 1 ms apart (`pause`). Past `BUSY_TIMEOUT_S` the turn is taken
    without it and SQLite's own wait and error apply, so a process stopped while holding it delays the
    others, never blocks them for good.
    """

    def __init__(self, journal_path: Path):
        self._fd = os.open(f"{journal_path}-writelock", os.O_RDWR | os.O_CREAT, 0o644)

    @contextmanager
    def held(self) -> Iterator[None]:
        locked = self._acquire()
        try:
            yield
        finally:
            if locked:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _acquire(self) -> bool:
        start = time.monotonic()
        deadline = start + BUSY_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    return False
                time.sleep(self.pause(now - start))

    @staticmethod
    def pause(waited: float) -> float:
        """How long a process waiting for the write turn sleeps before it polls again, having waited
        `waited` seconds: 50 us while the wait is short (another process's batch is short, and a
        coarser poll leaves a worker idle with its calls all waiting for journal writes while the lock
        sits free), then doubling up to 1 ms, so a long wait costs at most a thousand polls a second."""
        if waited < _SHORT_WAIT_S:
            return 50e-6
        return min(1e-3, 50e-6 * 2 ** min(5.0, (waited - _SHORT_WAIT_S) / _SHORT_WAIT_S))

    def close(self) -> None:
        os.close(self._fd)


def _sqlite_engine(parsed: sa.URL) -> Engine:
    engine = sa.create_engine(
        parsed, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}, pool_size=8
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy emits BEGIN itself (below); the driver's own transaction handling is off.
        dbapi_connection.isolation_level = None
        # NORMAL (in WAL mode): commits survive any process crash, not an OS crash (module docstring).
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock before the first read, so read-check-insert is atomic.
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _postgres_engine(parsed: sa.URL) -> Engine:
    return sa.create_engine(
        parsed,
        connect_args={"connect_timeout": 10, "application_name": "eval-track-journal"},
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
    )


def journal_engine(
    url: str, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S
) -> tuple[Engine, Literal["sqlite", "postgresql"]]:
    """An engine on the journal database at `url` for a table that lives next to the spend journal
    (the review queue), opened and checked as the journal opens it (SQLite: WAL, writable, intact).
    Raises JournalError."""
    parsed = _parse_url(url)
    dialect = cast(Literal["sqlite", "postgresql"], parsed.get_backend_name())
    if dialect == "sqlite":
        path = _sqlite_path(parsed)
        _probe_sqlite(path, lock_wait_s)
        return _sqlite_engine(parsed), dialect
    return _postgres_engine(parsed), dialect


@contextmanager
def journal_write(engine: Engine) -> Iterator[Connection]:
    """One write transaction on a `journal_engine` (SQLite: BEGIN IMMEDIATE, the database write lock
    taken before the first read; PostgreSQL: READ COMMITTED, row locks taken by the statements)."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            yield conn
