"""The spend journal: the single source of truth for what model calls cost.

Every model call (subject or judge, every try) is an *attempt* with a deterministic key. Before the
call the caller reserves the call's worst-case cost; the reservation is checked against the scenario,
suite and day ceilings in one atomic transaction, across threads, processes and machines. After the
call the caller settles it with the actual cost and the output, so a later run reuses the output
instead of paying again. A refused reservation is recorded too, naming the ceiling it hit, so the
ceiling-hit rate is a figure one can query.

Backends: SQLite (WAL) for one machine, PostgreSQL when runs span machines; both through SQLAlchemy
Core, both covered by one contract test module (tests/test_journal_contract.py).

Spend scopes (what a ceiling is measured against):

- **scenario**: the attempts of one (build, judge version, scenario, generation). Subject calls have no
  judge version, so a scenario's subject spend and each judge version's spend on it are separate pools.
- **suite**: the attempts of one (build, judge version, generation): one materialization of
  `scenario_runs[build]` (judge version NULL) or of `judge_verdicts[build x judge_version]`. A judge
  version added later, or a bridge run, is not starved by what earlier judges spent on the build; the
  subject spend of a build is paid once whatever the number of judges. The day ceiling bounds the sum.
- **day**: every attempt whose reservation falls on that UTC calendar day, whatever the build.

Committed spend in a scope = actual cost of settled and failed attempts + worst case of reserved,
unsettled ones. Refused rows commit nothing. Rows are never deleted: replacing a result (a fresh
generation) adds rows, so the spend of a day never decreases.

Running totals: table `spend_totals` holds, per (scope, key) — ('day', '2026-11-30'),
('suite', 'b1/rubric-v1/0'), ('scenario', 'b1/-/s1/0'), see `scope_keys` — the spent and the
outstanding part of the scope's committed spend, in integer nano-USD (each row counts as its amount
rounded to 1e-9 USD; integer sums are exact and order-independent, so the totals never drift, and a
ceiling is met exactly when the rounded amounts add up to it). They are maintained in the same
transaction as the rows: a reservation adds its worst case to the outstanding part of its three
scopes, a settlement moves (worst case -> actual cost) from outstanding to spent; a refusal adds
nothing. So in every committed state, and in every snapshot, each total equals the sum over its rows
(`scope_totals()`; the contract tests recompute it from `rows()`), and a reservation reads three
totals instead of summing rows: its cost does not grow as a day fills. A journal written before the
totals existed gets them at open, summed from its rows in the schema transaction (which also swaps
the covering indexes the row sums needed for one on (build, judge_version)). Every process writing
a journal must run a version that maintains the totals.

Group commit: the reservations and settlements of one process's threads are written by one thread
at a time, in batches: the first caller to find no writer writes every operation queued so far (its
own included, oldest first, at most `_MAX_BATCH`) in one transaction, then hands the writer role to
the oldest caller still waiting. Within the transaction the operations apply one after the other,
exactly as if each had its own transaction in that order (a reservation sees the totals the earlier
ones left); each caller returns once the transaction committed. One lock acquisition and one commit
thus serve every operation that queued meanwhile, so the journal's throughput grows with the load
instead of being capped by one commit (and, on PostgreSQL, one WAL flush) per call. A database error
fails every operation of its batch; an operation's own error (settling an unknown key, a model that
contradicts the key) fails only that operation.

Locking: a batch holding a reservation runs in one transaction that first takes the journal's write
lock: on SQLite `BEGIN IMMEDIATE` (the database write lock, which every write takes); on PostgreSQL
one transaction-scoped advisory lock (`pg_advisory_xact_lock`) shared by all reservations, because a
suite's attempts can straddle two days and so no per-day lock would do. On PostgreSQL a batch of
settlements only does not take it (settlements only replace a worst case by the actual cost); it
locks the rows it settles (`SELECT ... FOR UPDATE`), so two processes settling one attempt cannot
both count it. Reads never wait for writers (WAL; MVCC).

Why a ceiling holds on PostgreSQL (READ COMMITTED), with settlements outside the advisory lock:

1. Reservations are totally ordered by the advisory lock, and the lock is released only after the
   holder's commit is visible. A reservation batch reads the totals it checks in one statement
   issued after the lock was granted (never in the statement that takes the lock: its snapshot
   would predate the grant), so it sees every earlier reservation.
2. Totals are only ever changed by relative updates (`total = total + delta`, an upsert) in the
   transaction that changes the rows. PostgreSQL applies such an UPDATE to the newest committed
   version of the row, after waiting for a concurrent writer of it, so no delta is lost; and as each
   writer of a totals row waits for the previous one to commit, any snapshot that sees a writer's
   commit sees every earlier writer's: a snapshot's totals equal the sums of the rows it sees.
3. The only writers that can commit between a reservation's read and its own commit are
   settlements. One that commits before the read is counted exactly. One that commits after it
   lowers the committed total by (worst case - actual) >= 0 for an honest worst case: the
   reservation was checked against a total at least the true one, which is conservative, never
   over. The reservation's own upsert then adds its worst case on top of the settled value (point
   2), so the stored total stays exact. An actual cost above the worst case overshoots a ceiling
   with or without concurrency: a worst case is the caller's promise, which the journal cannot check.
4. No deadlock: every transaction locks journal rows first, in key order (settled rows with FOR
   UPDATE, changed rows by their UPDATE), then totals rows in one global order (day, suite,
   scenario, then key); settlement batches never wait for the advisory lock; a reservation batch
   holds no row lock while it waits for the advisory lock (its first statement).
This is the guarantee the per-call row sums gave (they too read one snapshot after the lock), at
O(1) per reservation. On SQLite every write, settlements included, holds the database write lock, so
every batch sees and leaves one serial order.

Durability: SQLite runs in WAL mode with synchronous=NORMAL: a commit is appended to the WAL (in the
OS page cache) without an fsync; the WAL is fsynced when it is checkpointed into the database. A
commit that returned survives the crash of any process, `kill -9` included (the contract tests kill
one), which is the failure that matters here: a run killed mid-materialization resumes from the
journal. An OS crash or power cut can lose the commits since the last checkpoint, never corrupt the
database: a lost reservation whose call was made is spend the journal does not know about (the
ceilings can be overrun by it), a lost settlement leaves its worst case counted and its output not
reusable. synchronous=FULL would close that gap at one fsync per commit. PostgreSQL runs with its
default synchronous commit (the server flushes its WAL before a commit returns): what `reserve` or
`settle` returned survives a crash of the server or the machine.

Thread safety: a `SpendJournal` may be used from any number of threads at once (for asyncio code,
`await asyncio.to_thread(journal.reserve, ...)`). Open one per process; do not carry one across fork.

Leases: table `run_leases` holds one lease per (build, asset, partition): the run that
may pay for that partition's calls. `acquire_lease` grants it when no row exists, when the row is its
holder's own (re-entrant), when the row expired (no heartbeat for its TTL: a killed run on any
machine), or when the holder is a process on this host that no longer exists (at once). Otherwise it
names the holder. Grant, renewal and release each run in one write transaction under the journal's
write lock (SQLite) or reservation lock (PostgreSQL), so across processes and machines at most one
holder wins. Expiry compares the callers' clocks (UTC): machines sharing a journal keep them in sync
(NTP) to well within the TTL. `hold_lease` keeps a lease for a block, renewing it from a heartbeat
thread; a holder that lost its lease (it lapsed and another run took it) finds out before it writes.

Secrets: the journal stores the output text and an error text, never request headers or API keys;
error texts are scrubbed of anything that looks like a credential before they are written.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from eval_assets.redact import scrub_error_text

from ._keys import AttemptKey, Role

AttemptStatus = Literal["reserved", "settled", "failed", "refused"]
SettlementStatus = Literal["settled", "failed"]
CeilingName = Literal["scenario", "suite", "day"]

DEFAULT_LOCK_WAIT_S = 5.0
"""How long `open_journal` waits for another writer's lock before calling the journal locked."""

