"""Flaky ordinary tests (docs/methods.md: flaky tests), with an injected clock: retry, quarantine, expiry; gates exempt."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gates_fixtures import checks
from gates_fixtures.build import gate, suite_test, write_registry

from eval_assets.gates import (
    MemoryQuarantineStore,
    QuarantineStore,
    Registry,
    SuiteResult,
    WarehouseQuarantineStore,
    quarantine_at,
    read_registry,
    record_suite,
    run_suite,
)
from eval_assets.stats import decide
from eval_assets.warehouse import Warehouse

DAY0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
FAIL, PASS = False, True


@dataclass
class Clock:
    now: datetime = DAY0

    def __call__(self) -> datetime:
        return self.now

    def at_day(self, day: float) -> Clock:
        self.now = DAY0 + timedelta(days=day)
        return self


@pytest.fixture(autouse=True)
def _fresh_script() -> Iterator[None]:
    checks.SCRIPT.clear()
    checks.CALLS.clear()
    yield


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    write_registry(
        tmp_path,
        {
            "area.yaml": {
                "gates": [gate("g.scripted", check="scripted")],
                "tests": [suite_test("t.flaky"), suite_test("t.steady")],
            }
        },
    )
    return read_registry(tmp_path)


def run_day(
    registry: Registry,
    clock: Clock,
    day: float,
    store: MemoryQuarantineStore,
    script: list[bool],
    **kw: object,
) -> SuiteResult:
    """One suite run on `day` where t.flaky's tries go as `script`; its test runs are recorded."""
    checks.SCRIPT["t.flaky"] = list(script)
    result = run_suite(
        registry, milestone=1, build=f"b-day{day}", clock=clock.at_day(day), quarantine_store=store, **kw
    )
    store.add(result.test_records)
    return result


def flaky_row(result: SuiteResult) -> tuple[str, bool, bool, bool]:
    row = {r.gate_id: r for r in result.results}["t.flaky"]
    return row.status, row.retried, row.quarantined, row.blocks


# --- retry once -----------------------------------------------------------------------------------


def test_a_failing_test_is_retried_once_and_a_passing_retry_is_recorded_not_blocking(
    registry: Registry,
) -> None:
    store = MemoryQuarantineStore()

    result = run_day(registry, Clock(), 0, store, [FAIL, PASS])

    assert flaky_row(result) == ("pass", True, False, False)
    assert checks.CALLS.count("t.flaky") == 2 and checks.CALLS.count("t.steady") == 1
    [record] = [r for r in result.test_records if r.test_id == "t.flaky"]
    assert (record.first_try, record.status, record.retried, record.failed) == ("fail", "pass", True, True)
    assert result.passed and decide([result.evidence()]).decision == "allow"


def test_the_retry_rate_is_reported_even_when_the_suite_is_green(registry: Registry) -> None:
    result = run_day(registry, Clock(), 0, MemoryQuarantineStore(), [FAIL, PASS])

    assert result.passed
    assert result.retry_rate == 0.5  # one of two tests needed its retry
    assert result.summary()["retry_rate"] == 0.5 and result.summary()["tests_retried"] == ["t.flaky"]
    assert result.text().endswith("retry rate: 50.0%")


def test_a_first_failure_that_fails_its_retry_blocks(registry: Registry) -> None:
    result = run_day(registry, Clock(), 0, MemoryQuarantineStore(), [FAIL, FAIL])

    assert flaky_row(result) == ("fail", True, False, True)
    assert checks.CALLS.count("t.flaky") == 2  # retried once, not more
    assert decide([result.evidence()]).decision == "block"


# --- quarantine -----------------------------------------------------------------------------------


def test_a_second_failure_within_30_days_quarantines_the_test(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, FAIL])

    second = run_day(registry, clock, 30, store, [FAIL, FAIL])

    assert flaky_row(second) == ("fail", True, True, False)
    [record] = [r for r in second.test_records if r.test_id == "t.flaky"]
    assert record.quarantined_from == DAY0 + timedelta(days=30)
    assert record.quarantined_until == DAY0 + timedelta(days=44)
    assert second.passed and decide([second.evidence()]).decision == "allow"
    assert second.summary()["quarantined"] == ["t.flaky"]


def test_a_failure_rescued_by_its_retry_counts_toward_quarantine(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, PASS])

    second = run_day(registry, clock, 3, store, [FAIL, FAIL])

    assert flaky_row(second) == ("fail", True, True, False)


def test_failures_more_than_30_days_apart_do_not_quarantine(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, FAIL])

    later = run_day(registry, clock, 30.5, store, [FAIL, FAIL])

    assert flaky_row(later) == ("fail", True, False, True)


def test_passing_runs_between_failures_do_not_reset_the_30_day_window(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, FAIL])
    for day in (1, 5, 9):
        run_day(registry, clock, day, store, [PASS])

    assert flaky_row(run_day(registry, clock, 12, store, [FAIL, FAIL]))[2] is True


def test_quarantine_ends_after_14_days_even_if_the_test_still_fails(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, FAIL])
    run_day(registry, clock, 10, store, [FAIL, FAIL])  # quarantined from day 10 to day 24

    still = run_day(registry, clock, 23.9, store, [FAIL, FAIL])
    expired = run_day(registry, clock, 24, store, [FAIL, FAIL])

    assert flaky_row(still) == ("fail", True, True, False)
    assert flaky_row(expired) == ("fail", True, False, True)  # the count started again: a first failure
    assert decide([expired.evidence()]).decision == "block"


