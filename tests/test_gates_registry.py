"""The gate registry and the docs check: what validation rejects, and how it says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from gates_fixtures.build import DOC, REPO, gate, suite_test, write_registry, write_spec

from eval_assets.config import ConfigError, Problem
from eval_assets.gates import (
    CaseGate,
    CorpusGate,
    PropertyGate,
    check_docs,
    load_registry,
    read_registry,
    validate_gates,
)

AREA = "gates/area.yaml"


def lines(problems: list[Problem] | tuple[Problem, ...]) -> list[str]:
    return [str(p) for p in problems]


# --- the shipped registry ---------------------------------------------------------------------------


def test_shipped_registry_is_valid_and_every_spec_declares_exactly_its_gates() -> None:
    registry = read_registry(REPO)

    assert lines(registry.problems) == []
    assert lines(check_docs(REPO, registry)) == []
    assert registry.gates  # the example project's gates (its configuration loads, its suite is offline)
    assert all(g.declared_in.document.startswith("docs/specs/") for g in registry.gates)


def test_shipped_trajectory_gate_switches_on_at_milestone_3() -> None:
    gate_ = read_registry(REPO).gate("trajectories.converted-case-exists")

    assert isinstance(gate_, CorpusGate)
    assert gate_.milestone == 3 and gate_.minimum_members == 1


def test_the_scenario_corpus_floor_is_the_shipped_count() -> None:
    """`minimum_members` of the scenario gate is what it says: the number of scenario files that
    ship, so deleting any one of them fails the gate (adding one means raising the floor)."""
    gate_ = read_registry(REPO).gate("config.every-scenario-validates")

    assert isinstance(gate_, CorpusGate)
    shipped = sorted(p for p in REPO.glob(gate_.corpus) if p.is_file())
    assert gate_.minimum_members == len(shipped)


# --- validation -----------------------------------------------------------------------------------


def test_a_valid_registry_of_every_kind_loads(tmp_path: Path) -> None:
    (tmp_path / "gates" / "cases").mkdir(parents=True)
    (tmp_path / "gates" / "cases" / "c.yaml").write_text(
        "id: c\nscenario: any.scenario\nassertions:\n  - contains: x\n", encoding="utf-8"
    )
    write_registry(
        tmp_path,
        {
            "area.yaml": {
                "gates": [
                    gate("s.one"),
                    gate(
                        "p.one",
                        "property",
                        check="eval_assets.gates.drivers:for_all",
                        generator="gates_fixtures.checks:integers",
                        predicate="gates_fixtures.checks:is_int",
                        min_trials=10,
                    ),
                    gate(
                        "c.one",
                        "corpus",
                        check="eval_assets.gates.drivers:each_member",
                        corpus="corpus/*.txt",
                        procedure="gates_fixtures.checks:member_is_nonempty",
                        minimum_members=1,
                    ),
                    gate(
                        "k.one",
                        "case",
                        check="eval_assets.gates.drivers:run_case",
                        case="gates/cases/c.yaml",
                        expect="pass",
                    ),
                ],
                "tests": [suite_test("t.one")],
            }
        },
    )

    registry = load_registry(tmp_path)

    assert [g.id for g in registry.gates] == ["s.one", "p.one", "c.one", "k.one"]
    assert isinstance(registry.gates[1], PropertyGate) and isinstance(registry.gates[3], CaseGate)
    assert [t.id for t in registry.tests] == ["t.one"]
    assert registry.sources["t.one"] == AREA


def test_a_missing_field_is_reported_with_file_and_field(tmp_path: Path) -> None:
    entry = gate("s.one")
    del entry["statement"]
    write_registry(tmp_path, {"area.yaml": {"gates": [entry]}})

    registry = read_registry(tmp_path)

    assert lines(registry.problems) == [f"{AREA}: gates.0.statement: required field is missing"]
    assert [e.id for e in registry.invalid] == ["s.one"] and registry.gates == ()


def test_a_gate_without_a_check_is_rejected(tmp_path: Path) -> None:
    entry = gate("s.one")
    del entry["check"]
    write_registry(tmp_path, {"area.yaml": {"gates": [entry]}})

    with pytest.raises(ConfigError) as raised:
        load_registry(tmp_path)

    assert lines(raised.value.problems) == [f"{AREA}: gates.0.check: required field is missing"]


def test_kind_specific_fields_are_required_and_foreign_ones_refused(tmp_path: Path) -> None:
    prop = gate(
        "p.one",
        "property",
        generator="gates_fixtures.checks:integers",
        predicate="gates_fixtures.checks:is_int",
    )
    struct = gate("s.one", corpus="corpus/*")
    write_registry(tmp_path, {"area.yaml": {"gates": [prop, struct]}})

    assert lines(read_registry(tmp_path).problems) == [
        f"{AREA}: gates.0.min_trials: required field is missing",
        f"{AREA}: gates.1.corpus: unknown field",
    ]


def test_an_unknown_kind_is_rejected_naming_the_known_kinds(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("s.one", "vibes")]}})

    assert lines(read_registry(tmp_path).problems) == [
        f"{AREA}: gates.0.kind: unknown kind 'vibes' (known: case, corpus, property, structural)"
    ]


def test_a_missing_kind_is_reported_with_the_other_missing_fields(tmp_path: Path) -> None:
    entry = gate("s.one")
    del entry["kind"], entry["milestone"]
    write_registry(tmp_path, {"area.yaml": {"gates": [entry]}})

    assert lines(read_registry(tmp_path).problems) == [
        f"{AREA}: gates.0.kind: required field is missing",
        f"{AREA}: gates.0.milestone: required field is missing",
    ]


def test_a_duplicate_id_across_files_names_both_files(tmp_path: Path) -> None:
    write_registry(
        tmp_path, {"a.yaml": {"gates": [gate("same.id")]}, "b.yaml": {"tests": [suite_test("same.id")]}}
    )

    registry = read_registry(tmp_path)

    assert lines(registry.problems) == [
        "gates/b.yaml: tests.0.id: duplicate id 'same.id' (also in gates/a.yaml)"
    ]
    assert [g.id for g in registry.gates] == ["same.id"] and registry.tests == ()
    assert [e.id for e in registry.invalid] == ["gates/b.yaml#tests.0"]


@pytest.mark.parametrize(
    ("field", "target", "reason"),
    [
        (
            "check",
            "gates_fixtures.nowhere:passes",
            "ModuleNotFoundError: No module named 'gates_fixtures.nowhere'",
        ),
        (
            "check",
            "gates_fixtures.checks:no_such_check",
            "module 'gates_fixtures.checks' has no attribute 'no_such_check'",
        ),
        ("check", "gates_fixtures.checks:SCRIPT", "'SCRIPT' is not callable"),
        ("generator", "gates_fixtures.checks:no_generator", "has no attribute 'no_generator'"),
        ("procedure", "no_such_package.mod:procedure", "No module named 'no_such_package'"),
    ],
)
def test_a_callable_that_does_not_import_is_named_with_the_reason(
    tmp_path: Path, field: str, target: str, reason: str
) -> None:
    entries = {
        "check": gate("g.one", check=target),
        "generator": gate(
            "g.one",
            "property",
            check="eval_assets.gates.drivers:for_all",
            generator=target,
            predicate="gates_fixtures.checks:is_int",
            min_trials=5,
        ),
        "procedure": gate(
            "g.one",
            "corpus",
            check="eval_assets.gates.drivers:each_member",
            corpus="c/*",
            procedure=target,
            minimum_members=1,
        ),
    }
    write_registry(tmp_path, {"area.yaml": {"gates": [entries[field]]}})

    registry = read_registry(tmp_path)

    [problem] = registry.problems
    assert (problem.path, problem.field) == (AREA, f"gates.0.{field}")
    assert problem.message.startswith(f"{target!r} does not import: ") and reason in problem.message
    assert [g.id for g in registry.gates] == ["g.one"]  # kept: the runner reports it as an error
    assert read_registry(tmp_path, check_imports=False).problems == ()


def test_a_case_gate_whose_case_file_is_missing_is_rejected(tmp_path: Path) -> None:
    entry = gate(
        "k.one",
        "case",
        check="eval_assets.gates.drivers:run_case",
        case="gates/cases/nope.yaml",
        expect="pass",
    )
    write_registry(tmp_path, {"area.yaml": {"gates": [entry]}})

    assert lines(read_registry(tmp_path).problems) == [
        f"{AREA}: gates.0.case: case file 'gates/cases/nope.yaml' does not exist"
    ]


def test_a_corpus_outside_the_project_root_is_rejected(tmp_path: Path) -> None:
    entry = gate(
        "c.one",
        "corpus",
        corpus="../elsewhere/*",
        procedure="gates_fixtures.checks:member_is_nonempty",
        minimum_members=1,
    )
    write_registry(tmp_path, {"area.yaml": {"gates": [entry]}})

    [problem] = read_registry(tmp_path).problems
    assert problem.field == "gates.0.corpus" and "relative to the project root" in problem.message


def test_malformed_yaml_and_unknown_top_level_keys_are_problems(tmp_path: Path) -> None:
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "bad.yaml").write_text("gates: [\n", encoding="utf-8")
    (tmp_path / "gates" / "odd.yaml").write_text("gatez: []\n", encoding="utf-8")

    found = lines(read_registry(tmp_path).problems)

    assert found[0].startswith("gates/bad.yaml: <yaml>: malformed YAML (line ")
    assert found[1] == "gates/odd.yaml: gatez: unknown field"


# --- the docs check -------------------------------------------------------------------------------


def test_docs_check_passes_when_each_spec_declares_its_registry_ids(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one"), gate("a.two")]}})
    write_spec(tmp_path, ["a.two", "a.one"])

    assert check_docs(tmp_path) == []
    assert validate_gates(tmp_path) == []


def test_a_gate_dropped_from_its_spec_is_named_with_the_document(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one"), gate("a.two")]}})
    write_spec(tmp_path, ["a.one"])

    assert lines(check_docs(tmp_path)) == [
        f"{DOC}: Hard gates: in the registry but not declared here: `a.two`",
        f"{DOC}: Hard gates: declares 1 gate(s); the registry has 2 for this document",
    ]


def test_a_gate_declared_in_a_spec_but_not_registered_is_named(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one")]}})
    write_spec(tmp_path, ["a.one", "a.ghost"])

    assert lines(check_docs(tmp_path)) == [
        f"{DOC}: Hard gates: declared here but not in the registry for this document: `a.ghost`",
        f"{DOC}: Hard gates: declares 2 gate(s); the registry has 1 for this document",
    ]


def test_a_gate_listed_twice_is_a_count_mismatch(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one")]}})
    write_spec(tmp_path, ["a.one", "a.one"])

    assert lines(check_docs(tmp_path)) == [
        f"{DOC}: Hard gates: declared more than once: `a.one`",
        f"{DOC}: Hard gates: declares 2 gate(s); the registry has 1 for this document",
    ]


def test_a_gate_registered_under_another_spec_is_said_so(tmp_path: Path) -> None:
    other = gate("b.one")
    other["declared_in"] = {"document": "docs/specs/other.md", "heading": "Hard gates"}
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one"), other]}})
    write_spec(tmp_path, ["a.one", "b.one"])
    write_spec(tmp_path, [], name="docs/specs/other.md")

    found = lines(check_docs(tmp_path))

    assert (
        f"{DOC}: Hard gates: declared here but not in the registry for this document: `b.one` "
        "(`b.one` is registered under docs/specs/other.md)" in found
    )
    assert "docs/specs/other.md: Hard gates: in the registry but not declared here: `b.one`" in found


def test_a_spec_without_a_hard_gates_section_or_a_missing_spec_is_named(tmp_path: Path) -> None:
    elsewhere = gate("b.one")
    elsewhere["declared_in"] = {"document": "docs/specs/missing.md", "heading": "Hard gates"}
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one"), elsewhere]}})
    write_spec(tmp_path, ["a.one"], heading="Invariants")

    assert lines(check_docs(tmp_path)) == [
        f"{DOC}: heading 'Hard gates': `a.one` links to a heading this document lacks",
        f"{DOC}: Hard gates: no 'Hard gates' section, but the registry has 1 gate(s) for this document: `a.one`",
        "docs/specs/missing.md: <file>: named by declared_in of `b.one`, but it does not exist",
    ]


def test_ids_in_code_fences_and_other_sections_are_not_declarations(tmp_path: Path) -> None:
    write_registry(tmp_path, {"area.yaml": {"gates": [gate("a.one")]}})
    path = write_spec(tmp_path, ["a.one"])
    path.write_text(path.read_text() + "\n## 4. Hard gates\n\n```\n- `fenced.id`\n```\n", encoding="utf-8")

    assert check_docs(tmp_path) == []  # the numbered second section adds nothing: its one item is fenced
