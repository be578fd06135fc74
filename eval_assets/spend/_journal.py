"""The spend journal: the single source of truth for what model calls cost.

Every model call (subject or judge, every try) is an attempt with a deterministic key. Before the
call the caller reserves its worst-case cost; the reservation is checked against the scenario, suite
and day ceilings in one atomic transaction, across threads, processes and machines. After the call
the caller settles it with the actual cost and the output, so a later run reuses the output instead
of paying again. A refused reservation is recorded too, naming the ceiling it hit.

Backends: SQLite (WAL) for one machine, PostgreSQL when runs span machines, both through SQLAlchemy
Core and one contract test module (tests/test_contract_spend_journal.py). Spend scopes, running totals,
group commit, locking, why a ceiling holds on PostgreSQL, durability and leases: docs/journal.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import UTC, date, datetime, timedelta
from typing import Literal, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eval_assets.redact import scrub_error_text

from ._backends import (
    _WRITE_OPTION,
    DEFAULT_LOCK_WAIT_S,
    WriteTurn,
    _is_lock_timeout,
    _parse_url,
    _postgres_engine,
    _probe_sqlite,
    _sqlite_engine,
    _sqlite_path,
)
from ._batch import _MAX_BATCH, _BatchState, _Op, _ReserveOp, _resolve_futures, _SettleOp, _write_state
from ._keys import AttemptKey, Role
from ._leases import _lease_where, pid_alive, process_holder
from ._schema import (
    _LEASES,
    _METADATA,
    _SCOPES,
    _SELECT_COMMITTED,
    _SELECT_DAY_TOTAL,
    _SELECT_ROWS,
    _SELECT_ROWS_FOR_UPDATE,
    _SELECT_TOTALS,
    _TABLE,
    _TOTALS,
    TOTALS_TABLE_NAME,
    _lease_from_mapping,
    _migrate_to_totals,
    _row_from_mapping,
    _select_row,
)
from ._values import (
    _MAX_ATTEMPT_USD,
    CeilingName,
    Ceilings,
    JournalError,
    JournalRow,
    LeaseGrant,
    LeaseHeld,
    LeaseRow,
    Refusal,
    Reservation,
    ScopeTotal,
    SettlementStatus,
    _check_usd,
    _first_line,
    _usd,
    _utc,
    scope_keys,
)

# One PostgreSQL advisory lock key for every reservation ("evjrnl" in ASCII).
_ADVISORY_LOCK_KEY = 0x65766A726E6C


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
        self._drainer: ThreadPoolExecutor | None = None  # writes event-loop callers' operations
        self._turn: WriteTurn | None = None
        if self._dialect == "sqlite":
            path = _sqlite_path(parsed)
            _probe_sqlite(path, lock_wait_s)
            self._engine = _sqlite_engine(parsed)
            self._turn = WriteTurn(path)  # the host's processes take turns at the write lock
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
        with self._queue_lock:
            drainer, self._drainer = self._drainer, None
        if drainer is not None:
            drainer.shutdown(wait=True)
        self._engine.dispose()
        if self._turn is not None:
            self._turn.close()

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
        op = _reserve_op(attempt, run_id, model, worst_case_usd, ceilings, now)
        return cast("Reservation | Refusal", self._submit(op))

    async def reserve_async(
        self,
        attempt: AttemptKey,
        *,
        run_id: str,
        model: str,
        worst_case_usd: float,
        ceilings: Ceilings,
        now: datetime,
    ) -> Reservation | Refusal:
        """`reserve` for a caller on an event loop: the same operation, checks, outcome and errors,
        returned once committed, without a thread held while it waits (`_submit_async`)."""
        op = _reserve_op(attempt, run_id, model, worst_case_usd, ceilings, now)
        return cast("Reservation | Refusal", await self._submit_async(op))

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
        op = _settle_op(attempt, status, cost_usd, prompt_tokens, completion_tokens, payload, error, now)
        return cast(JournalRow, self._submit(op))

    async def settle_async(
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
        """`settle` for a caller on an event loop, as `reserve_async` is `reserve`'s."""
        op = _settle_op(attempt, status, cost_usd, prompt_tokens, completion_tokens, payload, error, now)
        return cast(JournalRow, await self._submit_async(op))

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

    def ledger_rows(self, build: str, judge_version: str, size: int = 5000) -> Iterator[list[JournalRow]]:
        """The rows the cost ledger publishes for `judge_version` on `build` (its subject rows and that
        version's judge rows), ordered by attempt key, `size` at a time and without their payloads (the
        stored outputs, which the ledger does not publish): a large build's rows are never all held."""
        columns = [c for c in _TABLE.c if c.name != "payload"]
        query = (
            sa.select(*columns)
            .where(
                _TABLE.c.build == build,
                sa.or_(_TABLE.c.judge_version.is_(None), _TABLE.c.judge_version == judge_version),
            )
            .order_by(_TABLE.c.attempt_key)
        )
        with self._database_errors("read ledger rows"), self._read_transaction() as conn:
            result = conn.execution_options(yield_per=size).execute(query).mappings()
            for part in result.partitions(size):
                yield [_row_from_mapping({**m, "payload": None}) for m in part]

    def day_total(self, day: date) -> ScopeTotal:
        """Spend recorded on the UTC calendar day `day` (rows count on the day they were reserved)."""
        day_text = day.isoformat()
        with self._database_errors("total of day " + day_text), self._read_transaction() as conn:
            found = conn.execute(_SELECT_DAY_TOTAL, {"k_day": day_text}).first()
        spent, outstanding = (0, 0) if found is None else found
        return ScopeTotal("day", day_text, spent_usd=_usd(spent), outstanding_usd=_usd(outstanding))

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
                self._hand_over()
        return op.outcome()

    async def _submit_async(self, op: _Op) -> object:
        """`_submit` for a caller on an event loop: `op` queues with the threads' operations and
        is written in the same batches, and the caller awaits a future instead of holding a thread.
        When no writer is at work, the journal's drain thread becomes it (`_drain`). Its outcome is
        set on the caller's loop, one wake-up per batch (a thread per waiting caller and a hand-off per
        operation were the journal's largest share of the engine's CPU per call: docs/journal.md). A caller cancelled while it
        waits leaves its operation to be written all the same, as a thread's would be."""
        op.loop = asyncio.get_running_loop()
        op.future = op.loop.create_future()
        with self._queue_lock:
            self._queue.append(op)
            start = not self._writing
            self._writing = True
            if start:
                self._start_drain()
        return await op.future

    def _hand_over(self) -> None:
        """With the queue lock held, by the writer giving up its role: the oldest queued operation's
        thread writes next; if that operation is an event loop's, the drain thread does; with
        nothing queued, no one."""
        if not self._queue:
            self._writing = False
        elif self._queue[0].loop is None:
            self._queue[0].wake.set()
        else:
            self._start_drain()

    def _start_drain(self) -> None:
        """With the queue lock held and the writer role taken: run `_drain` on the drain thread."""
        if self._drainer is None:
            self._drainer = ThreadPoolExecutor(1, thread_name_prefix="evaltrack-journal")
        self._drainer.submit(self._drain)

    def _drain(self) -> None:
        """The writer on the drain thread: write the queued operations, oldest first, a batch at a
        time, while the oldest is an event loop's; then hand the role over (`_hand_over`)."""
        while True:
            with self._queue_lock:
                if not self._queue or self._queue[0].loop is None:
                    self._hand_over()
                    return
                batch = self._queue[:_MAX_BATCH]
                del self._queue[:_MAX_BATCH]
            self._write_batch(batch, None)

    def _abandon(self, op: _Op) -> None:
        """`op`'s caller stopped waiting: drop `op` if no writer took it yet, and never strand the
        writer role on it. (An op a writer already took is written all the same, as if its caller
        had crashed after the call returned.)"""
        with self._queue_lock:
            if op in self._queue:
                self._queue.remove(op)
                if op.wake.is_set() and not op.done:  # it had been handed the writer role
                    self._hand_over()

    def _write_batch(self, batch: list[_Op], own: _Op | None) -> None:
        """Write `batch` in one transaction; every op in it is done (and woken) on return, and its
        event-loop callers' outcomes are on their way to their loops."""
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
            _resolve_futures(batch)

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
        turn = self._turn.held() if self._turn is not None else nullcontext()
        with local_lock, turn, self._engine.connect() as conn:
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