def test_after_expiry_a_new_second_failure_quarantines_again(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    for day in (0, 10, 24):  # quarantined 10..24, then day 24 is a first failure again
        run_day(registry, clock, day, store, [FAIL, FAIL])

    again = run_day(registry, clock, 26, store, [FAIL, FAIL])

    assert flaky_row(again) == ("fail", True, True, False)
    [record] = [r for r in again.test_records if r.test_id == "t.flaky"]
    assert record.quarantined_until == DAY0 + timedelta(days=40)


def test_a_quarantined_test_still_runs_and_its_results_are_recorded(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    run_day(registry, clock, 0, store, [FAIL, FAIL])
    run_day(registry, clock, 1, store, [FAIL, FAIL])
    checks.CALLS.clear()

    during = run_day(registry, clock, 5, store, [FAIL, FAIL])
    passing = run_day(registry, clock, 6, store, [PASS])

    assert checks.CALLS.count("t.flaky") == 3  # two tries on day 5, one on day 6
    assert flaky_row(during) == ("fail", True, True, False)
    assert flaky_row(passing) == ("pass", False, True, False)
    assert [(r.ran_at.day, r.status, r.quarantined) for r in store.records if r.test_id == "t.flaky"][
        -2:
    ] == [
        (6, "fail", True),
        (7, "pass", True),
    ]
    assert [o.name for o in during.evidence().outcomes] == ["g.scripted", "t.steady"]


def test_failures_during_a_quarantine_do_not_extend_it() -> None:
    failures = [DAY0 + timedelta(days=d) for d in (0, 1, 5, 10, 14.5)]

    assert quarantine_at(failures, DAY0 + timedelta(days=14.9)) is not None
    assert quarantine_at(failures, DAY0 + timedelta(days=15)) is None  # ended 14 days after day 1


# --- gates are exempt -----------------------------------------------------------------------------


def test_a_gate_is_never_retried_into_a_pass(registry: Registry) -> None:
    checks.SCRIPT["g.scripted"] = [FAIL, PASS]

    result = run_day(registry, Clock(), 0, MemoryQuarantineStore(), [PASS])

    row = {r.gate_id: r for r in result.results}["g.scripted"]
    assert (row.status, row.retried, row.blocks) == ("fail", False, True)
    assert checks.CALLS.count("g.scripted") == 1


def test_a_gate_is_never_quarantined_whatever_its_history(registry: Registry) -> None:
    store, clock = MemoryQuarantineStore(), Clock()
    for day in (0, 1, 2):
        checks.SCRIPT["g.scripted"] = [FAIL]
        result = run_day(registry, clock, day, store, [PASS])
        row = {r.gate_id: r for r in result.results}["g.scripted"]
        assert (row.status, row.quarantined, row.blocks) == ("fail", False, True)
        assert decide([result.evidence()]).decision == "block"
    assert all(r.test_id != "g.scripted" for r in store.records)  # no gate enters the history


class _HistoryFor:
    """A store claiming a gate id has failed recently: the runner must not consult it for gates."""

    def failure_times(self, test_ids: list[str]) -> dict[str, list[datetime]]:
        return {t: [DAY0] for t in [*test_ids, "g.scripted"]}


def test_a_gate_ignores_failure_history_even_under_its_own_id(registry: Registry) -> None:
    checks.SCRIPT["g.scripted"] = [FAIL]
    store: QuarantineStore = _HistoryFor()

    result = run_suite(registry, milestone=1, build="b", clock=Clock().at_day(1), quarantine_store=store)

    row = {r.gate_id: r for r in result.results}["g.scripted"]
    assert (row.status, row.quarantined, row.blocks) == ("fail", False, True)


# --- history lives in the warehouse ---------------------------------------------------------------


def test_quarantine_history_is_read_back_from_the_warehouse(registry: Registry, tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    store = WarehouseQuarantineStore(warehouse)
    clock = Clock()
    for n, day in enumerate((0, 20)):
        checks.SCRIPT["t.flaky"] = [FAIL, FAIL]
        result = run_suite(
            registry, milestone=1, build=f"b{n}", clock=clock.at_day(day), quarantine_store=store
        )
        record_suite(warehouse, result, f"run-{n}")

    assert flaky_row(result) == ("fail", True, True, False)
    rows = warehouse.query(
        "SELECT build, test_id, ran_at, failed, quarantined, quarantined_until FROM test_quarantine "
        "WHERE test_id = 't.flaky' ORDER BY ran_at"
    ).to_dict("records")
    assert [(r["build"], r["failed"], r["quarantined"]) for r in rows] == [
        ("b0", True, False),
        ("b1", True, True),
    ]
    assert rows[1]["quarantined_until"].to_pydatetime() == datetime(2026, 2, 4, 2, 0)  # naive UTC
    gate_rows = warehouse.query(
        "SELECT gate_id, status, quarantined, blocks FROM gate_results WHERE build = 'b1'"
    )
    assert ("t.flaky", "fail", True, False) in [tuple(r) for r in gate_rows.itertuples(index=False)]
