"""The journal's values: ceilings, rows, reservations, refusals, totals and leases as read back,
and the spend scopes an attempt counts against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ._keys import AttemptKey, Role

AttemptStatus = Literal["reserved", "settled", "failed", "refused"]


SettlementStatus = Literal["settled", "failed"]


CeilingName = Literal["scenario", "suite", "day"]


# The largest worst case or cost one attempt may record: totals are 64-bit integer nano-USD.
_MAX_ATTEMPT_USD = 1e6


class JournalError(Exception):
    """The journal cannot be used: unreachable, corrupt, locked, incompatible, or misused."""


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
class ScopeTotal:
    """The running total of one spend scope, as `spend_totals` holds it (see the module docstring).

    `scope` and `key`: ('day', '2026-11-30'), ('suite', 'b1/rubric-v1/0') or
    ('scenario', 'b1/rubric-v1/s1/0'); a subject scope has '-' for its judge version.
    `spent_usd`: actual cost of settled and failed attempts; it never decreases.
    `outstanding_usd`: worst case of reservations not yet settled.
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


def _as_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    # SQLite hands back the naive UTC value it was given; PostgreSQL an aware one.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
