"""Contract of the spend journal port (eval_assets/ports.py): every test runs on SQLite and on PostgreSQL.

The PostgreSQL parameter starts a throwaway cluster (tests/pg.py). When the server binaries are
missing, the PostgreSQL tests fail with the install hint; EVAL_TRACK_SKIP_PG=1 turns that into a
loud skip for machines that cannot install them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta, timezone
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Barrier as ProcessBarrier
from multiprocessing.synchronize import Event as ProcessEvent
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from eval_assets.spend import (
    AttemptKey,
    Ceilings,
    JournalError,
    JournalRow,
    LeaseHeld,
    Refusal,
    Reservation,
    SpendJournal,
    WriteTurn,
    hold_lease,
    journal_file,
    open_journal,
    process_holder,
)
from eval_assets.spend import journal_url as url_under  # the fixture below is named journal_url

try:  # tests/ imported as a package (tests/__init__.py present) or as a rootdir on sys.path
    from tests.pg import PostgresCluster, free_port, running_cluster
except ImportError:
    from pg import PostgresCluster, free_port, running_cluster  # type: ignore[no-redef]

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MODEL = "sim/agent"
IMPLEMENTATIONS = ("sqlite", "postgres")  # registered against the port (eval_assets/ports.py)


# --- postgres -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """One cluster for the session; fails (or skips loudly with EVAL_TRACK_SKIP_PG=1) without binaries."""
    with running_cluster("journal contract") as cluster:
        yield cluster


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(params=IMPLEMENTATIONS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def journal_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a journal that does not exist yet (its SQLite directory does not exist either)."""
    if backend == "sqlite":
        return url_under(tmp_path / "home")
    cluster: PostgresCluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database()


@pytest.fixture
def journal(journal_url: str) -> Iterator[SpendJournal]:
    with open_journal(journal_url) as opened:
        yield opened


def subject_key(
    scenario: str = "s1", *, build: str = "b1", repeat: int = 0, try_no: int = 1, generation: int = 0
) -> AttemptKey:
    return AttemptKey(build, None, scenario, repeat, "subject", try_no, generation)


def judge_key(
    scenario: str = "s1", *, judge_version: str = "rubric-v1", build: str = "b1", repeat: int = 0
) -> AttemptKey:
    return AttemptKey(build, judge_version, scenario, repeat, "judge", 1)


def reserve(
    journal: SpendJournal,
    key: AttemptKey,
    worst_usd: float = 0.5,
    ceilings: Ceilings = Ceilings(),  # noqa: B008 - frozen dataclass, safe as a default
    now: datetime = NOW,
    model: str = MODEL,
) -> Reservation | Refusal:
    return journal.reserve(
        key, run_id="run-1", model=model, worst_case_usd=worst_usd, ceilings=ceilings, now=now
    )


def settle(
    journal: SpendJournal, key: AttemptKey, cost_usd: float, payload: str = "output", now: datetime = NOW
) -> None:
    journal.settle(
        key,
        status="settled",
        cost_usd=cost_usd,
        prompt_tokens=10,
        completion_tokens=20,
        payload=payload,
        error=None,
        now=now,
    )


def fail(journal: SpendJournal, key: AttemptKey, cost_usd: float = 0.0) -> None:
    journal.settle(
        key,
        status="failed",
        cost_usd=cost_usd,
        prompt_tokens=None,
        completion_tokens=None,
        payload=None,
        error="provider 503",
        now=NOW,
    )


def nano(usd: float) -> int:
    return round(usd * 1e9)


def totals_from_rows(rows: list[JournalRow]) -> dict[tuple[str, str], tuple[int, int]]:
    """The oracle: (spent, outstanding) nano-USD of every scope, summed from the rows.

    Independent of the journal's code: the scope keys as the module docstring defines them, each
    row counted as its amount rounded to nano-USD; a scope with only refused rows has no total.
    """
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    for row in rows:
        if row.status == "refused":
            continue
        spent = nano(row.cost_usd or 0.0) if row.status in ("settled", "failed") else 0
        outstanding = nano(row.reserved_usd) if row.status == "reserved" else 0
        judge_version = row.judge_version or "-"
        for scope in (
            ("day", row.day),
            ("suite", f"{row.build}/{judge_version}/{row.generation}"),
            ("scenario", f"{row.build}/{judge_version}/{row.scenario_id}/{row.generation}"),
        ):
            before = totals.get(scope, (0, 0))
            totals[scope] = (before[0] + spent, before[1] + outstanding)
    return totals


def stored_totals(journal: SpendJournal) -> dict[tuple[str, str], tuple[int, int]]:
    return {(t.scope, t.key): (nano(t.spent_usd), nano(t.outstanding_usd)) for t in journal.scope_totals()}


def assert_totals_match_rows(journal: SpendJournal) -> None:
    rows = journal.rows()
    expected = totals_from_rows(rows)
    assert stored_totals(journal) == expected
    for day in {r.day for r in rows}:
        total = journal.day_total(date.fromisoformat(day))
        spent, outstanding = expected.get(("day", day), (0, 0))
        assert (nano(total.spent_usd), nano(total.outstanding_usd)) == (spent, outstanding)


# --- keys and records ---------------------------------------------------------------------------


def test_attempt_key_is_deterministic_and_rejects_ambiguous_parts() -> None:
    assert subject_key("s1", repeat=2, try_no=3).key == "b1/-/s1/2/subject/3"
    assert judge_key("s1").key == "b1/rubric-v1/s1/0/judge/1"
    assert subject_key(generation=2).key == "b1/-/s1/0/subject/1#g2"
    for bad in (
        lambda: AttemptKey("b/1", None, "s1", 0, "subject", 1),
        lambda: AttemptKey("b1", None, "s#1", 0, "subject", 1),
        lambda: AttemptKey("b1", "rubric-v1", "s1", 0, "subject", 1),
        lambda: AttemptKey("b1", None, "s1", 0, "judge", 1),
        lambda: AttemptKey("b1", None, "s1", -1, "subject", 1),
    ):
        with pytest.raises(ValueError):
            bad()


def test_reserving_a_recorded_key_again_writes_nothing_and_returns_the_existing_row(
    journal: SpendJournal,
) -> None:
    first = reserve(journal, subject_key(), worst_usd=0.5)
    second = reserve(journal, subject_key(), worst_usd=0.9, now=NOW + timedelta(hours=1))

    assert isinstance(first, Reservation) and first.is_new
    assert isinstance(second, Reservation) and not second.is_new
    assert second.row == first.row
    assert len(journal.rows()) == 1
    assert journal.day_total(NOW.date()).outstanding_usd == pytest.approx(0.5)


