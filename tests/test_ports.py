"""The ports check: each port of `eval_assets.ports` has its one contract module, over every implementation."""

from __future__ import annotations

import shutil
from pathlib import Path

from invariants.ports import contract_problems

from eval_assets.ports import PORTS, Port, port

TESTS = Path(__file__).resolve().parent


def _contracts_copy(tmp_path: Path) -> Path:
    out = tmp_path / "tests"
    out.mkdir()
    for path in TESTS.glob("test_contract_*.py"):
        shutil.copy(path, out / path.name)
    return out


def test_every_port_has_its_contract_module_over_every_implementation() -> None:
    assert contract_problems(TESTS, PORTS) == []
    assert {p.name for p in PORTS} == {"model_gateway", "agent_protocol", "spend_journal", "warehouse_storage"}


def test_removing_one_registration_fails_the_check(tmp_path: Path) -> None:
    tests = _contracts_copy(tmp_path)
    module = tests / "test_contract_model_gateway.py"
    text = module.read_text(encoding="utf-8")
    assert 'IMPLEMENTATIONS = ("sim", "script", "openai")' in text
    module.write_text(text.replace('IMPLEMENTATIONS = ("sim", "script", "openai")', 'IMPLEMENTATIONS = ("sim", "openai")'))

    assert contract_problems(tests, PORTS) == [
        "model_gateway: implementation 'script' is not registered against tests/test_contract_model_gateway.py"
    ]


def test_a_port_without_a_contract_module_fails_the_check(tmp_path: Path) -> None:
    tests = _contracts_copy(tmp_path)
    (tests / "test_contract_warehouse_storage.py").unlink()

    assert contract_problems(tests, PORTS) == [
        "warehouse_storage: no contract module tests/test_contract_warehouse_storage.py"
    ]


def test_a_new_implementation_of_a_port_fails_until_its_contract_covers_it(tmp_path: Path) -> None:
    journal = port("spend_journal")
    grown = [p if p is not journal else Port(p.name, p.face, (*p.implementations, "mysql")) for p in PORTS]

    assert contract_problems(TESTS, grown) == [
        "spend_journal: implementation 'mysql' is not registered against tests/test_contract_spend_journal.py"
    ]


def test_a_fixture_not_parameterized_over_the_registrations_and_a_stray_contract_module_fail(
    tmp_path: Path,
) -> None:
    tests = _contracts_copy(tmp_path)
    module = tests / "test_contract_warehouse_storage.py"
    module.write_text(module.read_text(encoding="utf-8").replace("params=IMPLEMENTATIONS", 'params=["local"]'))
    (tests / "test_gateway_contract.py").write_text("IMPLEMENTATIONS = ()\n", encoding="utf-8")

    assert contract_problems(tests, PORTS) == [
        "tests/test_gateway_contract.py: a contract module is named tests/test_contract_<port>.py",
        "tests/test_contract_warehouse_storage.py: no fixture parameterized over IMPLEMENTATIONS",
    ]