BUSY_TIMEOUT_S = 30.0
"""How long an operation on an open SQLite journal waits for another process's write lock."""

TABLE_NAME = "spend_journal"
TOTALS_TABLE_NAME = "spend_totals"

# The largest worst case or cost one attempt may record: totals are 64-bit integer nano-USD.
_MAX_ATTEMPT_USD = 1e6
# The most operations one write transaction carries (group commit).
_MAX_BATCH = 256
# One PostgreSQL advisory lock key for every reservation ("evjrnl" in ASCII).
_ADVISORY_LOCK_KEY = 0x65766A726E6C
_WRITE_OPTION = "eval_track_journal_write"


class JournalError(Exception):
    """The journal cannot be used: unreachable, corrupt, locked, incompatible, or misused."""


# --- schema -------------------------------------------------------------------------------------

_METADATA = sa.MetaData()

_TABLE = sa.Table(
    TABLE_NAME,
    _METADATA,
    sa.Column("attempt_key", sa.String, primary_key=True),
    sa.Column("run_id", sa.String, nullable=False),
    sa.Column("build", sa.String, nullable=False),
    sa.Column("judge_version", sa.String, nullable=True),
    sa.Column("scenario_id", sa.String, nullable=False),
    sa.Column("repeat", sa.Integer, nullable=False),
    sa.Column("role", sa.String, nullable=False),
    sa.Column("try_no", sa.Integer, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("status", sa.String, nullable=False),
    sa.Column("ceiling", sa.String, nullable=True),
    sa.Column("reserved_usd", sa.Double, nullable=False),
    sa.Column("cost_usd", sa.Double, nullable=True),
    sa.Column("prompt_tokens", sa.Integer, nullable=True),
    sa.Column("completion_tokens", sa.Integer, nullable=True),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.CheckConstraint("status IN ('reserved', 'settled', 'failed', 'refused')", name="ck_status"),
    sa.CheckConstraint("role IN ('subject', 'judge')", name="ck_role"),
    # For `rows(build=..., judge_version=...)`. Ceiling checks read `spend_totals`, never these rows.
    sa.Index("ix_spend_journal_build", "build", "judge_version"),
)

# Covering indexes of journals written before `spend_totals` existed: their ceiling sums read them.
# They index `status` and `cost_usd`, which every settlement changes; dropped when the totals arrive.
_OBSOLETE_INDEXES = ("ix_spend_journal_day", "ix_spend_journal_suite")

_TOTALS = sa.Table(
    TOTALS_TABLE_NAME,
    _METADATA,
    sa.Column("scope", sa.String, primary_key=True),
    sa.Column("scope_key", sa.String, primary_key=True),
    # Integer nano-USD (1e-9 USD): sums of integers are exact and independent of the order of the
    # additions, so a total never drifts from the sum of its rows however many updates it took.
    sa.Column("spent_nusd", sa.BigInteger, nullable=False),
    sa.Column("outstanding_nusd", sa.BigInteger, nullable=False),
    sa.CheckConstraint("scope IN ('scenario', 'suite', 'day')", name="ck_spend_totals_scope"),
)

# Statements are built once, with bound parameters: building and cache-keying a statement per call
# costs several times what executing it does, and writes run under a lock.
_COLUMN_NAMES = tuple(c.name for c in _TABLE.columns)
_SELECT_ROW = sa.select(_TABLE).where(_TABLE.c.attempt_key == sa.bindparam("b_key"))
_SELECT_ROWS = (
    sa.select(_TABLE)
    .where(_TABLE.c.attempt_key.in_(sa.bindparam("b_keys", expanding=True)))
    .order_by(_TABLE.c.attempt_key)
)
# PostgreSQL: locks the rows a batch settles, in key order (no other settlement changes them meanwhile).
_SELECT_ROWS_FOR_UPDATE = _SELECT_ROWS.with_for_update()
_INSERT_ROW = sa.insert(_TABLE)
# Updates of a stored row, which must still have the status it was read with (the batch checks the
# row count). A settlement writes only what settling changes; a refused key reserved again, every column.
_SETTLED_COLUMNS = (
    "status",
    "cost_usd",
    "prompt_tokens",
    "completion_tokens",
    "settled_at",
    "payload",
    "error",
)
_UPDATE_COLUMNS = {
    "reserved": _SETTLED_COLUMNS,
    "refused": tuple(name for name in _COLUMN_NAMES if name != "attempt_key"),
}
_UPDATE_ROW = {
    status: sa.update(_TABLE)
    .where(_TABLE.c.attempt_key == sa.bindparam("b_key"), _TABLE.c.status == status)
    .values({name: sa.bindparam(name) for name in columns})
    for status, columns in _UPDATE_COLUMNS.items()
}

# Scopes in the order their totals rows are written (and so locked, on PostgreSQL): one global order
# for every transaction, so two writers never wait on each other's totals rows in a cycle.
_SCOPES: tuple[CeilingName, ...] = ("day", "suite", "scenario")
_SCOPE_RANK = {scope: rank for rank, scope in enumerate(_SCOPES)}

# The committed nano-USD of the given scopes (a scope without a row has committed nothing). One
# statement, so on PostgreSQL every total comes from one snapshot, taken after the reservation lock.
_SELECT_COMMITTED = sa.union_all(
    *(
        sa.select(
            _TOTALS.c.scope, _TOTALS.c.scope_key, _TOTALS.c.spent_nusd + _TOTALS.c.outstanding_nusd
        ).where(
            _TOTALS.c.scope == scope,
            _TOTALS.c.scope_key.in_(sa.bindparam(f"k_{scope}", expanding=True)),
        )
        for scope in _SCOPES
    )
)

# Adds (d_spent, d_outstanding) nano-USD to one total, creating its row. The SET is relative
# (`total = total + delta`), never a value computed from an earlier read: on PostgreSQL the UPDATE
# applies the delta to the newest committed version of the row, after waiting for any writer holding
# it, so concurrent transactions never lose an update. Plain SQL, the same on both dialects.
_UPSERT_TOTAL = sa.text(
    f"INSERT INTO {TOTALS_TABLE_NAME} (scope, scope_key, spent_nusd, outstanding_nusd)"
    " VALUES (:scope, :scope_key, :d_spent, :d_outstanding)"
    " ON CONFLICT (scope, scope_key) DO UPDATE SET"
    f" spent_nusd = {TOTALS_TABLE_NAME}.spent_nusd + excluded.spent_nusd,"
    f" outstanding_nusd = {TOTALS_TABLE_NAME}.outstanding_nusd + excluded.outstanding_nusd"
).bindparams(
    sa.bindparam("d_spent", type_=sa.BigInteger),
    sa.bindparam("d_outstanding", type_=sa.BigInteger),
)

# PostgreSQL: the same writes as one statement each, whatever the batch size, from one array per
# column (psycopg sends a list as an array): one Bind/Execute instead of one per row.
_PG_TYPES = {
    sa.String: "TEXT",
    sa.Text: "TEXT",
    sa.Integer: "INTEGER",
    sa.BigInteger: "BIGINT",
    sa.Double: "DOUBLE PRECISION",
    sa.DateTime: "TIMESTAMPTZ",
}


def _pg_unnest(columns: Mapping[str, str], alias: str) -> str:
    """`unnest(CAST(:c AS T[]), ...) WITH ORDINALITY AS alias(c, ..., n)` for parameters named c."""
    arrays = ", ".join(f"CAST(:{name} AS {pg_type}[])" for name, pg_type in columns.items())
    return f"unnest({arrays}) WITH ORDINALITY AS {alias}({', '.join(columns)}, n)"


def _pg_type(name: str) -> str:
    column_type = type(_TABLE.c[name].type)
    return next(sql for python, sql in _PG_TYPES.items() if issubclass(column_type, python))


_PG_INSERT_ROWS = sa.text(
    f"INSERT INTO {TABLE_NAME} ({', '.join(_COLUMN_NAMES)}) SELECT {', '.join(_COLUMN_NAMES)} FROM "
    + _pg_unnest({name: _pg_type(name) for name in _COLUMN_NAMES}, "u")
    + " ORDER BY n"
)
_PG_SETTLE_ROWS = sa.text(
    f"UPDATE {TABLE_NAME} AS j SET {', '.join(f'{name} = u.{name}' for name in _SETTLED_COLUMNS)} FROM "
    + _pg_unnest({"b_key": "TEXT", **{name: _pg_type(name) for name in _SETTLED_COLUMNS}}, "u")
    + " WHERE j.attempt_key = u.b_key AND j.status = 'reserved'"
)
_PG_UPSERT_TOTALS = sa.text(
    f"INSERT INTO {TOTALS_TABLE_NAME} (scope, scope_key, spent_nusd, outstanding_nusd)"
    " SELECT scope, scope_key, d_spent, d_outstanding FROM "
    + _pg_unnest({"scope": "TEXT", "scope_key": "TEXT", "d_spent": "BIGINT", "d_outstanding": "BIGINT"}, "u")
    + " ORDER BY n ON CONFLICT (scope, scope_key) DO UPDATE SET"
    f" spent_nusd = {TOTALS_TABLE_NAME}.spent_nusd + excluded.spent_nusd,"
    f" outstanding_nusd = {TOTALS_TABLE_NAME}.outstanding_nusd + excluded.outstanding_nusd"
)

_SELECT_DAY_TOTAL = sa.select(_TOTALS.c.spent_nusd, _TOTALS.c.outstanding_nusd).where(
    _TOTALS.c.scope == "day", _TOTALS.c.scope_key == sa.bindparam("k_day")
)
_SELECT_TOTALS = sa.select(_TOTALS).order_by(_TOTALS.c.scope, _TOTALS.c.scope_key)

LEASES_TABLE_NAME = "run_leases"
_LEASES = sa.Table(
    LEASES_TABLE_NAME,
    _METADATA,
    sa.Column("build", sa.String, primary_key=True),
    sa.Column("asset", sa.String, primary_key=True),
    sa.Column("partition_key", sa.String, primary_key=True),
    sa.Column("holder", sa.String, nullable=False),  # process_holder(): host:pid:token
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String, nullable=True),
    sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)


