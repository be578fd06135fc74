"""Group commit: the operations queued by one process's threads, applied one after the other inside
one write transaction, and the totals and rows that transaction writes."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from sqlalchemy.engine import Connection

from ._keys import AttemptKey
from ._schema import (
    _COLUMN_NAMES,
    _INSERT_ROW,
    _PG_INSERT_ROWS,
    _PG_SETTLE_ROWS,
    _PG_UPSERT_TOTALS,
    _SCOPE_RANK,
    _UPDATE_COLUMNS,
    _UPDATE_ROW,
    _UPSERT_TOTAL,
    _columns,
    _row_values,
)
from ._values import (
    CeilingName,
    Ceilings,
    JournalError,
    JournalRow,
    Refusal,
    Reservation,
    SettlementStatus,
    _nusd,
    _usd,
    scope_keys,
)

# The most operations one write transaction carries (group commit).
_MAX_BATCH = 256


@dataclass(frozen=True)
class _Breach:
    ceiling: CeilingName
    limit_usd: float
    committed_usd: float


@dataclass(eq=False, kw_only=True)
class _Op:
    """One caller's write, queued for the process's writer (see `SpendJournal._submit`).

    A caller on a thread waits on `wake`; a caller on an event loop (`SpendJournal._submit_async`)
    awaits `future`, resolved on its `loop` once the operation is committed."""

    key: str
    moment: datetime
    wake: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    result: object = None
    error: BaseException | None = None
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[object] | None = None

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


def _resolve_futures(batch: Sequence[_Op]) -> None:
    """Hand each event-loop caller of `batch` its outcome, on its loop: one wake-up per loop and batch.
    A loop already closed has no caller left to tell."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Op]] = {}
    for op in batch:
        if op.loop is not None:
            by_loop.setdefault(op.loop, []).append(op)
    for loop, ops in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_outcomes, ops)
        except RuntimeError:  # the loop is closed
            continue


def _set_outcomes(ops: Sequence[_Op]) -> None:
    for op in ops:
        if op.future is None or op.future.done():  # its caller was cancelled: the write stands
            continue
        if op.error is not None:
            op.future.set_exception(op.error)
        else:
            op.future.set_result(op.result)


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