def test_settling_twice_keeps_the_first_settlement(journal: SpendJournal) -> None:
    reserve(journal, subject_key(), worst_usd=0.5)
    settle(journal, subject_key(), 0.2, payload="first")
    settle(journal, subject_key(), 0.4, payload="second")

    row = journal.lookup(subject_key())
    assert row is not None and row.status == "settled"
    assert (row.cost_usd, row.payload) == (pytest.approx(0.2), "first")
    assert journal.day_total(NOW.date()).spent_usd == pytest.approx(0.2)


def test_a_failed_attempt_cannot_be_settled_again(journal: SpendJournal) -> None:
    """A failed try is spent: settling it again (as settled or failed) changes neither the row nor
    any running total; the day keeps exactly what the failure cost and nothing outstanding."""
    reserve(journal, subject_key(), worst_usd=0.5)
    fail(journal, subject_key(), cost_usd=0.125)
    settle(journal, subject_key(), 0.4, payload="late answer")
    fail(journal, subject_key(), cost_usd=0.25)

    row = journal.lookup(subject_key())
    assert row is not None and row.status == "failed"
    assert (row.cost_usd, row.payload, row.error) == (0.125, None, "provider 503")
    total = journal.day_total(NOW.date())
    assert (nano(total.spent_usd), nano(total.outstanding_usd)) == (nano(0.125), 0)
    assert stored_totals(journal) == {
        ("day", NOW.date().isoformat()): (nano(0.125), 0),
        ("suite", "b1/-/0"): (nano(0.125), 0),
        ("scenario", "b1/-/s1/0"): (nano(0.125), 0),
    }


def test_a_settled_attempt_cannot_be_failed_afterwards(journal: SpendJournal) -> None:
    reserve(journal, subject_key(), worst_usd=0.5)
    settle(journal, subject_key(), 0.25, payload="first")
    fail(journal, subject_key(), cost_usd=0.125)

    row = journal.lookup(subject_key())
    assert row is not None and (row.status, row.cost_usd, row.payload) == ("settled", 0.25, "first")
    total = journal.day_total(NOW.date())
    assert (nano(total.spent_usd), nano(total.outstanding_usd)) == (nano(0.25), 0)


def test_reserve_and_settle_totals_count_actual_cost_and_outstanding_worst_case(
    journal: SpendJournal,
) -> None:
    for scenario in ("s1", "s2", "s3"):
        reserve(journal, subject_key(scenario), worst_usd=0.5)
    reserve(journal, judge_key("s1"), worst_usd=0.25)
    settle(journal, subject_key("s1"), 0.125)
    journal.settle(
        subject_key("s2"),
        status="failed",
        cost_usd=0.0,
        prompt_tokens=None,
        completion_tokens=None,
        payload=None,
        error="provider 503",
        now=NOW,
    )

    total = journal.day_total(NOW.date())
    assert total.spent_usd == pytest.approx(0.125)
    assert total.outstanding_usd == pytest.approx(0.5 + 0.25)  # s3 and the judge call, unsettled
    assert total.committed_usd == pytest.approx(0.875)
    statuses = {r.attempt_key: r.status for r in journal.rows()}
    assert statuses == {
        "b1/-/s1/0/subject/1": "settled",
        "b1/-/s2/0/subject/1": "failed",
        "b1/-/s3/0/subject/1": "reserved",
        "b1/rubric-v1/s1/0/judge/1": "reserved",
    }
    assert journal.day_total(NOW.date() + timedelta(days=1)).committed_usd == 0.0


def test_rows_filter_by_build_judge_version_and_role(journal: SpendJournal) -> None:
    reserve(journal, subject_key("s1"))
    reserve(journal, subject_key("s1", build="b2"))
    reserve(journal, judge_key("s1", judge_version="rubric-v1"))
    reserve(journal, judge_key("s1", judge_version="rubric-v2"))

    assert [r.attempt_key for r in journal.rows(build="b1", role="subject")] == ["b1/-/s1/0/subject/1"]
    assert [r.attempt_key for r in journal.rows(build="b1", judge_version="rubric-v2")] == [
        "b1/rubric-v2/s1/0/judge/1"
    ]
    assert len(journal.rows(build="b1")) == 3
    assert [r.build for r in journal.rows(role="subject")] == ["b1", "b2"]


def test_ledger_rows_are_a_builds_subject_and_one_versions_rows_in_key_order_in_parts(
    journal: SpendJournal,
) -> None:
    for scenario in ("s3", "s1", "s2"):
        reserve(journal, subject_key(scenario))
        reserve(journal, judge_key(scenario, judge_version="rubric-v1"))
        reserve(journal, judge_key(scenario, judge_version="rubric-v2"))
    reserve(journal, subject_key("s1", build="b2"))
    journal.settle(
        subject_key("s1"),
        status="settled",
        cost_usd=0.01,
        prompt_tokens=3,
        completion_tokens=4,
        payload='{"text": "an output"}',
        error=None,
        now=NOW,
    )

    parts = list(journal.ledger_rows("b1", "rubric-v1", size=2))
    assert [len(p) for p in parts] == [2, 2, 2]
    wanted = [r for r in journal.rows(build="b1") if r.judge_version in (None, "rubric-v1")]
    assert [r for p in parts for r in p] == [dataclasses.replace(r, payload=None) for r in wanted]
    assert any(r.payload for r in wanted)  # the journal keeps the output; the ledger's rows do not


# --- ceilings -----------------------------------------------------------------------------------

# Each list fills one scope to exactly its ceiling; its last key then breaks only that ceiling.
CEILINGS = Ceilings(scenario_usd=1.0, suite_usd=2.0, day_usd=3.0)
FILLS: dict[str, list[AttemptKey]] = {
    "scenario": [subject_key("s1", repeat=r) for r in range(3)],
    "suite": [subject_key(f"s{i}") for i in range(5)],
    "day": [subject_key("s1", build=f"b{i}") for i in range(7)],
}


@pytest.mark.parametrize("ceiling", ["scenario", "suite", "day"])
def test_refusal_names_the_ceiling_it_hits_and_is_recorded(journal: SpendJournal, ceiling: str) -> None:
    *fitting, over = FILLS[ceiling]
    for key in fitting:
        assert isinstance(reserve(journal, key, worst_usd=0.5, ceilings=CEILINGS), Reservation)

    refusal = reserve(journal, over, worst_usd=0.5, ceilings=CEILINGS)

    assert isinstance(refusal, Refusal)
    assert refusal.ceiling == ceiling
    assert refusal.committed_usd + refusal.worst_case_usd > refusal.limit_usd
    recorded = journal.lookup(over)
    assert recorded is not None and (recorded.status, recorded.ceiling) == ("refused", ceiling)
    assert journal.day_total(NOW.date()).committed_usd == pytest.approx(0.5 * len(fitting))