# --- values -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ceilings:
    """Spend limits in USD. None: no ceiling at that level. 0: nothing runs at that level."""

    scenario_usd: float | None = None
    suite_usd: float | None = None
    day_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("scenario_usd", "suite_usd", "day_usd"):
            value = getattr(self, name)
            if value is not None:
                _check_usd(name, value)


@dataclass(frozen=True)
class JournalRow:
    """One attempt as the journal holds it (see the module docstring for the columns' meaning)."""

    attempt_key: str
    run_id: str
    build: str
    judge_version: str | None
    scenario_id: str
    repeat: int
    role: Role
    try_no: int
    generation: int
    model: str
    status: AttemptStatus
    ceiling: CeilingName | None
    reserved_usd: float
    cost_usd: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    day: str
    created_at: datetime
    settled_at: datetime | None
    payload: str | None
    error: str | None


@dataclass(frozen=True)
class Reservation:
    """The attempt may be (or already was) paid for.

    `is_new` is True when this call reserved the worst case: make the model call, then `settle`.
    It is False when the key was already in the journal; `row.status` says what to do:
    `settled` — reuse `row.payload`, do not call again; `failed` — this try is spent, use the next
    `try_no`; `reserved` — another caller holds it, or a crashed run left it: its worst case still
    counts against the ceilings until someone settles it (compare `row.run_id` with yours).
    """

    row: JournalRow
    is_new: bool

    @property
    def attempt_key(self) -> str:
        return self.row.attempt_key


@dataclass(frozen=True)
class Refusal:
    """The call would break `ceiling`: committed + worst case > limit (or the limit is 0).

    Make no call; the scenario is excluded, never scored zero. The refusal is in the journal as a
    `refused` row (`row`), which is how the ceiling-hit rate is measured.
    """

    row: JournalRow
    ceiling: CeilingName
    limit_usd: float
    committed_usd: float
    worst_case_usd: float

    @property
    def attempt_key(self) -> str:
        return self.row.attempt_key


@dataclass(frozen=True)
class SpendTotal:
    """Spend of one UTC day.

    `spent_usd`: actual cost of settled and failed attempts; it never decreases.
    `outstanding_usd`: worst case of reservations not yet settled.
    """

    day: str
    spent_usd: float
    outstanding_usd: float

    @property
    def committed_usd(self) -> float:
        """What the day ceiling is checked against."""
        return self.spent_usd + self.outstanding_usd


@dataclass(frozen=True)
class ScopeTotal:
    """The running total of one spend scope, as `spend_totals` holds it (see the module docstring).

    `scope` and `key`: ('day', '2026-11-30'), ('suite', 'b1/rubric-v1/0') or
    ('scenario', 'b1/rubric-v1/s1/0'); a subject scope has '-' for its judge version.
    """

    scope: CeilingName
    key: str
    spent_usd: float
    outstanding_usd: float

    @property
    def committed_usd(self) -> float:
        """What the scope's ceiling is checked against."""
        return self.spent_usd + self.outstanding_usd


@dataclass(frozen=True)
class _Breach:
    ceiling: CeilingName
    limit_usd: float
    committed_usd: float


@dataclass(eq=False, kw_only=True)
class _Op:
    """One caller's write, queued for the process's writer (see `SpendJournal._submit`)."""

    key: str
    moment: datetime
    wake: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    result: object = None
    error: BaseException | None = None

    @property
    def action(self) -> str:
        raise NotImplementedError

    def outcome(self) -> object:
        if self.error is not None:
            raise self.error
        return self.result


@dataclass(eq=False, kw_only=True)
class _ReserveOp(_Op):
    attempt: AttemptKey
    run_id: str
    model: str
    worst_case_usd: float
    ceilings: Ceilings
    day: str

    @property
    def action(self) -> str:
        return "reserve " + self.key


