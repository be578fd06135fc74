"""Exit codes come from one table (`eval_assets.exit_codes`): no literal exit code in `eval_assets/cli/`,
and every code a leaf command's handler can return is one its --help declares (read from the source)."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_assets import exit_codes
from eval_assets.cli.reference import declared_exits, leaves

CLI = Path(__file__).resolve().parents[1] / "eval_assets" / "cli"
CODE_NAME = re.compile(r"exit|code|status", re.IGNORECASE)
CODE_IN_TEXT = re.compile(r"\bexit(?:s|ed)?(?: codes?)?:? \(?\d", re.IGNORECASE)
EXIT_CALLS = {"exit", "_exit", "SystemExit"}


def _ints(node: ast.AST | None) -> bool:
    """Whether `node` is an int literal, or a conditional or boolean choice between values one of which is."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.IfExp):
        return _ints(node.body) or _ints(node.orelse)
    if isinstance(node, ast.BoolOp):
        return any(_ints(v) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return _ints(node.operand)
    return False


def _texts(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def literal_exit_codes(source: str, shown: str) -> list[str]:
    """Where `source` states an exit code itself instead of naming it from `eval_assets.exit_codes`: a
    returned, exited, assigned, compared or defaulted int literal, an `EXIT_*` name of its own, or a
    code written into a text (`help="... exit 0 ..."`)."""
    found = []

    def at(node: ast.AST, what: str) -> None:
        found.append(f"{shown}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Return) and _ints(node.value):
            at(node, f"return {ast.unparse(node.value)}")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func).split(".")[-1]
            given = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("status", "code"))]
            if name in EXIT_CALLS and any(_ints(a) for a in given):
                at(node, ast.unparse(node))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                text = ast.unparse(target)
                if text.split(".")[-1].startswith("EXIT_") or (CODE_NAME.search(text) and _ints(node.value)):
                    at(node, f"{text} = {ast.unparse(node.value) if node.value else ''}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(CODE_NAME.search(ast.unparse(s)) for s in sides if not isinstance(s, ast.Constant))
            if named and any(_ints(s) or isinstance(s, ast.Tuple) and any(map(_ints, s.elts)) for s in sides):
                at(node, ast.unparse(node))
        elif isinstance(node, ast.arguments):
            named_args = [*node.posonlyargs, *node.args][-len(node.defaults) :] if node.defaults else []
            pairs = [
                *zip(named_args, node.defaults, strict=True),
                *zip(node.kwonlyargs, node.kw_defaults, strict=True),
            ]
            for arg, default in pairs:
                if CODE_NAME.search(arg.arg) and _ints(default):
                    at(arg, f"{arg.arg}={ast.unparse(default)}")
        for text in _texts(node):
            if CODE_IN_TEXT.search(text):
                at(node, f"an exit code in a text: {text!r}")
    return found


def _modules() -> dict[str, Path]:
    return {
        f"eval_assets.cli.{p.stem}" if p.stem != "__init__" else "eval_assets.cli": p
        for p in sorted(CLI.glob("*.py"))
    }


def test_no_module_of_the_cli_states_an_exit_code_itself() -> None:
    found = [
        finding
        for module, path in _modules().items()
        for finding in literal_exit_codes(path.read_text(encoding="utf-8"), f"{module}")
    ]
    assert found == []


PLANTED = [
    "def run(args):\n    return 1\n",
    "def run(args):\n    return 0 if args.ok else 1\n",
    "import sys\nsys.exit(2)\n",
    "raise SystemExit(3)\n",
    "EXIT_REFUSED = exit_codes.REFUSED\n",
    "code = 1 if blocking else 0\n",
    "if b['exit_code'] != 0:\n    pass\n",
    "if code in (0, 143):\n    pass\n",
    "def exit(self, status=0):\n    pass\n",
    "p.add_parser('x', help='print it; exit 0 allow, 1 block')\n",
    "help_exit_code = 0\n",
]


@pytest.mark.parametrize("source", PLANTED)
def test_a_planted_literal_exit_code_is_found(source: str) -> None:
    assert literal_exit_codes(source, "planted") != []


@pytest.mark.parametrize(
    "source",
    [
        "def run(args):\n    return exit_codes.OK if args.ok else exit_codes.REFUSED\n",
        "width = 20\nfilled = round(20 * done / planned) if planned else 0\n",
        "print(f'{b}: exit {b[\"exit_code\"]}')\n",
        "return len(text)\n",
    ],
)
def test_named_codes_and_other_numbers_are_not_findings(source: str) -> None:
    assert literal_exit_codes(source, "fine") == []


# --- every code a handler returns is declared in its --help -----------------------------------------


class _Codes:
    """The exit codes each function of `eval_assets/cli/` can return, read from its source: a named code
    (`exit_codes.REFUSED`, `exit_codes.DECISION["none"]`), a choice between them, a local name assigned
    them, or a call of another function of the cli (followed). Anything else is `unknown`."""

    def __init__(self) -> None:
        self.functions: dict[tuple[str, str], ast.FunctionDef] = {}
        self.imported: dict[tuple[str, str], tuple[str, str]] = {}
        for module, path in _modules().items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault((module, node.name), node)
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eval_assets.cli"):
                    for alias in node.names:
                        self.imported[(module, alias.asname or alias.name)] = (node.module or "", alias.name)
        self.unknown: list[str] = []
        self._done: dict[tuple[str, str], set[int]] = {}

    def returned(self, module: str, name: str) -> set[int]:
        key = self.imported.get((module, name), (module, name))
        if key in self._done:
            return self._done[key]
        self._done[key] = set()  # a recursive call adds nothing new
        function = self.functions[key]
        assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        codes: set[int] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None and _own(node, function):
                codes |= self._codes(key[0], node.value, assigned, f"{key[0]}.{key[1]}")
        self._done[key] = codes
        return codes

    def _codes(
        self, module: str, node: ast.expr, assigned: dict[str, list[ast.expr]], where: str
    ) -> set[int]:
        text = ast.unparse(node)
        if isinstance(node, ast.Attribute) and text.startswith("exit_codes."):
            return {getattr(exit_codes, node.attr)}
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "exit_codes.DECISION":
            key = node.slice
            if isinstance(key, ast.Constant):
                return {exit_codes.DECISION[key.value]}
            return set(exit_codes.DECISION.values())
        if isinstance(node, ast.IfExp):
            return self._codes(module, node.body, assigned, where) | self._codes(
                module, node.orelse, assigned, where
            )
        if isinstance(node, ast.Name) and node.id in assigned:
            return set().union(*(self._codes(module, v, assigned, where) for v in assigned[node.id]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = self.imported.get((module, node.func.id), (module, node.func.id))
            if target in self.functions:
                return self.returned(*target)
        self.unknown.append(f"{where}: return {text}")
        return set()


def _own(node: ast.AST, function: ast.FunctionDef) -> bool:
    """Whether a `return` belongs to `function` itself, not to a function nested in it."""
    for inner in ast.walk(function):
        if inner is not function and isinstance(inner, ast.FunctionDef | ast.Lambda):
            if any(n is node for n in ast.walk(inner)):
                return False
    return True


LEAVES = dict(leaves())


def test_every_code_a_command_returns_is_one_its_help_declares_and_every_declared_one_is_returned() -> None:
    """Read from the handlers' source (`_Codes`): a code no --help mentions is a finding, and so is a
    declared code (besides internal error and usage, which `main` and the parser give every command)
    that its handler never returns."""
    codes = _Codes()
    problems = []
    for name, p in LEAVES.items():
        handler = p.get_default("func")
        returned = codes.returned(handler.__module__, handler.__name__)
        declared = set(declared_exits(name, p))
        if extra := returned - declared - set(exit_codes.EVERY_COMMAND):
            problems.append(f"{name}: returns {sorted(extra)}, not in its --help")
        if unused := declared - returned - set(exit_codes.EVERY_COMMAND):
            problems.append(f"{name}: declares {sorted(unused)}, never returned")
    assert codes.unknown == []
    assert problems == []
    assert len(LEAVES) >= 24


def test_the_reading_of_returned_codes_follows_calls_and_names() -> None:
    """`gates run` returns a code assigned to a name; `validate` one through `print_problems` (common.py);
    `release-status` every decision's through `_print`."""
    codes = _Codes()
    assert codes.returned("eval_assets.cli.gates_commands", "cmd_gates_run") == {
        exit_codes.OK,
        exit_codes.REFUSED,
    }
    assert exit_codes.REFUSED in codes.returned("eval_assets.cli.project_commands", "cmd_validate")
    assert set(exit_codes.DECISION.values()) <= codes.returned(
        "eval_assets.cli.status_commands", "cmd_release_status"
    )


def test_every_leaf_handler_is_a_function_of_the_cli() -> None:
    for name, p in LEAVES.items():
        handler = p.get_default("func")
        assert callable(handler) and handler.__module__.startswith("eval_assets.cli."), name
        assert isinstance(p, argparse.ArgumentParser)