def _reserve_op(
    attempt: AttemptKey, run_id: str, model: str, worst_case_usd: float, ceilings: Ceilings, now: datetime
) -> _ReserveOp:
    """`SpendJournal.reserve`'s operation, its arguments checked (ValueError)."""
    _check_usd("worst_case_usd", worst_case_usd, at_most=_MAX_ATTEMPT_USD)
    moment = _utc(now)
    return _ReserveOp(
        key=attempt.key,
        attempt=attempt,
        run_id=run_id,
        model=model,
        worst_case_usd=float(worst_case_usd),
        ceilings=ceilings,
        moment=moment,
        day=moment.date().isoformat(),
    )


def _settle_op(
    attempt: AttemptKey,
    status: SettlementStatus,
    cost_usd: float,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    payload: str | None,
    error: str | None,
    now: datetime,
) -> _SettleOp:
    """`SpendJournal.settle`'s operation, its arguments checked (ValueError), its error scrubbed."""
    if status not in ("settled", "failed"):
        raise ValueError(f"status must be 'settled' or 'failed', not {status!r}")
    _check_usd("cost_usd", cost_usd, at_most=_MAX_ATTEMPT_USD)
    for name, tokens in (("prompt_tokens", prompt_tokens), ("completion_tokens", completion_tokens)):
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            raise ValueError(f"{name} must be None or an int >= 0, not {tokens!r}")
    return _SettleOp(
        key=attempt.key,
        status=status,
        cost_usd=float(cost_usd),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        payload=payload,
        error_text=None if error is None else scrub_error_text(error),
        moment=_utc(now),
    )


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
