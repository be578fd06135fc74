"""Structural gates of docs/specs/architecture.md: boundaries checked by walking the source (AST).

These checks import nothing they inspect: they parse files. This module is the one place in the
domain that mentions Dagster, and only as a name to look for.
"""

from __future__ import annotations

import ast
import re

from eval_assets.gates._outcome import GateContext, Outcome

from ._ast import dotted, parsed, python_files

PACKAGE = "eval_assets"
# The Dagster wiring layer and the modules that drive Dagster: everything else is the domain.
WIRING = (
    "eval_assets/defs",
    "eval_assets/definitions.py",
    "eval_assets/cli.py",
    "eval_assets/orchestrate.py",
)
ORCHESTRATOR = "dagster"
PARTITION_WRITER = "eval_assets/warehouse.py"
PARQUET_WRITERS = frozenset(
    {"to_parquet", "write_parquet", "write_table", "write_to_dataset", "write_dataset"}
)
# `COPY <query> TO <file>`: DuckDB's (and PostgreSQL's) bulk export. Built from parts so that this
# module's own constants never match it.
_COPY_TO = re.compile(r"\b" + "CO" + r"PY\b[\s\S]*\bTO\b\s*['\"(]", re.IGNORECASE)


def _imports_orchestrator(name: str) -> bool:
    return name == ORCHESTRATOR or name.startswith((ORCHESTRATOR + ".", ORCHESTRATOR + "_"))


def domain_never_imports_dagster(ctx: GateContext) -> Outcome:
    """No module of the domain (eval_assets minus the wiring: defs/, definitions.py, cli.py,
    orchestrate.py) imports Dagster or a dagster_* package, statically or via import_module/__import__."""
    files = python_files(ctx.root, PACKAGE, WIRING)
    if not files:
        return Outcome.failed(f"no Python files found under {PACKAGE}/: the walk would prove nothing")
    findings = []
    for shown, module in parsed(files, ctx.root):
        for node in ast.walk(module):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and dotted(node.func).split(".")[-1] in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            line = getattr(node, "lineno", 0)
            findings += [f"{shown}:{line} imports {n}" for n in names if _imports_orchestrator(n)]
    if findings:
        return Outcome.failed(f"{len(findings)} import(s) of {ORCHESTRATOR} in the domain", findings)
    return Outcome.ok(f"{len(files)} domain module(s), none imports {ORCHESTRATOR}")


def _joined_text(node: ast.JoinedStr) -> str:
    return "".join(
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}" for v in node.values
    )


def one_partition_writer(ctx: GateContext) -> Outcome:
    """No module other than eval_assets/warehouse.py writes Parquet (to_parquet, write_parquet,
    pyarrow write_table/write_to_dataset/write_dataset) or issues a `COPY ... TO` statement."""
    files = python_files(ctx.root, PACKAGE, (PARTITION_WRITER,))
    if not files:
        return Outcome.failed(f"no Python files found under {PACKAGE}/: the walk would prove nothing")
    findings = []
    for shown, module in parsed(files, ctx.root):
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in PARQUET_WRITERS:
                    findings.append(f"{shown}:{node.lineno} calls .{node.func.attr}()")
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and _COPY_TO.search(node.value)
            ):
                findings.append(f"{shown}:{node.lineno} has a COPY ... TO statement")
            elif isinstance(node, ast.JoinedStr) and _COPY_TO.search(_joined_text(node)):
                findings.append(f"{shown}:{node.lineno} has a COPY ... TO statement")
    if findings:
        return Outcome.failed(f"{len(findings)} write(s) outside {PARTITION_WRITER}", sorted(set(findings)))
    return Outcome.ok(f"{len(files)} module(s) checked; only {PARTITION_WRITER} writes Parquet")


def _is_asset_decorator(node: ast.expr) -> tuple[bool, ast.Call | None]:
    target = node.func if isinstance(node, ast.Call) else node
    name = dotted(target).split(".")[-1]
    return name == "asset", node if isinstance(node, ast.Call) else None


def _has_description(call: ast.Call | None) -> bool:
    if call is None:
        return False
    for kw in call.keywords:
        if kw.arg == "description":
            return not (isinstance(kw.value, ast.Constant) and not kw.value.value)
    return False


def assets_have_descriptions(ctx: GateContext) -> Outcome:
    """Every `@asset` function under eval_assets/defs has a description (the `description=` argument
    or a docstring), and so does every `AssetSpec(...)`: the UI shows it to the release engineer."""
    files = python_files(ctx.root, f"{PACKAGE}/defs")
    findings, seen = [], 0
    for shown, module in parsed(files, ctx.root):
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    is_asset, call = _is_asset_decorator(decorator)
                    if not is_asset:
                        continue
                    seen += 1
                    if not _has_description(call) and not ast.get_docstring(node):
                        findings.append(f"{shown}:{node.lineno} asset {node.name} has no description")
            elif isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == "AssetSpec":
                seen += 1
                if not _has_description(node):
                    findings.append(f"{shown}:{node.lineno} AssetSpec without a description")
    if seen == 0:
        return Outcome.failed(f"no assets found under {PACKAGE}/defs: the check would prove nothing")
    if findings:
        return Outcome.failed(f"{len(findings)} of {seen} asset(s) without a description", findings)
    return Outcome.ok(f"all {seen} asset(s) have a description")