@dataclass(eq=False, kw_only=True)
class _SettleOp(_Op):
    status: SettlementStatus
    cost_usd: float
    prompt_tokens: int | None
    completion_tokens: int | None
    payload: str | None
    error_text: str | None

    @property
    def action(self) -> str:
        return "settle " + self.key


@dataclass
class _BatchState:
    """What one write transaction has read and decided so far, applied one operation at a time.

    `rows`: the journal rows of the batch's keys (None: no row), as each operation leaves them.
    `committed`: nano-USD committed per (scope, key) for every scope a reservation of the batch
    checks, as read after the lock plus the batch's own changes. `deltas`: (spent, outstanding)
    nano-USD to add to each touched total when the batch is written.
    """

    rows: dict[str, JournalRow | None]
    committed: dict[tuple[CeilingName, str], int]
    deltas: dict[tuple[CeilingName, str], list[int]] = field(default_factory=dict)

    def apply(self, op: _Op) -> object:
        """The operation's outcome (a JournalError is the outcome of a refused operation)."""
        if isinstance(op, _ReserveOp):
            return self._reserve(op)
        assert isinstance(op, _SettleOp)
        return self._settle(op)

    def _add(self, scopes: Mapping[CeilingName, str], spent: int, outstanding: int) -> None:
        for scope, key in scopes.items():
            delta = self.deltas.setdefault((scope, key), [0, 0])
            delta[0] += spent
            delta[1] += outstanding
            if (scope, key) in self.committed:
                self.committed[(scope, key)] += spent + outstanding

    def _reserve(self, op: _ReserveOp) -> object:
        existing = self.rows.get(op.key)
        if existing is not None:
            if existing.model != op.model:
                return JournalError(
                    f"attempt {op.key} is recorded with model {existing.model!r}, not {op.model!r}: "
                    "attempt keys must determine the model"
                )
            if existing.status != "refused":
                return Reservation(row=existing, is_new=False)
        scopes = scope_keys(op.attempt, op.day)
        committed = [self.committed[(scope, scopes[scope])] for scope in ("scenario", "suite", "day")]
        breach = _first_breach(op.ceilings, committed, op.worst_case_usd)
        attempt = op.attempt
        row = JournalRow(
            attempt_key=op.key,
            run_id=op.run_id,
            build=attempt.build,
            judge_version=attempt.judge_version,
            scenario_id=attempt.scenario_id,
            repeat=attempt.repeat,
            role=attempt.role,
            try_no=attempt.try_no,
            generation=attempt.generation,
            model=op.model,
            status="reserved" if breach is None else "refused",
            ceiling=None if breach is None else breach.ceiling,
            reserved_usd=op.worst_case_usd,
            cost_usd=None,
            prompt_tokens=None,
            completion_tokens=None,
            day=op.day,
            created_at=op.moment,
            settled_at=None,
            payload=None,
            error=None,
        )
        self.rows[op.key] = row
        if breach is None:
            self._add(scopes, 0, _nusd(op.worst_case_usd))
            return Reservation(row=row, is_new=True)
        return Refusal(
            row=row,
            ceiling=breach.ceiling,
            limit_usd=breach.limit_usd,
            committed_usd=breach.committed_usd,
            worst_case_usd=op.worst_case_usd,
        )

    def _settle(self, op: _SettleOp) -> object:
        existing = self.rows.get(op.key)
        if existing is None:
            return JournalError(f"cannot settle {op.key}: it was never reserved")
        if existing.status == "refused":
            return JournalError(f"cannot settle {op.key}: its reservation was refused ({existing.ceiling})")
        if existing.status != "reserved":
            return existing  # already settled or failed: the first settlement wins
        row = dataclasses.replace(
            existing,
            status=op.status,
            cost_usd=op.cost_usd,
            prompt_tokens=op.prompt_tokens,
            completion_tokens=op.completion_tokens,
            settled_at=op.moment,
            payload=op.payload,
            error=op.error_text,
        )
        self.rows[op.key] = row
        # The actual cost replaces the worst case in the attempt's scenario, suite and day.
        self._add(scope_keys(existing, existing.day), _nusd(op.cost_usd), -_nusd(existing.reserved_usd))
        return row


@dataclass(frozen=True)
class LeaseRow:
    """Who holds the lease on one (build, asset, partition), and until when (see "Leases")."""

    build: str
    asset: str
    partition_key: str
    holder: str
    host: str
    pid: int
    run_id: str | None
    acquired_at: datetime
    heartbeat_at: datetime
    expires_at: datetime

    @property
    def target(self) -> str:
        return f"{self.asset} [{self.partition_key}] of build {self.build}"

    def describe(self) -> str:
        """The holder, for a refusal or a wait message."""
        run = f", run {self.run_id}" if self.run_id else ""
        return (
            f"process {self.pid} on {self.host}{run}, since {self.acquired_at:%Y-%m-%d %H:%M:%S} UTC "
            f"(lease expires {self.expires_at:%H:%M:%S} UTC unless renewed)"
        )


@dataclass(frozen=True)
class LeaseGrant:
    """The outcome of `acquire_lease`: `granted`, and the lease row as it now stands (the holder's)."""

    granted: bool
    row: LeaseRow


class LeaseHeld(JournalError):
    """Another run holds the lease; `row` names it."""

    def __init__(self, row: LeaseRow) -> None:
        self.row = row
        super().__init__(f"{row.target} is being run by {row.describe()}")


_TOKEN: tuple[int, str] = (0, "")


def process_holder() -> tuple[str, str, int]:
    """(holder, host, pid) of this process: `host:pid:token`, the token new per process (after fork too)."""
    global _TOKEN
    pid = os.getpid()
    if _TOKEN[0] != pid:
        _TOKEN = (pid, uuid.uuid4().hex[:12])
    host = socket.gethostname()
    return f"{host}:{pid}:{_TOKEN[1]}", host, pid


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lease_from_mapping(m: Mapping[Any, Any]) -> LeaseRow:
    moments = [_as_utc(m[name]) for name in ("acquired_at", "heartbeat_at", "expires_at")]
    assert all(moment is not None for moment in moments)  # NOT NULL columns
    return LeaseRow(
        m["build"],
        m["asset"],
        m["partition_key"],
        m["holder"],
        m["host"],
        int(m["pid"]),
        m["run_id"],
        *cast("list[datetime]", moments),
    )


def _lease_where(build: str, asset: str, partition_key: str) -> Any:
    return sa.and_(
        _LEASES.c.build == build, _LEASES.c.asset == asset, _LEASES.c.partition_key == partition_key
    )


# --- the journal --------------------------------------------------------------------------------


