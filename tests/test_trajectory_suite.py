"""Converted cases in the deterministic suite: awaiting assertions never block; a failing assertion does."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from gates_fixtures.build import gate, write_registry

from eval_assets.config import ConfigError, Subject, load_project
from eval_assets.gates import SuiteResult, read_registry, run_suite
from eval_assets.stats import decide

ROOT = Path(__file__).resolve().parents[1]
CONVERTED = sorted((ROOT / "scenarios" / "converted").glob("*.yaml"))
SIM_SUBJECT = Subject(model="sim/agent", family="sim", params={"skill": 0.8, "noise": 0.0, "seed": 1})
CASE = "converted.support-54499ac5f762"


def project_with_converted_cases(root: Path) -> Path:
    """The shipped configuration, its converted cases included, and a registry with one passing gate."""
    for sub in ("scenarios", "rubrics", "judges"):
        shutil.copytree(ROOT / sub, root / sub)
    shutil.copyfile(ROOT / "evaltrack.yaml", root / "evaltrack.yaml")
    write_registry(root, {"area.yaml": {"gates": [gate("g.ok")]}})
    return root


def add_assertions(root: Path, case: str, assertions: list[dict[str, Any]]) -> Path:
    """What a person does: append an `assertions:` block to a converted file."""
    path = root / "scenarios" / "converted" / f"{case}.yaml"
    block = yaml.safe_dump({"assertions": assertions}, sort_keys=False)
    path.write_text(path.read_text(encoding="utf-8") + block, encoding="utf-8")
    return path


def suite(root: Path) -> SuiteResult:
    return run_suite(read_registry(root, check_imports=False), milestone=3, build="b1", subject=SIM_SUBJECT)


def decision(result: SuiteResult) -> str:
    return decide([result.evidence()]).decision


def test_converted_cases_without_assertions_are_listed_and_never_block_the_release(tmp_path: Path) -> None:
    result = suite(project_with_converted_cases(tmp_path))

    awaiting = [r for r in result.results if r.status == "awaiting_assertions"]
    assert sorted(r.gate_id for r in awaiting) == sorted(f"case.{p.stem}" for p in CONVERTED)
    assert len(awaiting) == 6 and not any(r.blocks for r in awaiting)
    assert [o.name for o in result.evidence().outcomes] == ["g.ok"]
    assert decision(result) == "allow"


def test_the_same_case_with_a_failing_assertion_blocks_the_release(tmp_path: Path) -> None:
    root = project_with_converted_cases(tmp_path)
    add_assertions(root, CASE, [{"contains": "out for delivery today"}, {"policy_failures": 0}])

    result = suite(root)

    row = {r.gate_id: r for r in result.results}[f"case.{CASE}"]
    assert (row.status, row.blocks) == ("fail", True)
    assert row.full_message() == (
        "1 of 2 assertion(s) failed (contains)\ncontains: 'out for delivery today' — the output does not contain it"
    )
    assert decision(result) == "block"
    assert len(result.ids("awaiting_assertions")) == 5  # the others still wait, and still do not block


def test_the_same_case_with_holding_assertions_runs_and_allows(tmp_path: Path) -> None:
    root = project_with_converted_cases(tmp_path)
    add_assertions(root, CASE, [{"contains": f"Answer to {CASE}"}, {"not_contains": "BEGIN PRIVATE KEY"}])

    result = suite(root)

    assert {r.gate_id: r.status for r in result.results}[f"case.{CASE}"] == "pass"
    assert decision(result) == "allow"
    assert CASE in load_project(root).scenarios  # the project's loader accepts the asserted file


def test_assertions_on_an_authored_scenario_are_refused_by_the_loader(tmp_path: Path) -> None:
    root = project_with_converted_cases(tmp_path)
    path = root / "scenarios" / "support" / "support.refund-policy.yaml"
    path.write_text(
        path.read_text(encoding="utf-8") + "assertions:\n  - contains: refund\n", encoding="utf-8"
    )

    with pytest.raises(ConfigError, match="only a converted scenario"):
        load_project(root)


def test_the_trajectory_gate_passes_at_milestone_3_on_the_shipped_cases() -> None:
    result = run_suite(
        read_registry(ROOT), milestone=3, build="dogfood", only={"trajectories.converted-case-exists"}
    )

    [row] = result.results
    assert (row.status, row.blocks) == ("pass", False), row.full_message()
