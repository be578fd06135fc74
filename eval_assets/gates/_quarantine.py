"""Flaky-test quarantine for ordinary (non-gate) tests, docs/methods.md: flaky tests.

Rules, with the clock injected:

- a test that fails is retried once; the retry is recorded, and the retry rate is reported even
  when everything ends green;
- a **failure** is a run of a test in which any try failed (a failure rescued by the retry counts:
  that is what flakiness looks like); at most one failure per run;
- a second failure within 30 days of an earlier one quarantines the test, starting at that second
  failure (which therefore does not block);
- a quarantine ends 14 days after it began whether or not the test was fixed; failures during a
  quarantine are recorded but do not extend it, and after it ends the count starts again from zero
  (otherwise the old failures would re-quarantine the test at its next failure, and the expiry
  would mean nothing);
- quarantined tests still run and are recorded; they just do not block.

Gates are never retried and never quarantined: nothing here is consulted for a gate.

History is the append-only `test_quarantine` dataset in the warehouse (one row per test run);
`WarehouseQuarantineStore` reads it, `record_suite` appends to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from eval_assets.warehouse import Warehouse

FAILURE_WINDOW = timedelta(days=30)
QUARANTINE_LENGTH = timedelta(days=14)

TryStatus = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class Quarantine:
    """A quarantine: from `start` (the failure that caused it) until `end`, exclusive."""

    start: datetime
    end: datetime

    def active(self, now: datetime) -> bool:
        return self.start <= now < self.end


def quarantine_at(failures: Iterable[datetime], now: datetime) -> Quarantine | None:
    """The quarantine in force at `now` given a test's failure times (any order), or None.

    Replays the rules (module doc) over the failures at or before `now`.
    """
    current: Quarantine | None = None
    recent: list[datetime] = []
    for t in sorted(f for f in failures if f <= now):
        if current is not None:
            if t < current.end:
                continue  # recorded, but does not extend the quarantine
            current, recent = None, []  # expired: the count starts again
        recent = [f for f in recent if t - f <= FAILURE_WINDOW]
        if recent:
            current, recent = Quarantine(t, t + QUARANTINE_LENGTH), []
        else:
            recent.append(t)
    return current if current is not None and current.active(now) else None


def naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _aware(moment: Any) -> datetime:
    value: datetime = moment.to_pydatetime() if hasattr(moment, "to_pydatetime") else moment
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class TestRecord:
    """One run of one non-gate test (recorded as a row of `test_quarantine`).

    `status` is the final status (after the retry, if any); `first_try` the first try's;
    `failed` whether this run counts as a failure (any try failed).
    """

    __test__ = False  # not a pytest class

    test_id: str
    build: str | None
    ran_at: datetime
    status: TryStatus
    first_try: TryStatus
    retried: bool
    quarantined: bool
    quarantined_from: datetime | None
    quarantined_until: datetime | None
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.first_try != "pass" or self.status != "pass"


class QuarantineStore(Protocol):
    """Where past test runs are read from. The runner only reads; `record_suite` writes."""

    def failure_times(self, test_ids: Sequence[str]) -> dict[str, list[datetime]]:
        """For each id, the times (aware, UTC) of its past failures; ids without any map to []."""
        ...


@dataclass
class MemoryQuarantineStore:
    """An in-memory history (tests, or a suite run with no warehouse). `add` appends records."""

    records: list[TestRecord] = field(default_factory=list)

    def add(self, records: Iterable[TestRecord]) -> None:
        """Append records (as `record_suite` appends rows to the warehouse)."""
        self.records.extend(records)

    def failure_times(self, test_ids: Sequence[str]) -> dict[str, list[datetime]]:
        out: dict[str, list[datetime]] = {t: [] for t in test_ids}
        for r in self.records:
            if r.test_id in out and r.failed:
                out[r.test_id].append(_aware(r.ran_at))
        return out


class WarehouseQuarantineStore:
    """Reads failures from the warehouse's append-only `test_quarantine` view."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse
        warehouse.initialise()

    def failure_times(self, test_ids: Sequence[str]) -> dict[str, list[datetime]]:
        out: dict[str, list[datetime]] = {t: [] for t in test_ids}
        if not test_ids:
            return out
        frame = self.warehouse.query(
            "SELECT test_id, ran_at FROM test_quarantine WHERE failed ORDER BY ran_at, test_id"
        )
        for test_id, ran_at in zip(frame["test_id"], frame["ran_at"], strict=True):
            if test_id in out:
                out[test_id].append(_aware(ran_at))
        return out
