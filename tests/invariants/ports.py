"""The ports check: every port of `eval_assets.ports.PORTS` has exactly one contract module, and
every implementation is registered against it.

A contract module (`tests/test_contract_<port>.py`) registers its implementations in a module-level
literal, `IMPLEMENTATIONS = ("a", "b")`, and parameterizes its implementation fixture over it
(`@pytest.fixture(params=IMPLEMENTATIONS)`), so every contract test runs on each registered one. The
check reads the modules' source (nothing imported) and reports, one line each: a port without its
module, a contract module of no port, another module claiming to be a contract, a module without the
literal or the parameterized fixture, an implementation of the port not registered, and a registered
name that is no implementation of the port.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from eval_assets.ports import Port

PREFIX = "test_contract_"


def _registered(tree: ast.Module) -> tuple[str, ...] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "IMPLEMENTATIONS" for t in targets) and node.value:
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    return None
                return tuple(value) if isinstance(value, tuple | list) else None
    return None


def _parameterized_fixture(tree: ast.Module) -> bool:
    """A fixture whose params are IMPLEMENTATIONS: `@pytest.fixture(params=IMPLEMENTATIONS)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) in ("pytest.fixture", "fixture"):
                    for kw in deco.keywords:
                        if kw.arg == "params" and isinstance(kw.value, ast.Name) and kw.value.id == "IMPLEMENTATIONS":
                            return True
    return False


def contract_problems(tests: Path, ports: Sequence[Port]) -> list[str]:
    """What the ports check finds under the `tests` directory for `ports` (empty: it holds)."""
    problems: list[str] = []
    names = {p.name for p in ports}
    for path in sorted(tests.glob("test_*contract*.py")):
        port_name = path.stem.removeprefix(PREFIX)
        if not path.stem.startswith(PREFIX):
            problems.append(f"tests/{path.name}: a contract module is named tests/{PREFIX}<port>.py")
        elif port_name not in names:
            problems.append(f"tests/{path.name}: no port {port_name!r} in eval_assets/ports.py")
    for port in ports:
        path = tests / f"{PREFIX}{port.name}.py"
        if not path.is_file():
            problems.append(f"{port.name}: no contract module {port.contract_module}")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        registered = _registered(tree)
        if registered is None:
            problems.append(f"{port.contract_module}: no IMPLEMENTATIONS literal registering its implementations")
            continue
        if not _parameterized_fixture(tree):
            problems.append(f"{port.contract_module}: no fixture parameterized over IMPLEMENTATIONS")
        for missing in port.implementations:
            if missing not in registered:
                problems.append(
                    f"{port.name}: implementation {missing!r} is not registered against {port.contract_module}"
                )
        for extra in registered:
            if extra not in port.implementations:
                problems.append(
                    f"{port.contract_module}: {extra!r} is no implementation of {port.name} in eval_assets/ports.py"
                )
    return problems