def test_subject_and_each_judge_version_have_their_own_scenario_and_suite_budget(
    journal: SpendJournal,
) -> None:
    tight = Ceilings(scenario_usd=0.5, suite_usd=0.5)
    assert isinstance(reserve(journal, subject_key("s1"), ceilings=tight), Reservation)
    assert isinstance(
        reserve(journal, judge_key("s1", judge_version="rubric-v1"), ceilings=tight), Reservation
    )
    assert isinstance(
        reserve(journal, judge_key("s1", judge_version="rubric-v2"), ceilings=tight), Reservation
    )
    refused = reserve(journal, judge_key("s1", judge_version="rubric-v2", repeat=1), ceilings=tight)
    assert isinstance(refused, Refusal) and refused.ceiling == "scenario"


@pytest.mark.parametrize("level", ["scenario_usd", "suite_usd", "day_usd"])
@pytest.mark.parametrize("worst_usd", [0.0, 0.01])
def test_zero_ceiling_refuses_every_call_even_a_free_one(
    journal: SpendJournal, level: str, worst_usd: float
) -> None:
    refusal = reserve(journal, subject_key(), worst_usd=worst_usd, ceilings=Ceilings(**{level: 0.0}))

    assert isinstance(refusal, Refusal)
    assert refusal.ceiling == level.removesuffix("_usd")


def test_a_ceiling_can_be_met_exactly_despite_float_sums(journal: SpendJournal) -> None:
    ceilings = Ceilings(day_usd=0.3)
    results = [reserve(journal, subject_key(f"s{i}"), worst_usd=0.1, ceilings=ceilings) for i in range(4)]

    assert [type(r) for r in results] == [Reservation, Reservation, Reservation, Refusal]


def test_reserved_but_unsettled_worst_case_counts_against_the_ceiling(journal: SpendJournal) -> None:
    ceilings = Ceilings(day_usd=1.0)
    assert isinstance(reserve(journal, subject_key("s1"), worst_usd=0.7, ceilings=ceilings), Reservation)

    blocked = reserve(journal, subject_key("s2"), worst_usd=0.7, ceilings=ceilings)
    assert isinstance(blocked, Refusal) and blocked.committed_usd == pytest.approx(0.7)

    settle(journal, subject_key("s1"), 0.1)  # the actual cost replaces the worst case
    assert isinstance(reserve(journal, subject_key("s3"), worst_usd=0.7, ceilings=ceilings), Reservation)


def test_a_refused_key_is_reserved_once_the_ceiling_allows_it(journal: SpendJournal) -> None:
    refused = reserve(journal, subject_key(), ceilings=Ceilings(day_usd=0.0))
    assert isinstance(refused, Refusal)

    again = reserve(journal, subject_key(), ceilings=Ceilings(day_usd=1.0))

    assert isinstance(again, Reservation) and again.is_new
    row = journal.lookup(subject_key())
    assert row is not None and (row.status, row.ceiling) == ("reserved", None)