class SpendJournal:
    """The spend journal at `url`, opened, verified and with its schema in place.

    `url`: `sqlite:///path/journal.sqlite` (parent directories are created; the file is put in WAL
    mode) or `postgresql+psycopg://<user>:<password>@host:port/db` (`postgresql://` means psycopg too).
    Raises JournalError, before anything is written, when the URL is unsupported, the server is
    unreachable, the file is not a SQLite database or is corrupt, another program holds a lock on
    the journal for longer than `lock_wait_s`, or an existing journal table lacks columns.
    """

    def __init__(self, url: str, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> None:
        parsed = _parse_url(url)
        self._url_text = parsed.render_as_string(hide_password=True)
        self._dialect: Literal["sqlite", "postgresql"] = cast(
            Literal["sqlite", "postgresql"], parsed.get_backend_name()
        )
        # Threads of one process take this lock before they contend for the database's write lock
        # (SQLite's busy handler sleeps and polls; many waiters on one advisory lock convoy on the GIL).
        # Reservations and settlements reach it one batch at a time (group commit, below).
        self._local_lock = threading.Lock()
        # Group commit: reservations and settlements queue here; one thread at a time writes them.
        self._queue_lock = threading.Lock()
        self._queue: list[_Op] = []
        self._writing = False
        if self._dialect == "sqlite":
            path = _sqlite_path(parsed)
            _probe_sqlite(path, lock_wait_s)
            self._engine = _sqlite_engine(parsed)
        else:
            self._engine = _postgres_engine(parsed)
        try:
            self._create_schema(lock_wait_s)
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def dialect(self) -> Literal["sqlite", "postgresql"]:
        return self._dialect

    @property
    def url(self) -> str:
        """The journal URL with any password masked."""
        return self._url_text

    def close(self) -> None:
        """Release every pooled connection. The journal must not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> SpendJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def reserve(
        self,
        attempt: AttemptKey,
        *,
        run_id: str,
        model: str,
        worst_case_usd: float,
        ceilings: Ceilings,
        now: datetime,
    ) -> Reservation | Refusal:
        """Reserve `worst_case_usd` for `attempt`, atomically against every process and machine.

        In one transaction under the journal's write lock: when the key is already recorded (and not
        refused) nothing is written and `Reservation(is_new=False)` carries the existing row. Otherwise
        the committed spend of the attempt's scenario, suite and day (UTC day of `now`) is read from
        their running totals (O(1), however full the day) and each non-None ceiling is checked,
        narrowest first: a ceiling of 0 refuses everything, any other refuses when committed + worst
        case exceeds it (in nano-USD). The outcome is written: a `reserved` row, whose worst case is
        added to the three totals (-> `Reservation(is_new=True)`), or a `refused` row naming the first
        ceiling hit, which adds nothing (-> `Refusal`).
        A key refused earlier is checked again (ceilings or the day may have changed) and its row
        updated with the new outcome, so a resumed run can do what an earlier one could not afford.
        Returns once the outcome is committed (the transaction may carry other callers' operations
        too: see "Group commit" in the module docstring).

        Raises ValueError for a negative, non-finite or absurd (> 1e6 USD) worst case or a naive `now`;
        JournalError when the key exists with another model (the caller's keys are not deterministic)
        or the database fails.
        """
        _check_usd("worst_case_usd", worst_case_usd, at_most=_MAX_ATTEMPT_USD)
        moment = _utc(now)
        op = _ReserveOp(
            key=attempt.key,
            attempt=attempt,
            run_id=run_id,
            model=model,
            worst_case_usd=float(worst_case_usd),
            ceilings=ceilings,
            moment=moment,
            day=moment.date().isoformat(),
        )
        return cast("Reservation | Refusal", self._submit(op))

    def settle(
        self,
        attempt: AttemptKey,
        *,
        status: SettlementStatus,
        cost_usd: float,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        payload: str | None,
        error: str | None,
        now: datetime,
    ) -> JournalRow:
        """Record what a reserved attempt actually cost and produced; returns the row as stored.

        `status`: `settled` (the call returned; `payload` is the output or raw verdict text, kept so
        a later run can reuse it) or `failed` (the provider errored; `cost_usd` is what it charged,
        usually 0). Either way the reservation's worst case stops counting and `cost_usd` counts
        instead, even when it exceeds the worst case: the same transaction adds (cost - worst case)
        to the running totals of the attempt's scenario, suite and day (the day it was reserved on).
        `error` is scrubbed of credentials and capped.
        The first settlement wins: settling a settled or failed attempt again changes nothing and
        returns the stored row. Raises JournalError for an attempt that was never reserved or was
        refused, ValueError for a bad status, cost or token count or a naive `now`.
        """
        if status not in ("settled", "failed"):
            raise ValueError(f"status must be 'settled' or 'failed', not {status!r}")
        _check_usd("cost_usd", cost_usd, at_most=_MAX_ATTEMPT_USD)
        for name, tokens in (("prompt_tokens", prompt_tokens), ("completion_tokens", completion_tokens)):
            if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
                raise ValueError(f"{name} must be None or an int >= 0, not {tokens!r}")
        op = _SettleOp(
            key=attempt.key,
            status=status,
            cost_usd=float(cost_usd),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            payload=payload,
            error_text=None if error is None else scrub_error_text(error),
            moment=_utc(now),
        )
        return cast(JournalRow, self._submit(op))

    # -- reading ---------------------------------------------------------------------------------

    def lookup(self, attempt: AttemptKey) -> JournalRow | None:
        """The journal's row for `attempt` (a refused reservation is a row too), or None if it has none."""
        with self._database_errors("lookup " + attempt.key), self._read_transaction() as conn:
            return _select_row(conn, attempt.key)

    def rows(
        self,
        *,
        build: str | None = None,
        judge_version: str | None = None,
        role: Role | None = None,
    ) -> list[JournalRow]:
        """Every row matching the given filters (None: no filter), ordered by attempt key.

        Subject rows have no judge version: `rows(build=b, role="subject")` is a build's subject
        spend, `rows(build=b, judge_version=v)` the spend of judge version v on it.
        """
        query = sa.select(_TABLE).order_by(_TABLE.c.attempt_key)
        if build is not None:
            query = query.where(_TABLE.c.build == build)
        if judge_version is not None:
            query = query.where(_TABLE.c.judge_version == judge_version)
        if role is not None:
            query = query.where(_TABLE.c.role == role)
        with self._database_errors("read rows"), self._read_transaction() as conn:
            return [_row_from_mapping(m) for m in conn.execute(query).mappings()]

    def day_total(self, day: date) -> SpendTotal:
        """Spend recorded on the UTC calendar day `day` (rows count on the day they were reserved)."""
        day_text = day.isoformat()
        with self._database_errors("total of day " + day_text), self._read_transaction() as conn:
            found = conn.execute(_SELECT_DAY_TOTAL, {"k_day": day_text}).first()
        spent, outstanding = (0, 0) if found is None else found
        return SpendTotal(day=day_text, spent_usd=_usd(spent), outstanding_usd=_usd(outstanding))

    def scope_totals(self) -> list[ScopeTotal]:
        """Every running total in `spend_totals`, ordered by scope and key.

        A scope has a total once one of its attempts was reserved (refusals alone create none).
        """
        with self._database_errors("read totals"), self._read_transaction() as conn:
            return [
                ScopeTotal(
                    scope=cast(CeilingName, m["scope"]),
                    key=m["scope_key"],
                    spent_usd=_usd(m["spent_nusd"]),
                    outstanding_usd=_usd(m["outstanding_nusd"]),
                )
                for m in conn.execute(_SELECT_TOTALS).mappings()
            ]

    # -- leases (see "Leases" in the module docstring) ------------------------------------------

    def acquire_lease(
        self,
        build: str,
        asset: str,
        partition_key: str,
        *,
        holder: str,
        host: str,
        pid: int,
        run_id: str | None,
        ttl_s: float,
        now: datetime,
    ) -> LeaseGrant:
        """Take (or renew, for its own holder) the lease on (build, asset, partition) until now + ttl_s.

        Granted when there is no lease, it is `holder`'s, it expired (`expires_at <= now`), or its
        holder is a process on `host` that no longer exists. Otherwise not granted, with the holder's row.
        """
        if not (isinstance(ttl_s, int | float) and math.isfinite(ttl_s) and ttl_s > 0):
            raise ValueError(f"ttl_s must be a finite number of seconds > 0, not {ttl_s!r}")
        moment = _utc(now)
        where = _lease_where(build, asset, partition_key)
        with self._database_errors(f"lease {asset} [{partition_key}]"):
            with self._write_transaction(serialize=True) as conn:
                found = conn.execute(sa.select(_LEASES).where(where)).mappings().first()
                current = None if found is None else _lease_from_mapping(found)
                if current is not None and current.holder != holder:
                    lapsed = current.expires_at <= moment
                    dead = current.host == host and current.pid != pid and not pid_alive(current.pid)
                    if not (lapsed or dead):
                        return LeaseGrant(False, current)
                mine = current is not None and current.holder == holder
                row = LeaseRow(
                    build,
                    asset,
                    partition_key,
                    holder,
                    host,
                    pid,
                    run_id if not mine or current is None else current.run_id,
                    current.acquired_at if mine and current is not None else moment,
                    moment,
                    moment + timedelta(seconds=ttl_s),
                )
                values = dataclasses.asdict(row)
                if current is None:
                    conn.execute(sa.insert(_LEASES).values(values))
                else:
                    conn.execute(sa.update(_LEASES).where(where).values(values))
                return LeaseGrant(True, row)

    def renew_lease(
        self, build: str, asset: str, partition_key: str, *, holder: str, ttl_s: float, now: datetime
    ) -> bool:
        """Extend `holder`'s lease to now + ttl_s; False when it is no longer `holder`'s (it was lost)."""
        moment = _utc(now)
        where = sa.and_(_lease_where(build, asset, partition_key), _LEASES.c.holder == holder)
        with self._database_errors(f"renew lease {asset} [{partition_key}]"):
            with self._write_transaction(serialize=True) as conn:
                updated = conn.execute(
                    sa.update(_LEASES)
                    .where(where)
                    .values(heartbeat_at=moment, expires_at=moment + timedelta(seconds=ttl_s))
                ).rowcount
        return bool(updated)

    def release_lease(self, build: str, asset: str, partition_key: str, *, holder: str) -> bool:
        """Drop `holder`'s lease; False when it was not `holder`'s (lost, or never taken)."""
        where = sa.and_(_lease_where(build, asset, partition_key), _LEASES.c.holder == holder)
        with self._database_errors(f"release lease {asset} [{partition_key}]"):
            with self._write_transaction(serialize=True) as conn:
                return bool(conn.execute(sa.delete(_LEASES).where(where)).rowcount)

    def leases(self, *, build: str | None = None) -> list[LeaseRow]:
        """Every lease row (held or lapsed), ordered by build, asset and partition."""
        query = sa.select(_LEASES).order_by(_LEASES.c.build, _LEASES.c.asset, _LEASES.c.partition_key)
        if build is not None:
            query = query.where(_LEASES.c.build == build)
        with self._database_errors("read leases"), self._read_transaction() as conn:
            return [_lease_from_mapping(m) for m in conn.execute(query).mappings()]

    # -- internals -------------------------------------------------------------------------------

    def _create_schema(self, lock_wait_s: float) -> None:
        try:
            with self._write_transaction(serialize=True, lock_wait_s=lock_wait_s) as conn:
                had_totals = sa.inspect(conn).has_table(TOTALS_TABLE_NAME)
                _METADATA.create_all(conn)
                inspector = sa.inspect(conn)
                for table in (_TABLE, _TOTALS, _LEASES):
                    present = {c["name"] for c in inspector.get_columns(table.name)}
                    missing = sorted({c.name for c in table.columns} - present)
                    if missing:
                        raise JournalError(
                            f"the journal table {table.name} at {self._url_text} lacks columns {missing}: "
                            "it was written by an incompatible version; use a new journal"
                        )
                # Waits (at most lock_wait_s on PostgreSQL) for a lock another session holds on the table.
                conn.execute(sa.select(_TABLE.c.attempt_key).limit(1))
                if not had_totals:
                    _migrate_to_totals(conn)
        except sa.exc.OperationalError as exc:
            if _is_lock_timeout(exc):
                raise JournalError(
                    f"the journal at {self._url_text} is locked by another program "
                    f"(waited {lock_wait_s:g} s): {_first_line(exc.orig)}"
                ) from exc
            raise JournalError(
                f"cannot reach the journal at {self._url_text}: {_first_line(exc.orig)}"
            ) from exc
        except sa.exc.SQLAlchemyError as exc:
            raise JournalError(f"cannot open the journal at {self._url_text}: {_first_line(exc)}") from exc

    def _submit(self, op: _Op) -> object:
        """Queue `op` and return its outcome once committed (or raise its error).

        Group commit: the first caller to find no writer becomes the writer and writes the queued
        operations (up to `_MAX_BATCH`, oldest first, its own among them) in one transaction, then
        hands the role to the oldest caller still queued. The others sleep until their operation is
        committed. One transaction (one lock acquisition, one commit) thus carries every operation
        that queued while the previous one ran: fewer lock hand-overs and commits per operation the
        busier the journal, in the order the operations queued.
        """
        with self._queue_lock:
            self._queue.append(op)
            lead = not self._writing
            self._writing = True
        if not lead:
            try:
                op.wake.wait()
            except BaseException:  # KeyboardInterrupt in the main thread: leave the queue cleanly
                self._abandon(op)
                raise
            if op.done:
                return op.outcome()
            # Woken without an outcome: this thread is the writer now, and its op the oldest queued.
        try:
            with self._queue_lock:
                batch = self._queue[:_MAX_BATCH]
                del self._queue[:_MAX_BATCH]
            self._write_batch(batch, op)
        finally:
            with self._queue_lock:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._writing = False
        return op.outcome()

    def _abandon(self, op: _Op) -> None:
        """`op`'s caller stopped waiting: drop `op` if no writer took it yet, and never strand the
        writer role on it. (An op a writer already took is written all the same, as if its caller
        had crashed after the call returned.)"""
        with self._queue_lock:
            if op in self._queue:
                self._queue.remove(op)
                if op.wake.is_set() and not op.done:  # it had been handed the writer role
                    if self._queue:
                        self._queue[0].wake.set()
                    else:
                        self._writing = False

    def _write_batch(self, batch: list[_Op], own: _Op) -> None:
        """Write `batch` in one transaction; every op in it is done (and woken) on return."""
        try:
            outcomes = self._apply_batch(batch)
        except sa.exc.SQLAlchemyError as exc:
            detail = _first_line(getattr(exc, "orig", None) or exc)
            for op in batch:
                op.error = JournalError(f"journal {self._url_text}: {op.action} failed: {detail}")
                op.error.__cause__ = exc
        except JournalError as exc:  # the batch found the journal broken (see `_write_state`)
            for op in batch:
                op.error = JournalError(f"journal {self._url_text}: {op.action} failed: {exc}")
        except BaseException as exc:  # a bug or an interrupt in this thread: the others learn of it
            for op in batch:
                op.error = (
                    exc if op is own else JournalError(f"{op.action} failed: the writer raised {exc!r}")
                )
        else:
            for op, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, JournalError):
                    op.error = outcome
                else:
                    op.result = outcome
        finally:
            for op in batch:
                op.done = True
                op.wake.set()

    def _apply_batch(self, batch: list[_Op]) -> list[object]:
        """Apply `batch` in order in one transaction; the outcomes, valid once this returns (committed)."""
        reserves = [op for op in batch if isinstance(op, _ReserveOp)]
        settling = len(reserves) < len(batch)
        keys = sorted({op.key for op in batch})
        # Reservations take the reservation lock (PostgreSQL; SQLite's write lock is taken anyway).
        with self._write_transaction(serialize=bool(reserves)) as conn:
            select = _SELECT_ROWS_FOR_UPDATE if settling and self._dialect == "postgresql" else _SELECT_ROWS
            stored: dict[str, JournalRow | None] = dict.fromkeys(keys)
            for found in conn.execute(select, {"b_keys": keys}).mappings():
                stored[found["attempt_key"]] = _row_from_mapping(found)
            committed: dict[tuple[CeilingName, str], int] = {}
            if reserves:
                checked = {(s, k) for op in reserves for s, k in scope_keys(op.attempt, op.day).items()}
                committed = dict.fromkeys(checked, 0)
                params = {f"k_{scope}": sorted(k for s, k in checked if s == scope) for scope in _SCOPES}
                for scope, key, total in conn.execute(_SELECT_COMMITTED, params):
                    committed[(scope, key)] = int(total)
            state = _BatchState(rows=dict(stored), committed=committed)
            outcomes = [state.apply(op) for op in batch]
            _write_state(conn, self._dialect, stored, state)
        return outcomes

    @contextmanager
    def _write_transaction(
        self, *, serialize: bool, lock_wait_s: float | None = None
    ) -> Iterator[Connection]:
        """A write transaction holding the write lock (SQLite always; PostgreSQL when `serialize`)."""
        local_lock = self._local_lock if self._dialect == "sqlite" or serialize else nullcontext()
        with local_lock, self._engine.connect() as conn:
            conn.execution_options(**{_WRITE_OPTION: True})
            with conn.begin():
                if self._dialect == "postgresql":
                    if lock_wait_s is not None:
                        conn.exec_driver_sql(
                            f"SET LOCAL lock_timeout = '{max(1, int(lock_wait_s * 1000))}ms'"
                        )
                    if serialize:
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK_KEY)))
                yield conn

    @contextmanager
    def _read_transaction(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _database_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            detail = _first_line(getattr(exc, "orig", None) or exc)
            raise JournalError(f"journal {self._url_text}: {action} failed: {detail}") from exc


def open_journal(url: str, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> SpendJournal:
    """Open the journal at `url`, verified and with its schema; call before any model call.

    The same as `SpendJournal(url, lock_wait_s=...)`; raises JournalError as described there.
    """
    return SpendJournal(url, lock_wait_s=lock_wait_s)


class HeldLease:
    """A lease this process holds (`hold_lease`); shared by nested holders of the same partition."""

    def __init__(self, journal: SpendJournal, build: str, asset: str, partition_key: str, ttl_s: float):
        self.journal, self.build, self.asset, self.partition_key = journal, build, asset, partition_key
        self.ttl_s = ttl_s
        self.holder = process_holder()[0]
        self.depth = 0
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def target(self) -> str:
        return f"{self.asset} [{self.partition_key}] of build {self.build}"

    def check(self) -> None:
        """Raise JournalError if the lease was lost (it lapsed and another run may have taken it)."""
        if self.lost is not None:
            raise JournalError(f"the lease on {self.target} was lost: {self.lost}; nothing was written")

    def _beat(self) -> None:
        interval = self.ttl_s / 3
        while not self._stop.wait(interval):
            try:
                kept = self.journal.renew_lease(
                    self.build,
                    self.asset,
                    self.partition_key,
                    holder=self.holder,
                    ttl_s=self.ttl_s,
                    now=datetime.now(UTC),
                )
            except JournalError:  # a failed heartbeat is retried at the next beat; the lease may lapse
                continue
            if not kept:
                self.lost = "another run took it after it lapsed (no heartbeat within its TTL)"
                return

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.target}", daemon=True)
        self._thread.start()

    def _finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost is None:
            self.journal.release_lease(self.build, self.asset, self.partition_key, holder=self.holder)


_HELD: dict[tuple[str, str, str, str], HeldLease] = {}
_HELD_LOCK = threading.Lock()
LEASE_POLL_S = 1.0
"""How often a waiting run (`hold_lease(wait=True)`) asks for the lease again."""


@contextmanager
def hold_lease(
    journal: SpendJournal,
    build: str,
    asset: str,
    partition_key: str,
    *,
    run_id: str | None,
    ttl_s: float,
    wait: bool = False,
    on_wait: Callable[[LeaseRow], None] | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Iterator[HeldLease]:
    """Hold the lease on (build, asset, partition) for the block, renewed by a heartbeat every ttl/3.

    Re-entrant within a process (a nested hold of the same partition shares the lease; the outermost
    releases it). When another run holds it: raise LeaseHeld naming it, or with `wait` call
    `on_wait(holder row)` once and ask again every LEASE_POLL_S until it is granted. Call
    `HeldLease.check()` before writing what the lease protects.
    """
    holder, host, pid = process_holder()
    slot = (journal.url, build, asset, partition_key)
    with _HELD_LOCK:
        held = _HELD.get(slot)
        if held is not None and held.holder == holder:
            held.depth += 1
    if held is None or held.holder != holder:
        told = False
        while True:
            grant = journal.acquire_lease(
                build,
                asset,
                partition_key,
                holder=holder,
                host=host,
                pid=pid,
                run_id=run_id,
                ttl_s=ttl_s,
                now=clock(),
            )
            if grant.granted:
                break
            if not wait:
                raise LeaseHeld(grant.row)
            if not told and on_wait is not None:
                on_wait(grant.row)
                told = True
            threading.Event().wait(LEASE_POLL_S)
        held = HeldLease(journal, build, asset, partition_key, ttl_s)
        held.depth = 1
        with _HELD_LOCK:
            _HELD[slot] = held
        held._start()
    try:
        yield held
    finally:
        with _HELD_LOCK:
            held.depth -= 1
            last = held.depth == 0
            if last:
                _HELD.pop(slot, None)
        if last:
            held._finish()


# --- helpers ------------------------------------------------------------------------------------


def _check_usd(name: str, value: object, *, at_most: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of USD >= 0, not {value!r}")
    if value > at_most:
        raise ValueError(f"{name} must be at most {at_most:g} USD, not {value!r}")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"timestamps must be timezone-aware (the day is a UTC day), not {moment!r}")
    return moment.astimezone(UTC)


def _first_line(exc: object) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise JournalError(
            "a SQLite journal needs a file (sqlite:///path/journal.sqlite): an in-memory database "
            "cannot be shared between processes"
        )
    path = Path(database)
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


def _select_row(conn: Connection, key: str) -> JournalRow | None:
    found = conn.execute(_SELECT_ROW, {"b_key": key}).mappings().first()
    return None if found is None else _row_from_mapping(found)


def _first_breach(
    ceilings: Ceilings, committed: Sequence[int | None], worst_case_usd: float
) -> _Breach | None:
    """The narrowest ceiling the reservation would break, or None.

    `committed`: nano-USD committed in the attempt's scenario, suite and day (None: no total yet).
    """
    worst = _nusd(worst_case_usd)
    limits = (
        ("scenario", ceilings.scenario_usd),
        ("suite", ceilings.suite_usd),
        ("day", ceilings.day_usd),
    )
    for (name, limit), total in zip(limits, committed, strict=True):
        if limit is None:
            continue
        total = total or 0
        if limit <= 0 or total + worst > _nusd(limit):
            return _Breach(cast(CeilingName, name), limit, _usd(total))
    return None


def scope_keys(attempt: AttemptKey | JournalRow, day: str) -> dict[CeilingName, str]:
    """The `spend_totals` keys of an attempt's scenario, suite and day (`day`: its UTC day, ISO format).

    Scenario `{build}/{judge_version or '-'}/{scenario_id}/{generation}`, suite
    `{build}/{judge_version or '-'}/{generation}`, day `YYYY-MM-DD`. Parts are joined with '/', which
    no part may contain, so a key names exactly one scope.
    """
    return _scope_keys(attempt.build, attempt.judge_version, attempt.scenario_id, attempt.generation, day)


def _scope_keys(
    build: str, judge_version: str | None, scenario_id: str, generation: int, day: str
) -> dict[CeilingName, str]:
    suite = f"{build}/{judge_version or '-'}/{generation}"
    return {
        "scenario": f"{build}/{judge_version or '-'}/{scenario_id}/{generation}",
        "suite": suite,
        "day": day,
    }


def _nusd(usd: float) -> int:
    """USD as integer nano-USD, the unit of `spend_totals` (rounded; a row counts as `_nusd` of it)."""
    return round(usd * 1e9)


def _usd(nusd: int | None) -> float:
    return 0.0 if nusd is None else int(nusd) / 1e9


def _write_state(
    conn: Connection, dialect: str, stored: Mapping[str, JournalRow | None], state: _BatchState
) -> None:
    """Write what a batch changed: new and changed rows in key order, then totals in `_SCOPES` order."""
    changed = sorted(key for key, row in state.rows.items() if row is not None and row != stored[key])
    inserts = [_row_values(state.rows[key], _COLUMN_NAMES) for key in changed if stored[key] is None]
    if inserts:
        if dialect == "postgresql":
            conn.execute(_PG_INSERT_ROWS, _columns(inserts))
        else:
            conn.execute(_INSERT_ROW, inserts)
    for status, columns in _UPDATE_COLUMNS.items():
        updates = [
            {"b_key": key, **_row_values(state.rows[key], columns)}
            for key in changed
            if (old := stored[key]) is not None and old.status == status
        ]
        if not updates:
            continue
        if dialect == "postgresql" and status == "reserved":
            updated = conn.execute(_PG_SETTLE_ROWS, _columns(updates)).rowcount
        else:
            updated = conn.execute(_UPDATE_ROW[status], updates).rowcount
        if updated != len(updates):  # a row changed under the lock: a writer broke the protocol
            raise JournalError(f"journal rows changed under the write lock ({updated} of {len(updates)})")
    if state.deltas:
        order = sorted(state.deltas, key=lambda scope_key: (_SCOPE_RANK[scope_key[0]], scope_key[1]))
        totals = [
            {
                "scope": scope,
                "scope_key": key,
                "d_spent": state.deltas[(scope, key)][0],
                "d_outstanding": state.deltas[(scope, key)][1],
            }
            for scope, key in order
        ]
        if dialect == "postgresql":
            conn.execute(_PG_UPSERT_TOTALS, _columns(totals))
        else:
            conn.execute(_UPSERT_TOTAL, totals)


def _columns(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts (all with the same keys) as one list per key: the arrays of a `_pg_unnest`."""
    return {name: [record[name] for record in records] for name in records[0]}


def _row_values(row: JournalRow | None, columns: tuple[str, ...]) -> dict[str, Any]:
    assert row is not None
    return {name: getattr(row, name) for name in columns}


def _migrate_to_totals(conn: Connection) -> None:
    """Fill the just-created `spend_totals` from the rows of a journal written before it existed.

    Runs in the schema transaction, under the write lock (SQLite) or reservation lock (PostgreSQL),
    so no reservation of this version runs meanwhile. Each row counts as `_nusd` of its committed
    amount, exactly as `reserve` and `settle` add it, so the totals equal a from-rows recomputation.
    Then swaps the covering indexes the row sums needed for the one `rows()` needs.
    """
    totals: dict[tuple[str, str], list[int]] = {}
    columns = (
        _TABLE.c.build,
        _TABLE.c.judge_version,
        _TABLE.c.scenario_id,
        _TABLE.c.generation,
        _TABLE.c.day,
        _TABLE.c.status,
        _TABLE.c.reserved_usd,
        _TABLE.c.cost_usd,
    )
    query = sa.select(*columns).where(_TABLE.c.status != "refused")
    for row in conn.execute(query, execution_options={"yield_per": 10_000}).mappings():
        if row["status"] == "reserved":
            delta = (0, _nusd(row["reserved_usd"]))
        else:  # settled or failed
            delta = (_nusd(row["cost_usd"] or 0.0), 0)
        keys = _scope_keys(
            row["build"], row["judge_version"], row["scenario_id"], row["generation"], row["day"]
        )
        for scope, key in keys.items():
            total = totals.setdefault((scope, key), [0, 0])
            total[0] += delta[0]
            total[1] += delta[1]
    if totals:
        conn.execute(
            sa.insert(_TOTALS),
            [
                {"scope": scope, "scope_key": key, "spent_nusd": spent, "outstanding_nusd": outstanding}
                for (scope, key), (spent, outstanding) in totals.items()
            ],
        )
    for name in _OBSOLETE_INDEXES:
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
    for index in _TABLE.indexes:
        index.create(conn, checkfirst=True)


def _as_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    # SQLite hands back the naive UTC value it was given; PostgreSQL an aware one.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _row_from_mapping(m: Mapping[Any, Any]) -> JournalRow:
    created_at = _as_utc(m["created_at"])
    assert created_at is not None  # NOT NULL column
    return JournalRow(
        attempt_key=m["attempt_key"],
        run_id=m["run_id"],
        build=m["build"],
        judge_version=m["judge_version"],
        scenario_id=m["scenario_id"],
        repeat=int(m["repeat"]),
        role=cast(Role, m["role"]),
        try_no=int(m["try_no"]),
        generation=int(m["generation"]),
        model=m["model"],
        status=cast(AttemptStatus, m["status"]),
        ceiling=cast("CeilingName | None", m["ceiling"]),
        reserved_usd=float(m["reserved_usd"]),
        cost_usd=None if m["cost_usd"] is None else float(m["cost_usd"]),
        prompt_tokens=m["prompt_tokens"],
        completion_tokens=m["completion_tokens"],
        day=m["day"],
        created_at=created_at,
        settled_at=_as_utc(m["settled_at"]),
        payload=m["payload"],
        error=m["error"],
    )
