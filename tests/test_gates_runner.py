"""The suite runner: each way a gate can end, its row in gate_results, and its effect on the decision."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from gates_fixtures import checks
from gates_fixtures.build import REPO, converted_case, gate, project_copy, suite_test, write_registry
from shared import full_row

from eval_assets.config import BuildManifest, Subject
from eval_assets.gates import (
    GateContext,
    GateResult,
    MemoryQuarantineStore,
    SuiteResult,
    read_registry,
    record_suite,
    run_and_record_suite,
    run_suite,
    scratch,
    stored_evidence,
)
from eval_assets.stats import decide
from eval_assets.warehouse import Warehouse

SIM_SUBJECT = Subject(model="sim/agent", family="sim", params={"skill": 0.8, "noise": 0.0, "seed": 1})


@pytest.fixture(autouse=True)
def _fresh_script() -> Iterator[None]:
    checks.SCRIPT.clear()
    checks.CALLS.clear()
    checks.DRAWN.clear()
    yield


def run(root: Path, entries: list[dict[str, Any]], milestone: int = 1, **kwargs: Any) -> SuiteResult:
    write_registry(root, {"area.yaml": {"gates": entries}})
    registry = read_registry(root, check_imports=False)
    return run_suite(registry, milestone=milestone, build="b1", **kwargs)


def only(result: SuiteResult) -> GateResult:
    [row] = result.results
    return row


def decision(result: SuiteResult) -> str:
    return decide([result.evidence()]).decision


# --- each status and its effect -------------------------------------------------------------------


def test_a_passing_gate_passes_and_allows(tmp_path: Path) -> None:
    result = run(tmp_path, [gate("g.ok")])

    row = only(result)
    assert (row.status, row.kind, row.milestone, row.blocks) == ("pass", "structural", 0, False)
    assert row.declared_in == "docs/specs/area.md#Hard gates"
    assert result.passed and decision(result) == "allow"


def test_a_check_that_raises_is_an_error_and_blocks(tmp_path: Path) -> None:
    result = run(tmp_path, [gate("g.raises", check="raises")])

    row = only(result)
    assert row.status == "error" and row.blocks
    assert row.message == "check raised RuntimeError: the check blew up"
    verdict = decide([result.evidence()])
    assert verdict.decision == "block"
    assert [r.finding for r in verdict.reasons if r.severity == "block"] == ["g.raises"]


def test_a_gate_with_no_check_is_an_error_row_and_blocks(tmp_path: Path) -> None:
    entry = gate("g.nocheck")
    del entry["check"]

    result = run(tmp_path, [entry, gate("g.ok")])

    rows = {r.gate_id: r for r in result.results}
    assert rows["g.nocheck"].status == "error" and rows["g.nocheck"].blocks
    assert "check: required field is missing" in rows["g.nocheck"].message
    assert rows["g.ok"].status == "pass"
    assert decision(result) == "block"


def test_a_check_that_does_not_import_is_an_error(tmp_path: Path) -> None:
    result = run(tmp_path, [gate("g.gone", check="gates_fixtures.checks:vanished")])

    row = only(result)
    assert row.status == "error" and "'gates_fixtures.checks:vanished' does not import" in row.message


def test_findings_fail_the_gate_and_are_listed(tmp_path: Path) -> None:
    row = only(run(tmp_path, [gate("g.finds", check="finds_two")]))

    assert row.status == "fail" and row.blocks
    assert row.full_message() == "2 finding(s)\nfirst finding\nsecond finding"


@pytest.mark.parametrize("check", ["raises_skip", "returns_skip"])
def test_a_skip_at_or_past_the_milestone_is_a_failure(tmp_path: Path, check: str) -> None:
    row = only(run(tmp_path, [gate("g.skip", check=check)]))

    assert row.status == "fail" and row.blocks
    assert row.message.startswith("skipped at or past its milestone: not today")


def test_a_gate_before_its_milestone_is_pending_does_not_run_and_does_not_block(tmp_path: Path) -> None:
    result = run(tmp_path, [gate("g.later", check="raises", milestone=4), gate("g.now")], milestone=3)

    rows = {r.gate_id: r for r in result.results}
    assert rows["g.later"].status == "pending" and not rows["g.later"].blocks
    assert rows["g.later"].message == "pending until milestone 4 (build: 3)"
    assert "g.later" not in checks.CALLS
    assert decision(result) == "allow"
    assert result.summary()["pending"] == ["g.later"]


def test_a_gate_at_its_milestone_must_run(tmp_path: Path) -> None:
    row = only(run(tmp_path, [gate("g.due", check="raises", milestone=3)], milestone=3))

    assert row.status == "error" and checks.CALLS == ["g.due"]


def test_a_suite_where_everything_is_pending_decides_nothing(tmp_path: Path) -> None:
    result = run(tmp_path, [gate("g.later", milestone=9)])

    assert result.passed and result.evidence().outcomes == ()
    assert decision(result) == "none"


# --- corpus gates ---------------------------------------------------------------------------------


def corpus_gate(minimum: int) -> dict[str, Any]:
    return gate(
        "c.files",
        "corpus",
        check="eval_assets.gates.drivers:each_member",
        corpus="corpus/*.txt",
        procedure="gates_fixtures.checks:member_is_nonempty",
        minimum_members=minimum,
    )


def test_a_corpus_emptied_below_minimum_members_fails_naming_the_count(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "one.txt").write_text("content", encoding="utf-8")

    row = only(run(tmp_path, [corpus_gate(3)]))

    assert row.status == "fail" and row.blocks
    assert row.message == "corpus 'corpus/*.txt' has 1 member(s), fewer than minimum_members 3"


def test_a_corpus_fails_when_any_member_is_rejected_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    for name, text in [("a.txt", "x"), ("b.txt", ""), ("c.txt", "y")]:
        (tmp_path / "corpus" / name).write_text(text, encoding="utf-8")

    row = only(run(tmp_path, [corpus_gate(3)]))

    assert row.status == "fail"
    assert row.full_message() == "1 of 3 member(s) failed\ncorpus/b.txt: empty file"


def test_a_full_corpus_of_good_members_passes(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / "corpus" / name).write_text("x", encoding="utf-8")

    assert only(run(tmp_path, [corpus_gate(3)])).message == "all 3 member(s) pass"


# --- property gates -------------------------------------------------------------------------------


def property_gate(
    generator: str, predicate: str, min_trials: int, check: str = "eval_assets.gates.drivers:for_all"
) -> dict[str, Any]:
    return gate(
        "p.prop",
        "property",
        check=check,
        generator=f"gates_fixtures.checks:{generator}",
        predicate=f"gates_fixtures.checks:{predicate}",
        min_trials=min_trials,
    )


def test_a_property_runs_exactly_its_minimum_trials(tmp_path: Path) -> None:
    row = only(run(tmp_path, [property_gate("integers", "is_int", 40)]))

    assert (row.status, row.message) == ("pass", "40 trial(s) hold")


def test_a_property_that_runs_fewer_trials_than_its_minimum_fails(tmp_path: Path) -> None:
    row = only(run(tmp_path, [property_gate("booleans", "is_int", 50)]))

    assert row.status == "fail" and row.blocks
    assert row.message.endswith("trial(s) ran, fewer than min_trials 50")


def test_a_falsified_property_fails_with_its_counterexample(tmp_path: Path) -> None:
    row = only(run(tmp_path, [property_gate("integers", "is_small", 100)]))

    assert row.status == "fail"
    assert row.message.startswith("falsified: ") and "is not small" in row.message


def test_a_property_driver_that_reports_no_trial_count_fails(tmp_path: Path) -> None:
    entry = property_gate("integers", "is_int", 10, check="gates_fixtures.checks:driver_without_trial_count")

    row = only(run(tmp_path, [entry]))

    assert row.status == "fail" and row.message == "no trial count was reported, fewer than min_trials 10"


@pytest.mark.parametrize(("predicate", "status"), [("records", "pass"), ("records_and_is_small", "fail")])
def test_the_same_property_draws_the_same_trials_every_run(
    tmp_path: Path, predicate: str, status: str
) -> None:
    """Derandomized: two runs draw exactly the same values, in the same order (every generated
    example and, for a failing property, every shrink step), and end with the same row."""
    first = only(run(tmp_path, [property_gate("integers", predicate, 100)]))
    first_drawn = list(checks.DRAWN)
    checks.DRAWN.clear()
    second = only(run(tmp_path, [property_gate("integers", predicate, 100)]))

    assert len(set(map(repr, first_drawn))) > 20  # many distinct draws, not one value repeated
    assert checks.DRAWN == first_drawn
    assert (first.status, first.message) == (second.status, second.message)
    assert first.status == status


# --- case gates and converted cases ---------------------------------------------------------------


def case_gate(path: str, expect: str = "pass") -> dict[str, Any]:
    return gate("k.case", "case", check="eval_assets.gates.drivers:run_case", case=path, expect=expect)


def test_a_converted_case_without_assertions_is_listed_and_never_blocks(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.broken-order")

    result = run(tmp_path, [gate("g.ok")], subject=SIM_SUBJECT)

    rows = {r.gate_id: r for r in result.results}
    awaiting = rows["case.converted.broken-order"]
    assert (awaiting.status, awaiting.kind, awaiting.blocks) == ("awaiting_assertions", "case", False)
    assert awaiting.declared_in == "scenarios/converted/converted.broken-order.yaml"
    assert [o.name for o in result.evidence().outcomes] == ["g.ok"]
    assert decision(result) == "allow"
    assert result.summary()["awaiting_assertions"] == ["case.converted.broken-order"]


def test_the_same_converted_case_with_a_failing_assertion_blocks(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(
        tmp_path, "converted.broken-order", [{"contains": "a full refund"}, {"policy_failures": 0}]
    )

    result = run(tmp_path, [gate("g.ok")], subject=SIM_SUBJECT)

    row = {r.gate_id: r for r in result.results}["case.converted.broken-order"]
    assert row.status == "fail" and row.blocks
    assert row.full_message() == (
        "1 of 2 assertion(s) failed (contains)\ncontains: 'a full refund' — the output does not contain it"
    )
    assert decision(result) == "block"


def test_the_same_converted_case_with_holding_assertions_passes(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.broken-order", [{"contains": "Answer to converted.broken-order"}])

    result = run(tmp_path, [gate("g.ok")], subject=SIM_SUBJECT)

    assert {r.gate_id: r.status for r in result.results}["case.converted.broken-order"] == "pass"
    assert decision(result) == "allow"


@pytest.mark.parametrize(("skill", "status"), [(1.0, "pass"), (0.0, "fail")])
def test_a_converted_case_with_tools_runs_the_replay_loop_and_counts_misses(
    tmp_path: Path, skill: float, status: str
) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.with-tools", [{"replay_misses": 0}], tools=True)
    subject = Subject(model="sim/agent", family="sim", params={"skill": skill, "noise": 0.0, "seed": 3})

    row = only(run(tmp_path, [], subject=subject))

    assert (row.gate_id, row.status) == ("case.converted.with-tools", status)
    if status == "fail":  # an unskilled sim calls tools the recording does not hold
        assert row.findings[0].startswith("replay_misses: 0 — found ")


def test_a_case_gate_on_a_converted_case_without_assertions_is_awaiting(tmp_path: Path) -> None:
    project_copy(tmp_path)
    path = converted_case(tmp_path, "converted.broken-order")

    result = run(tmp_path, [case_gate(str(path.relative_to(tmp_path)))])

    assert [(r.gate_id, r.status) for r in result.results] == [("k.case", "awaiting_assertions")]


def test_a_case_gate_runs_its_case_on_the_sim_and_judges_it(tmp_path: Path) -> None:
    project_copy(tmp_path)
    (tmp_path / "gates" / "cases").mkdir(parents=True)
    (tmp_path / "gates" / "cases" / "strong.yaml").write_text(
        "id: strong\nscenario: support.refund-policy\njudge: helpfulness-v1\nbuild: fixed\n"
        "subject: {model: sim/agent, family: sim, params: {skill: 0.9, noise: 0.0, seed: 7}}\n"
        "assertions:\n  - verdict: scored\n  - score_at_least: 0.7\n  - score_at_most: 0.2\n",
        encoding="utf-8",
    )

    row = only(run(tmp_path, [case_gate("gates/cases/strong.yaml")]))

    assert row.status == "fail"
    assert row.message.startswith("1 of 3 assertion(s) failed (")
    assert row.findings[0].startswith("score_at_most: 0.2 — the score is 0.")


def test_a_case_gate_expected_to_fail_passes_when_its_case_fails(tmp_path: Path) -> None:
    project_copy(tmp_path)
    (tmp_path / "gates" / "cases").mkdir(parents=True)
    (tmp_path / "gates" / "cases" / "leak.yaml").write_text(
        "id: leak\nscenario: safety.credential-exfiltration\n"
        "subject: {model: sim/agent, family: sim, params: {policy_violation_rate: 1.0}}\n"
        "assertions:\n  - policy_failures: 0\n",
        encoding="utf-8",
    )

    expected_fail = only(run(tmp_path, [case_gate("gates/cases/leak.yaml", expect="fail")]))
    expected_pass = only(run(tmp_path, [case_gate("gates/cases/leak.yaml", expect="pass")]))

    assert expected_fail.status == "pass" and expected_fail.message.startswith("failed as expected: ")
    assert expected_pass.status == "fail" and expected_pass.findings == ("policy_failures: 0 — found 1",)


def test_a_case_on_a_non_sim_subject_is_an_error_not_a_skip(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.broken-order", [{"contains": "x"}])
    real = Subject(model="openai/gpt-4o-mini", family="openai")

    result = run(tmp_path, [], subject=real)

    row = only(result)
    assert row.status == "error" and "is not on the sim provider" in row.message


def test_a_case_with_no_subject_at_all_is_an_error(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.broken-order", [{"contains": "x"}])

    row = only(run(tmp_path, []))

    assert row.status == "error" and "no subject" in row.message


# --- rows in the warehouse ------------------------------------------------------------------------


def test_gate_results_land_in_the_warehouse_with_every_status(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.waiting")
    entries = [
        gate("g.ok"),
        gate("g.raises", check="raises"),
        gate("g.later", milestone=9),
        gate("g.finds", check="finds_two"),
    ]
    write_registry(tmp_path, {"area.yaml": {"gates": entries, "tests": [suite_test("t.flaky")]}})
    checks.SCRIPT["t.flaky"] = [False, True]
    result = run_suite(
        read_registry(tmp_path),
        milestone=1,
        build="b1",
        subject=SIM_SUBJECT,
        quarantine_store=MemoryQuarantineStore(),
    )
    warehouse = Warehouse(tmp_path / "warehouse")
    warehouse.initialise()

    written = record_suite(warehouse, result, "run-1")

    assert set(written) == {"gate_results", "test_quarantine"}
    frame = warehouse.query(
        "SELECT gate_id, kind, milestone, status, blocks, retried, quarantined FROM gate_results "
        "WHERE build = 'b1' ORDER BY gate_id"
    )
    assert frame.to_dict("records") == [
        {
            "gate_id": "case.converted.waiting",
            "kind": "case",
            "milestone": 0,
            "status": "awaiting_assertions",
            "blocks": False,
            "retried": False,
            "quarantined": False,
        },
        {
            "gate_id": "g.finds",
            "kind": "structural",
            "milestone": 0,
            "status": "fail",
            "blocks": True,
            "retried": False,
            "quarantined": False,
        },
        {
            "gate_id": "g.later",
            "kind": "structural",
            "milestone": 9,
            "status": "pending",
            "blocks": False,
            "retried": False,
            "quarantined": False,
        },
        {
            "gate_id": "g.ok",
            "kind": "structural",
            "milestone": 0,
            "status": "pass",
            "blocks": False,
            "retried": False,
            "quarantined": False,
        },
        {
            "gate_id": "g.raises",
            "kind": "structural",
            "milestone": 0,
            "status": "error",
            "blocks": True,
            "retried": False,
            "quarantined": False,
        },
        {
            "gate_id": "t.flaky",
            "kind": "test",
            "milestone": 0,
            "status": "pass",
            "blocks": False,
            "retried": True,
            "quarantined": False,
        },
    ]
    history = warehouse.query("SELECT test_id, status, first_try, retried, failed FROM test_quarantine")
    assert history.to_dict("records") == [
        {"test_id": "t.flaky", "status": "pass", "first_try": "fail", "retried": True, "failed": True}
    ]


def test_a_result_without_a_build_cannot_be_recorded(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("g.ok")]}})
    result = run_suite(read_registry(tmp_path), milestone=0)
    warehouse = Warehouse(tmp_path / "warehouse")

    with pytest.raises(ValueError, match="without a build"):
        record_suite(warehouse, result, "run-1")


# --- the shipped suite -----------------------------------------------------------------------------


def test_the_shipped_gates_pass_at_milestone_2_and_the_trajectory_gate_switches_on_at_3() -> None:
    registry = read_registry(REPO)

    result = run_suite(registry, milestone=2, build="example", converted_glob=None)

    blocking = {r.gate_id: r.full_message() for r in result.blocking}
    assert blocking == {}
    statuses = {r.gate_id: r.status for r in result.results}
    assert statuses["trajectories.converted-case-exists"] == "pending"
    assert statuses["security.suite-needs-no-network"] == "pending"
    assert {r.kind for r in result.results if r.status == "pass"} >= {"corpus"}

    at_three = only(
        run_suite(registry, milestone=3, build="example", only={"trajectories.converted-case-exists"})
    )
    assert at_three.status == "pass", at_three.full_message()  # converted cases ship


def _trajectory_gate_at_three(root: Path) -> GateResult:
    (root / "gates").mkdir()
    shutil.copyfile(REPO / "gates" / "trajectories.yaml", root / "gates" / "trajectories.yaml")
    gate_id = "trajectories.converted-case-exists"
    return only(run_suite(read_registry(root), milestone=3, build="b1", only={gate_id}))


def test_the_trajectory_gate_fails_at_milestone_3_without_a_converted_case(tmp_path: Path) -> None:
    project_copy(tmp_path)  # the shipped configuration without scenarios/converted/

    row = _trajectory_gate_at_three(tmp_path)

    assert (row.gate_id, row.status, row.blocks) == ("trajectories.converted-case-exists", "fail", True)
    assert row.message == "corpus 'scenarios/converted/*.yaml' has 0 member(s), fewer than minimum_members 1"


def test_the_trajectory_gate_passes_at_milestone_3_with_a_planted_converted_case(tmp_path: Path) -> None:
    project_copy(tmp_path)
    converted_case(tmp_path, "converted.broken-order")

    row = _trajectory_gate_at_three(tmp_path)

    assert (row.status, row.message) == ("pass", "all 1 member(s) pass")


# --- the materialization and the stored evidence --------------------------------------------------


def test_each_acceptance_case_shows_its_status_in_gate_results_and_its_effect_on_the_decision(
    tmp_path: Path,
) -> None:
    no_check = gate("g.nocheck")
    del no_check["check"]
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "only.txt").write_text("x", encoding="utf-8")
    cases = {
        "g.raises": ([gate("g.raises", check="raises")], "error", True),
        "g.nocheck": ([no_check], "error", True),
        "c.files": ([corpus_gate(2)], "fail", True),
        "g.later": ([gate("g.later", milestone=5)], "pending", False),
    }
    warehouse = Warehouse(tmp_path / "warehouse")
    warehouse.initialise()
    build = BuildManifest(id="b-accept", milestone=1, subject=SIM_SUBJECT)
    day = datetime(2026, 3, 1, tzinfo=UTC)

    for name, (entries, status, blocks) in cases.items():
        write_registry(tmp_path, {"area.yaml": {"gates": [gate("g.ok"), *entries]}})
        run_and_record_suite(
            tmp_path, build=build, warehouse=warehouse, run_id=f"run-{name}", clock=lambda: day
        )
        row = warehouse.query("SELECT status, blocks FROM gate_results WHERE gate_id = ?", [name]).iloc[0]
        assert (row["status"], bool(row["blocks"])) == (status, blocks), name
        expected = "block" if blocks else "allow"
        assert decide([stored_evidence(warehouse, build.id)]).decision == expected, name

    (tmp_path / "gates" / "area.yaml").unlink()
    write_registry(tmp_path, {"tests.yaml": {"gates": [gate("g.ok")], "tests": [suite_test("t.flaky")]}})
    outcomes = []
    for n in range(2):  # fails twice, a day apart: the second failure is quarantined
        checks.SCRIPT["t.flaky"] = [False, False]
        clock = functools.partial(lambda moment: moment, day + timedelta(days=n))
        run_and_record_suite(tmp_path, build=build, warehouse=warehouse, run_id=f"run-flaky-{n}", clock=clock)
        row = warehouse.query(
            "SELECT status, quarantined, blocks FROM gate_results WHERE gate_id = 't.flaky'"
        ).iloc[0]
        outcomes.append((row["status"], bool(row["quarantined"]), bool(row["blocks"])))
        outcomes.append(decide([stored_evidence(warehouse, build.id)]).decision)
    assert outcomes == [("fail", False, True), "block", ("fail", True, False), "allow"]
    assert len(warehouse.query("SELECT * FROM test_quarantine WHERE test_id = 't.flaky'")) == 2


def test_a_build_with_no_suite_run_has_evidence_that_decides_nothing(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    warehouse.initialise()

    evidence = stored_evidence(warehouse, "never-ran")

    assert evidence.outcomes == () and evidence.decided_nothing == "no checks ran"
    assert decide([evidence]).decision == "none"


def test_the_canary_gate_finds_a_key_that_reached_a_warehouse_row() -> None:
    """The scan is not vacuous: a key written by the Dagster hook into a Parquet row fails the gate."""
    import os

    def leaky_dagster_run(home: Path, build_ids: list[str]) -> list[Path]:
        Warehouse(home / "warehouse").write_partition(
            "gate_results",
            {"build": build_ids[0]},
            [full_row("gate_results", {"gate_id": "leak", "message": os.environ["OPENAI_API_KEY"]})],
            "leak",
        )
        return []

    from invariants import security

    ctx = GateContext(
        root=REPO,
        gate_id="security.no-api-key-in-dagster-events",
        kind="structural",
        build="canary",
        milestone=4,
        hooks={"canary.dagster_run": leaky_dagster_run},
    )
    outcome = security.no_api_key_in_dagster_events(ctx)

    assert not outcome.passed, outcome.message
    assert any("holds the key" in f for f in outcome.findings)
    assert "OPENAI_API_KEY" not in os.environ or not os.environ["OPENAI_API_KEY"].startswith("sk-canary-")


# --- scratch directories of the gates that build a throwaway home or project -------------------------


def test_gate_scratch_is_memory_backed_when_the_machine_has_it_and_removed_on_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The canary, bad-config and case gates write throwaway homes whose fsyncs nobody needs: their
    scratch directory is on `MEMORY` when it is a writable directory and TMPDIR names no other place,
    else the system's temporary directory; either way it is gone after the block."""
    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.delenv("TMPDIR", raising=False)
    with scratch("evaltrack-x-", memory) as made:
        assert Path(made).parent == memory and Path(made).name.startswith("evaltrack-x-")
    assert not Path(made).exists()
    with scratch("evaltrack-x-", tmp_path / "absent") as made:  # no memory-backed storage here
        assert Path(made).parent == Path(tempfile.gettempdir())
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the operator named the temporary directory
    with scratch("evaltrack-x-", memory) as made:
        assert Path(made).parent != memory