def test_day_is_the_utc_calendar_day_of_the_injected_clock(journal: SpendJournal) -> None:
    ceilings = Ceilings(day_usd=1.0)
    # 23:30 in New York on 29 November is 04:30 UTC on 30 November.
    new_york_evening = datetime(2026, 11, 29, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    first = reserve(journal, subject_key("s1"), worst_usd=1.0, ceilings=ceilings, now=new_york_evening)
    assert isinstance(first, Reservation) and first.row.day == "2026-11-30"

    last_instant = datetime(2026, 11, 30, 23, 59, 59, 999999, tzinfo=UTC)
    assert isinstance(
        reserve(journal, subject_key("s2"), worst_usd=1.0, ceilings=ceilings, now=last_instant), Refusal
    )
    next_day = reserve(
        journal,
        subject_key("s3"),
        worst_usd=1.0,
        ceilings=ceilings,
        now=last_instant + timedelta(microseconds=1),
    )
    assert isinstance(next_day, Reservation) and next_day.row.day == "2026-12-01"

    # Settled after midnight, the attempt still counts on the day it was reserved.
    settle(journal, subject_key("s1"), 0.75, now=datetime(2026, 12, 1, 0, 5, tzinfo=UTC))
    assert journal.day_total(date(2026, 11, 30)).spent_usd == pytest.approx(0.75)
    assert journal.day_total(date(2026, 12, 1)).outstanding_usd == pytest.approx(1.0)
    with pytest.raises(ValueError, match="timezone-aware"):
        reserve(journal, subject_key("s4"), now=datetime(2026, 11, 30, 12, 0))


# --- reuse and fresh runs -----------------------------------------------------------------------


def test_lookup_returns_the_settled_payload_for_reuse(journal: SpendJournal) -> None:
    assert journal.lookup(subject_key()) is None
    reserve(journal, subject_key())
    settle(journal, subject_key(), 0.25, payload='{"answer": "42"}')

    row = journal.lookup(subject_key())
    assert row is not None
    assert (row.status, row.payload, row.prompt_tokens, row.completion_tokens) == (
        "settled",
        '{"answer": "42"}',
        10,
        20,
    )
    assert row.settled_at == NOW and row.created_at == NOW
    resumed = reserve(journal, subject_key())  # what a resumed run does first
    assert (
        isinstance(resumed, Reservation) and not resumed.is_new and resumed.row.payload == '{"answer": "42"}'
    )


def test_fresh_run_generation_gets_new_keys_and_day_spend_never_decreases(journal: SpendJournal) -> None:
    ceilings = Ceilings(scenario_usd=0.5)
    spent: list[float] = []
    reserve(journal, subject_key(), ceilings=ceilings)
    spent.append(journal.day_total(NOW.date()).spent_usd)
    settle(journal, subject_key(), 0.5)
    spent.append(journal.day_total(NOW.date()).spent_usd)

    fresh = subject_key(generation=1)
    assert fresh.key != subject_key().key and fresh.key.endswith("#g1")
    again = reserve(journal, fresh, ceilings=ceilings)  # a fresh generation has a fresh scenario budget
    assert isinstance(again, Reservation) and again.is_new
    spent.append(journal.day_total(NOW.date()).spent_usd)
    settle(journal, fresh, 0.25)
    spent.append(journal.day_total(NOW.date()).spent_usd)

    assert spent == sorted(spent) and spent[-1] == pytest.approx(0.75)
    assert len(journal.rows(build="b1")) == 2


# --- misuse -------------------------------------------------------------------------------------


def test_settling_an_unreserved_or_refused_attempt_raises(journal: SpendJournal) -> None:
    with pytest.raises(JournalError, match="never reserved"):
        settle(journal, subject_key("s1"), 0.1)
    reserve(journal, subject_key("s2"), ceilings=Ceilings(day_usd=0.0))
    with pytest.raises(JournalError, match="refused"):
        settle(journal, subject_key("s2"), 0.1)


def test_reserving_a_recorded_key_with_another_model_raises(journal: SpendJournal) -> None:
    reserve(journal, subject_key(), model="sim/agent")
    with pytest.raises(JournalError, match="model"):
        reserve(journal, subject_key(), model="sim/other")


# built from parts: no tracked file holds a credential-shaped string (security.no-secret-checked-in)
FAKE_KEY, FAKE_HEADER_KEY = "sk" + "-live-abcdef123456", "k-" + "9876543210"


def test_settle_scrubs_credentials_from_error_text(journal: SpendJournal) -> None:
    reserve(journal, subject_key())
    journal.settle(
        subject_key(),
        status="failed",
        cost_usd=0.0,
        prompt_tokens=None,
        completion_tokens=None,
        payload=None,
        error=f"401 from provider; headers={{'Authorization': 'Bearer {FAKE_KEY}', 'x-api-key': '{FAKE_HEADER_KEY}'}}",
        now=NOW,
    )

    row = journal.lookup(subject_key())
    assert row is not None and row.error is not None
    assert "401 from provider" in row.error
    assert FAKE_KEY not in row.error and FAKE_HEADER_KEY not in row.error


# --- running totals -----------------------------------------------------------------------------


def test_running_totals_equal_a_recomputation_from_rows_after_a_mixed_workload(
    journal: SpendJournal,
) -> None:
    assert journal.scope_totals() == []
    ceilings = Ceilings(scenario_usd=1.0, suite_usd=2.0, day_usd=3.0)
    # Reserve and settle with less, exactly the worst case, and more than it; fail with and without cost.
    for scenario, cost in (("s1", 0.125), ("s2", 0.5), ("s3", 0.625)):
        assert isinstance(
            reserve(journal, subject_key(scenario), worst_usd=0.5, ceilings=ceilings), Reservation
        )
        settle(journal, subject_key(scenario), cost)
    reserve(journal, subject_key("s4"), worst_usd=0.3, ceilings=ceilings)
    fail(journal, subject_key("s4"))
    reserve(journal, subject_key("s5"), worst_usd=0.3, ceilings=ceilings)
    fail(journal, subject_key("s5"), cost_usd=0.01)
    # Still reserved: a judge call, a free call, a fresh generation, one on the next day.
    reserve(journal, judge_key("s1"), worst_usd=0.2, ceilings=ceilings)
    reserve(journal, subject_key("s6"), worst_usd=0.0, ceilings=ceilings)
    reserve(journal, subject_key("s1", generation=1), worst_usd=0.1, ceilings=ceilings)
    reserve(journal, subject_key("s1", build="b2"), worst_usd=0.1, now=NOW + timedelta(days=1))
    # Refused (the suite has 1.26 of 2.0 committed), then reserved under a higher ceiling, then settled.
    refused = reserve(journal, subject_key("s7"), worst_usd=0.8, ceilings=ceilings)
    assert isinstance(refused, Refusal) and refused.ceiling == "suite"
    assert refused.committed_usd == pytest.approx(0.125 + 0.5 + 0.625 + 0.0 + 0.01 + 0.0)
    refused_only = reserve(journal, subject_key("s8", build="b3"), ceilings=Ceilings(day_usd=0.0))
    assert isinstance(refused_only, Refusal)
    assert_totals_match_rows(journal)
    assert ("scenario", "b3/-/s8/0") not in stored_totals(journal)  # refusals commit nothing

    again = reserve(journal, subject_key("s7"), worst_usd=0.8, ceilings=Ceilings(suite_usd=10.0))
    assert isinstance(again, Reservation) and again.is_new
    assert_totals_match_rows(journal)
    settle(journal, subject_key("s7"), 0.375)
    settle(journal, subject_key("s7"), 0.5)  # a second settlement changes nothing
    reserve(journal, subject_key("s7"), worst_usd=0.9)  # nor does reserving a recorded key again
    with pytest.raises(JournalError):
        settle(journal, subject_key("s8", build="b3"), 0.1)

    assert_totals_match_rows(journal)
    totals = {(t.scope, t.key): t for t in journal.scope_totals()}
    suite = totals[("suite", "b1/-/0")]
    assert suite.spent_usd == pytest.approx(0.125 + 0.5 + 0.625 + 0.0 + 0.01 + 0.375)
    assert suite.outstanding_usd == pytest.approx(0.0)
    assert totals[("scenario", "b1/rubric-v1/s1/0")].committed_usd == pytest.approx(0.2)
    assert totals[("day", "2026-12-01")].outstanding_usd == pytest.approx(0.1)


def test_a_journal_without_running_totals_gets_them_from_its_rows_at_open(
    backend: str, journal_url: str
) -> None:
    with open_journal(journal_url) as journal:
        for n in range(6):
            reserve(journal, subject_key(f"s{n}", build=f"b{n % 2}"), worst_usd=0.25)
        reserve(journal, judge_key("s1"), worst_usd=0.125)
        settle(journal, subject_key("s0", build="b0"), 0.0625)
        fail(journal, subject_key("s1", build="b1"), cost_usd=0.03125)
        reserve(journal, subject_key("s9"), ceilings=Ceilings(day_usd=0.0))  # refused
        before = totals_from_rows(journal.rows())
    # What a journal written by the previous version looks like: no totals, the covering indexes.
    _execute_raw(
        backend,
        journal_url,
        "DROP TABLE spend_totals",
        "DROP INDEX ix_spend_journal_build",
        "CREATE INDEX ix_spend_journal_day ON spend_journal (day, status, reserved_usd, cost_usd)",
        "CREATE INDEX ix_spend_journal_suite ON spend_journal "
        "(build, judge_version, generation, scenario_id, status, reserved_usd, cost_usd)",
    )

    with open_journal(journal_url) as journal:
        assert stored_totals(journal) == before
        assert_totals_match_rows(journal)
        refused = reserve(journal, subject_key("s7"), worst_usd=0.5, ceilings=Ceilings(day_usd=1.6))
        assert isinstance(refused, Refusal) and refused.committed_usd == pytest.approx(
            0.25 * 4 + 0.125 + 0.0625 + 0.03125
        )
    engine = sa.create_engine(journal_url)
    try:
        indexes = {index["name"] for index in sa.inspect(engine).get_indexes("spend_journal")}
    finally:
        engine.dispose()
    assert "ix_spend_journal_build" in indexes
    assert not indexes & {"ix_spend_journal_day", "ix_spend_journal_suite"}


def test_worst_case_and_cost_must_fit_the_totals(journal: SpendJournal) -> None:
    with pytest.raises(ValueError, match="at most"):
        reserve(journal, subject_key(), worst_usd=2e6)
    reserve(journal, subject_key(), worst_usd=1.0)
    with pytest.raises(ValueError, match="at most"):
        settle(journal, subject_key(), 2e6)


def _file(url: str) -> Path:
    """The SQLite file a journal URL names (the product's own reading of it)."""
    path = journal_file(url)
    assert path is not None, url
    return path


def _execute_raw(backend: str, url: str, *statements: str) -> None:
    """Another program (or an older version) changing the journal's schema."""
    if backend == "sqlite":
        lite = sqlite3.connect(_file(url))
        try:
            for statement in statements:
                lite.execute(statement)
            lite.commit()
        finally:
            lite.close()
    else:
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as pg:
            for statement in statements:
                pg.execute(statement)


# --- opening --------------------------------------------------------------------------------------


def test_open_fails_with_journal_error_for_an_unreachable_url(backend: str, tmp_path: Path) -> None:
    if backend == "sqlite":
        (tmp_path / "a-file").write_text("not a directory")
        url = url_under(tmp_path / "a-file")
    else:
        url = f"postgresql+psycopg://postgres:{'secret-pw'}@127.0.0.1:{free_port()}/postgres"

    with pytest.raises(JournalError) as raised:
        open_journal(url)
    assert "secret-pw" not in str(raised.value)


def test_open_fails_for_an_unsupported_or_in_memory_url() -> None:
    for url in ("mysql://localhost/journal", "sqlite://", "sqlite:///:memory:", "not a url"):
        with pytest.raises(JournalError):
            open_journal(url)


@pytest.mark.parametrize("damage", ["garbage", "damaged pages"])
def test_open_fails_with_journal_error_on_a_corrupt_sqlite_file(tmp_path: Path, damage: str) -> None:
    path = _file(url_under(tmp_path))
    if damage == "garbage":
        path.write_bytes(b"this is not a database" * 500)
    else:
        with open_journal(url_under(tmp_path)) as journal:
            for i in range(200):
                reserve(journal, subject_key(f"scenario-{i:04d}"))
        data = bytearray(path.read_bytes())
        assert len(data) > 8 * 4096, "the journal should span several pages"
        data[2 * 4096 : 6 * 4096] = b"\xa5" * (4 * 4096)  # overwrite b-tree pages, keep the header
        path.write_bytes(bytes(data))

    with pytest.raises(JournalError, match="corrupt|not a usable"):
        open_journal(url_under(tmp_path))


def test_open_fails_when_an_existing_journal_table_lacks_columns(backend: str, journal_url: str) -> None:
    if backend == "sqlite":
        path = _file(journal_url)
        Path(path).parent.mkdir(parents=True)
        lite = sqlite3.connect(path)
        lite.execute("CREATE TABLE spend_journal (attempt_key TEXT PRIMARY KEY)")
        lite.commit()
        lite.close()
    else:
        with psycopg.connect(journal_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as pg:
            pg.execute("CREATE TABLE spend_journal (attempt_key TEXT PRIMARY KEY)")

    with pytest.raises(JournalError, match="lacks columns"):
        open_journal(journal_url)


def _hold_exclusive_lock(backend: str, url: str, locked: ProcessEvent, release: ProcessEvent) -> None:
    """Another program: takes an exclusive lock on the journal, holds it until `release` is set."""
    if backend == "sqlite":
        con = sqlite3.connect(_file(url), isolation_level=None)
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
        con.execute("BEGIN EXCLUSIVE")
        locked.set()
        release.wait(60)
        con.execute("ROLLBACK")
        con.close()
    else:
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as pg:
            pg.execute("LOCK TABLE spend_journal IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(60)
            pg.rollback()


def test_open_fails_with_journal_error_while_another_program_holds_an_exclusive_lock(
    backend: str, journal_url: str
) -> None:
    open_journal(journal_url).close()  # the journal exists; another program then locks it
    spawn = multiprocessing.get_context("spawn")
    locked, release = spawn.Event(), spawn.Event()
    holder = spawn.Process(target=_hold_exclusive_lock, args=(backend, journal_url, locked, release))
    holder.start()
    try:
        assert locked.wait(30), "the lock holder did not take its lock"
        with pytest.raises(JournalError, match="locked by another program"):
            open_journal(journal_url, lock_wait_s=0.2)
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0
    open_journal(journal_url).close()  # usable again once released


# --- concurrency --------------------------------------------------------------------------------

RACE_CEILING_USD = 10.0
RACE_WORST_USD = 0.25
RACE_CALLERS = 50


def _race(url: str, process_no: int, start: ProcessBarrier) -> None:
    """One OS process: RACE_CALLERS threads reserve at once against the shared day ceiling."""
    journal = open_journal(url)
    ready = threading.Barrier(RACE_CALLERS + 1)
    errors: list[BaseException] = []

    def caller(n: int) -> None:
        key = subject_key(f"p{process_no}-c{n}", build=f"race-{process_no}")
        try:
            ready.wait()
            outcome = reserve(
                journal, key, worst_usd=RACE_WORST_USD, ceilings=Ceilings(day_usd=RACE_CEILING_USD)
            )
            if isinstance(outcome, Reservation) and n % 2 == 0:  # the others stay in flight
                settle(journal, key, RACE_WORST_USD)
        except BaseException as exc:  # reported by the exit code below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(RACE_CALLERS)]
    for thread in threads:
        thread.start()
    start.wait(60)  # both processes are ready: release every caller at once
    ready.wait()
    for thread in threads:
        thread.join()
    journal.close()
    if errors:
        raise errors[0]


def test_concurrent_reservations_from_two_processes_never_exceed_the_day_ceiling(journal_url: str) -> None:
    open_journal(journal_url).close()
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    workers = [spawn.Process(target=_race, args=(journal_url, n, start)) for n in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]

    with open_journal(journal_url) as journal:
        rows = journal.rows()
        total = journal.day_total(NOW.date())
        assert_totals_match_rows(journal)
    assert len(rows) == 2 * RACE_CALLERS
    assert total.committed_usd <= RACE_CEILING_USD + 1e-9
    # Every caller that fitted got in: the ceiling is filled, not under-used.
    admitted = [r for r in rows if r.status != "refused"]
    assert len(admitted) == int(RACE_CEILING_USD / RACE_WORST_USD)
    assert {r.ceiling for r in rows if r.status == "refused"} == {"day"}


def test_one_callers_error_does_not_fail_the_operations_committed_with_it(journal: SpendJournal) -> None:
    """Operations that queue together are committed together; an operation refused with an error
    (a model clash, settling an unknown key) fails alone."""
    reserve(journal, subject_key("clash"), model="sim/agent")
    callers = 48
    ready = threading.Barrier(callers)
    outcomes: dict[int, str] = {}

    def caller(n: int) -> None:
        ready.wait()
        try:
            if n % 4 == 0:
                settle(journal, subject_key(f"never-{n}"), 0.1)
            elif n % 4 == 1:
                reserve(journal, subject_key("clash"), model="sim/other")
            else:
                assert isinstance(reserve(journal, subject_key(f"s{n}"), worst_usd=0.5), Reservation)
                settle(journal, subject_key(f"s{n}"), 0.25)
            outcomes[n] = "ok"
        except JournalError:
            outcomes[n] = "error"

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert outcomes == {n: "error" if n % 4 < 2 else "ok" for n in range(callers)}
    assert journal.day_total(NOW.date()).spent_usd == pytest.approx(0.25 * callers / 2)
    assert_totals_match_rows(journal)


KILLED_RESERVATIONS = 20


def _reserve_then_hang(url: str, done: ProcessEvent) -> None:
    """A run that commits reservations and settlements, then is killed before it closes anything."""
    journal = open_journal(url)
    for n in range(KILLED_RESERVATIONS):
        reserve(journal, subject_key(f"s{n}"), worst_usd=0.5)
        if n % 2 == 0:
            settle(journal, subject_key(f"s{n}"), 0.25)
    done.set()
    time.sleep(120)


@contextmanager
def _killed_victim(
    target: Callable[[str, ProcessEvent], None], url: str, *, until: str
) -> Iterator[SpawnProcess]:
    """`target(url, event)` in a spawned process, waited for until it sets the event (failing with "the
    victim did not `until`" after 60 s); on leaving, the victim is killed with SIGKILL and reaped."""
    spawn = multiprocessing.get_context("spawn")
    event = spawn.Event()
    victim = spawn.Process(target=target, args=(url, event))
    victim.start()
    try:
        assert event.wait(60), f"the victim did not {until}"
        yield victim
    finally:
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(30)


def test_what_reserve_and_settle_returned_survives_kill_9_of_the_process(journal_url: str) -> None:
    with _killed_victim(_reserve_then_hang, journal_url, until="finish its writes") as victim:
        pass  # its writes are committed: kill it now
    assert victim.exitcode == -signal.SIGKILL

    with open_journal(journal_url) as journal:
        statuses = [r.status for r in journal.rows()]
        assert statuses.count("settled") == KILLED_RESERVATIONS // 2
        assert statuses.count("reserved") == KILLED_RESERVATIONS // 2
        assert_totals_match_rows(journal)


# --- leases (issue 11: one run per build, asset and partition) ----------------------------------

TTL_S = 30.0


def _acquire(journal: SpendJournal, holder: str, now: datetime = NOW, pid: int = 1):
    """`holder` runs on host `host-{holder}`: machines apart, so only the TTL frees its lease."""
    return journal.acquire_lease(
        "b1",
        "scenario_runs",
        "b1",
        holder=holder,
        host=f"host-{holder}",
        pid=pid,
        run_id=f"run-{holder}",
        ttl_s=TTL_S,
        now=now,
    )


def test_a_lease_is_refused_to_a_second_holder_naming_the_first_and_renewed_for_its_own(
    journal: SpendJournal,
) -> None:
    first = _acquire(journal, "A", pid=101)
    assert first.granted and first.row.holder == "A"
    second = _acquire(journal, "B", now=NOW + timedelta(seconds=10), pid=102)
    assert not second.granted
    assert second.row.holder == "A" and "process 101 on host-A, run run-A" in LeaseHeld(second.row).args[0]
    again = _acquire(journal, "A", now=NOW + timedelta(seconds=20), pid=101)
    assert again.granted and again.row.acquired_at == NOW
    assert again.row.expires_at == NOW + timedelta(seconds=20 + TTL_S)
    # another partition of the same build, or the same partition of another asset, is a separate lease
    other = journal.acquire_lease(
        "b1", "judge_verdicts", "b1|j-v1", holder="B", host="h", pid=2, run_id=None, ttl_s=TTL_S, now=NOW
    )
    assert other.granted
    assert [(r.asset, r.holder) for r in journal.leases(build="b1")] == [
        ("judge_verdicts", "B"),
        ("scenario_runs", "A"),
    ]


def test_a_lapsed_lease_goes_to_the_next_holder_and_its_old_holder_learns_it_lost_it(
    journal: SpendJournal,
) -> None:
    assert _acquire(journal, "A").granted
    assert not _acquire(journal, "B", now=NOW + timedelta(seconds=TTL_S - 1)).granted
    taken = _acquire(journal, "B", now=NOW + timedelta(seconds=TTL_S))
    assert taken.granted and taken.row.holder == "B"
    renew = journal.renew_lease(
        "b1", "scenario_runs", "b1", holder="A", ttl_s=TTL_S, now=NOW + timedelta(seconds=TTL_S + 1)
    )
    assert renew is False
    assert journal.release_lease("b1", "scenario_runs", "b1", holder="A") is False  # not A's to drop
    assert journal.release_lease("b1", "scenario_runs", "b1", holder="B") is True
    assert journal.leases() == []


def test_hold_lease_is_reentrant_in_a_process_and_released_by_the_outermost_holder(
    journal: SpendJournal,
) -> None:
    with hold_lease(journal, "b1", "scenario_runs", "b1", run_id="r", ttl_s=TTL_S) as outer:
        with hold_lease(journal, "b1", "scenario_runs", "b1", run_id="r2", ttl_s=TTL_S) as inner:
            assert inner is outer
        assert [r.holder for r in journal.leases()] == [process_holder()[0]]
    assert journal.leases() == []


def _hold_then_hang(url: str, held: ProcessEvent) -> None:
    journal = open_journal(url)
    journal.acquire_lease(
        "b1",
        "scenario_runs",
        "b1",
        holder="victim",
        host=process_holder()[1],
        pid=os.getpid(),
        run_id="v",
        ttl_s=3600.0,
        now=datetime.now(UTC),
    )
    held.set()
    time.sleep(120)


def test_a_lease_left_by_a_killed_process_is_taken_at_once_on_its_host(journal_url: str) -> None:
    with _killed_victim(_hold_then_hang, journal_url, until="take its lease") as victim:
        with open_journal(journal_url) as journal:
            with pytest.raises(LeaseHeld, match=f"process {victim.pid} on "):
                with hold_lease(journal, "b1", "scenario_runs", "b1", run_id="me", ttl_s=TTL_S):
                    pass
    with open_journal(journal_url) as journal:  # its TTL is an hour away: the dead pid is what frees it
        with hold_lease(journal, "b1", "scenario_runs", "b1", run_id="me", ttl_s=TTL_S) as lease:
            assert [r.holder for r in journal.leases()] == [lease.holder]


def _contend(url: str, process_no: int, start: ProcessBarrier, results: Any) -> None:
    journal = open_journal(url)
    start.wait(60)
    grants = [
        journal.acquire_lease(
            "b1",
            "scenario_runs",
            "b1",
            holder=f"p{process_no}",
            host=f"host-{process_no}",
            pid=1000 + process_no,
            run_id=None,
            ttl_s=TTL_S,
            now=NOW,
        ).granted
        for _ in range(20)
    ]
    results.put((process_no, grants))
    journal.close()


def test_two_processes_contending_for_one_lease_never_both_hold_it(journal_url: str) -> None:
    open_journal(journal_url).close()
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Barrier(4), spawn.Queue()
    workers = [spawn.Process(target=_contend, args=(journal_url, n, start, results)) for n in range(4)]
    for worker in workers:
        worker.start()
    outcomes = dict(results.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(60)
    winners = [n for n, grants in outcomes.items() if any(grants)]
    assert len(winners) == 1, outcomes
    assert all(outcomes[winners[0]])  # its own renewals keep granting


# --- what mutation testing found unpinned (docs/mutation.md) -------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "done"}, "status must be 'settled' or 'failed', not 'done'"),
        ({"cost_usd": -1}, "cost_usd must be a finite number of USD >= 0, not -1"),
        ({"prompt_tokens": -1}, "prompt_tokens must be None or an int >= 0, not -1"),
        ({"prompt_tokens": 1.5}, "prompt_tokens must be None or an int >= 0, not 1.5"),
        ({"completion_tokens": True}, "completion_tokens must be None or an int >= 0, not True"),
        ({"completion_tokens": "5"}, "completion_tokens must be None or an int >= 0, not '5'"),
    ],
    ids=["status", "cost", "negative-tokens", "float-tokens", "bool-tokens", "text-tokens"],
)
def test_settle_refuses_a_bad_status_cost_or_token_count_naming_it(
    journal: SpendJournal, change: dict[str, Any], message: str
) -> None:
    reserve(journal, subject_key())
    args: dict[str, Any] = {
        "status": "settled",
        "cost_usd": 0.1,
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "payload": "x",
        "error": None,
        "now": NOW,
    }
    with pytest.raises(ValueError) as raised:
        journal.settle(subject_key(), **{**args, **change})
    assert str(raised.value) == message
    row = journal.lookup(subject_key())
    assert row is not None and row.status == "reserved"


def test_settle_accepts_zero_tokens(journal: SpendJournal) -> None:
    reserve(journal, subject_key())
    journal.settle(
        subject_key(), status="settled", cost_usd=0.0, prompt_tokens=0, completion_tokens=0, payload="",
        error=None, now=NOW,
    )
    row = journal.lookup(subject_key())
    assert row is not None and (row.status, row.prompt_tokens, row.completion_tokens) == ("settled", 0, 0)


@pytest.mark.parametrize("name", ["scenario_usd", "suite_usd", "day_usd"])
def test_a_ceiling_must_be_a_finite_usd_amount_naming_it(name: str) -> None:
    with pytest.raises(ValueError) as raised:
        Ceilings(**{name: -1.0})
    assert str(raised.value) == f"{name} must be a finite number of USD >= 0, not -1.0"


def test_a_day_without_spend_totals_zero_and_every_total_names_its_day(journal: SpendJournal) -> None:
    empty = journal.day_total(date(2026, 1, 1))
    assert (empty.scope, empty.key, empty.spent_usd, empty.outstanding_usd) == ("day", "2026-01-01", 0.0, 0.0)
    reserve(journal, subject_key(), worst_usd=0.5)
    total = journal.day_total(NOW.date())
    assert (total.scope, total.key, total.spent_usd, total.outstanding_usd) == ("day", NOW.date().isoformat(), 0.0, 0.5)


def test_reserving_a_recorded_key_again_says_it_is_not_new(journal: SpendJournal) -> None:
    assert isinstance(first := reserve(journal, subject_key()), Reservation) and first.is_new is True
    again = reserve(journal, subject_key())
    assert isinstance(again, Reservation) and again.is_new is False


def test_reserving_a_recorded_key_with_another_model_says_keys_must_determine_the_model(
    journal: SpendJournal,
) -> None:
    reserve(journal, subject_key(), model="sim/agent")
    with pytest.raises(JournalError) as raised:
        reserve(journal, subject_key(), model="sim/other")
    assert str(raised.value).endswith(
        "is recorded with model 'sim/agent', not 'sim/other': attempt keys must determine the model"
    )


@pytest.mark.parametrize(
    ("worst", "message"),
    [
        (-0.5, "worst_case_usd must be a finite number of USD >= 0, not -0.5"),
        (float("nan"), "worst_case_usd must be a finite number of USD >= 0, not nan"),
        (float("inf"), "worst_case_usd must be a finite number of USD >= 0, not inf"),
        (True, "worst_case_usd must be a finite number of USD >= 0, not True"),
        ("0.5", "worst_case_usd must be a finite number of USD >= 0, not '0.5'"),
        (1e6 * 1.5, "worst_case_usd must be at most 1e+06 USD, not 1500000.0"),
    ],
    ids=["negative", "nan", "inf", "bool", "text", "too-large"],
)
def test_reserve_refuses_a_worst_case_that_is_not_a_usd_amount_naming_it(
    journal: SpendJournal, worst: Any, message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        reserve(journal, subject_key(), worst_usd=worst)
    assert str(raised.value) == message
    assert journal.lookup(subject_key()) is None


def test_a_worst_case_of_exactly_the_largest_attempt_amount_is_accepted(journal: SpendJournal) -> None:
    assert isinstance(reserve(journal, subject_key(), worst_usd=1e6, ceilings=Ceilings()), Reservation)


def test_a_refusal_carries_the_refused_row_as_recorded(journal: SpendJournal) -> None:
    refusal = reserve(journal, subject_key(), worst_usd=0.5, ceilings=Ceilings(day_usd=0.25))
    assert isinstance(refusal, Refusal)
    assert refusal.row == journal.lookup(subject_key())
    assert (refusal.row.status, refusal.row.ceiling, refusal.row.reserved_usd) == ("refused", "day", 0.5)


# --- callers on an event loop (reserve_async / settle_async) ------------------------------------


def test_event_loop_callers_get_the_outcomes_thread_callers_get(journal: SpendJournal) -> None:
    """Reservations and settlements awaited on a loop, many at once, are committed with the same
    checks as `reserve`/`settle`: 8 reservations of $0.5 under a $2 suite ceiling, 4 granted and 4
    refused naming the suite, each granted one settled, and the totals equal to the rows."""
    ceilings = Ceilings(suite_usd=2.0)

    async def one(i: int) -> Reservation | Refusal:
        key = subject_key(f"s{i}")
        decision = await journal.reserve_async(
            key, run_id="run-1", model=MODEL, worst_case_usd=0.5, ceilings=ceilings, now=NOW
        )
        if isinstance(decision, Reservation):
            await journal.settle_async(
                key,
                status="settled",
                cost_usd=0.25,
                prompt_tokens=1,
                completion_tokens=2,
                payload=f"out {i}",
                error=None,
                now=NOW,
            )
        return decision

    async def main() -> list[Reservation | Refusal]:
        return list(await asyncio.gather(*(one(i) for i in range(8))))

    decisions = asyncio.run(main())
    granted = [d for d in decisions if isinstance(d, Reservation)]
    refused = [d for d in decisions if isinstance(d, Refusal)]
    assert len(granted) == 4 and all(d.is_new for d in granted)
    assert len(refused) == 4 and {d.ceiling for d in refused} == {"suite"}
    rows = journal.rows(build="b1")
    assert sorted(r.status for r in rows) == ["refused"] * 4 + ["settled"] * 4
    won = {f"out {i}" for i, d in enumerate(decisions) if isinstance(d, Reservation)}
    assert {r.payload for r in rows if r.status == "settled"} == won
    suite = next(t for t in journal.scope_totals() if t.scope == "suite")
    assert suite.spent_usd == pytest.approx(4 * 0.25) and suite.outstanding_usd == 0.0


def test_event_loop_and_thread_callers_share_the_writer_without_losing_an_operation(
    journal: SpendJournal,
) -> None:
    """Threads calling `reserve` and a loop awaiting `reserve_async` at the same time, handing the
    writer role to each other: every operation returns, and every key has its row."""
    keys_threads = [subject_key(f"t{i}") for i in range(40)]
    keys_loop = [subject_key(f"l{i}") for i in range(40)]
    start = threading.Barrier(5)

    def thread_caller(part: list[AttemptKey]) -> None:
        start.wait()
        for key in part:
            reserve(journal, key)
            settle(journal, key, 0.1)

    async def loop_caller() -> None:
        start.wait()

        async def one(key: AttemptKey) -> None:
            await journal.reserve_async(
                key, run_id="run-1", model=MODEL, worst_case_usd=0.5, ceilings=Ceilings(), now=NOW
            )
            await journal.settle_async(
                key,
                status="settled",
                cost_usd=0.1,
                prompt_tokens=1,
                completion_tokens=1,
                payload="x",
                error=None,
                now=NOW,
            )

        await asyncio.wait_for(asyncio.gather(*(one(k) for k in keys_loop)), timeout=60)

    threads = [threading.Thread(target=thread_caller, args=(keys_threads[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    asyncio.run(loop_caller())
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    rows = {r.attempt_key: r.status for r in journal.rows(build="b1")}
    assert rows == {k.key: "settled" for k in keys_threads + keys_loop}


def test_an_event_loop_caller_cancelled_while_waiting_leaves_its_reservation_written(
    journal: SpendJournal,
) -> None:
    """Cancelling the awaiting task does not take the operation back (a thread's caller that stops
    waiting after the writer took its operation is in the same place): the reservation is committed,
    and a later reservation of the key finds it."""
    key = subject_key("cancelled")

    async def main() -> None:
        task = asyncio.ensure_future(
            journal.reserve_async(
                key, run_id="run-1", model=MODEL, worst_case_usd=0.5, ceilings=Ceilings(), now=NOW
            )
        )
        await asyncio.sleep(0)  # queued, not yet answered
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    deadline = time.monotonic() + 30
    while journal.lookup(key) is None and time.monotonic() < deadline:  # the writer commits it
        time.sleep(0.01)
    row = journal.lookup(key)
    assert row is not None and row.status == "reserved"
    again = reserve(journal, key)
    assert isinstance(again, Reservation) and not again.is_new


def test_event_loop_caller_gets_the_journal_error_of_a_bad_settlement(journal: SpendJournal) -> None:
    """An operation's own error reaches its awaiting caller as it reaches a thread's."""

    async def main() -> None:
        await journal.settle_async(
            subject_key("never-reserved"),
            status="settled",
            cost_usd=0.1,
            prompt_tokens=1,
            completion_tokens=1,
            payload="x",
            error=None,
            now=NOW,
        )

    with pytest.raises(JournalError, match="never reserved"):
        asyncio.run(main())


def test_the_sqlite_write_turn_is_polled_every_50_us_at_first_then_at_most_every_ms() -> None:
    """Another process's batch holds the turn a few ms: a wait that short is polled every 50 us (a
    1 ms poll left each worker process of a 1000 x 5 run idle 16% of its call phase, docs/journal.md);
    a long one backs off, monotonically, to at most a thousand polls a second."""
    assert {WriteTurn.pause(w / 10_000) for w in range(100)} == {50e-6}  # the first 10 ms
    pauses = [WriteTurn.pause(w / 1000) for w in range(30_000)]  # 30 s, the busy timeout
    assert pauses == sorted(pauses)
    assert max(pauses) == 1e-3 and pauses.index(1e-3) < 100  # backed off within 0.1 s
