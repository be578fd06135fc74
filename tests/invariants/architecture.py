"""Checks of docs/specs/architecture.md: boundaries checked by walking the source (AST), run by the
test command (tests/test_own_invariants.py).

These checks parse the files they inspect; `domain_never_imports_dagster` also imports each domain
module, in a separate interpreter, and looks at its sys.modules.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from eval_assets.gates import GateContext, Outcome
from eval_assets.gates.project_checks.tree import project_files

from .ast_walk import dotted, parsed, python_files

PACKAGE = "eval_assets"
# The Dagster wiring layer and the modules that drive Dagster: everything else is the domain.
WIRING = (
    "eval_assets/defs",
    "eval_assets/definitions.py",
    "eval_assets/cli",
    "eval_assets/orchestrate.py",
)
ORCHESTRATOR = "dagster"
PARTITION_WRITER = "eval_assets/warehouse/_writer.py"
PARQUET_WRITERS = frozenset(
    {"to_parquet", "write_parquet", "write_table", "write_to_dataset", "write_dataset", "sink_parquet"}
)
PARQUET_WRITER_CLASSES = frozenset({"ParquetWriter"})
# `COPY <query> TO <file>`: DuckDB's (and PostgreSQL's) bulk export; the file may be a hole `{}` (a
# part the walk cannot know). Written with a character class so this module's own text never matches.
_COPY_TO = re.compile(r"\bC[O]PY\b[\s\S]*\bTO\b\s*['\"({?$]", re.IGNORECASE)
# any statement asking for Parquet output: a COPY ... TO with the FORMAT option naming Parquet, and the like
_FORMAT_PARQUET = re.compile(r"\bF[O]RMAT\s*[\s(=]\s*['\"]?PARQUET\b", re.IGNORECASE)
# Modules whose dynamic import (a name only known at run time) refuses Dagster and the wiring itself
# (gates/_registry.py's resolve_callable and agent_worker.py's load_entrypoint, an agent's own code, each
# pinned by a test); anywhere else in the domain it is a finding.
GUARDED_DYNAMIC_IMPORTS = frozenset({"eval_assets/gates/_registry.py", "eval_assets/agent_worker.py"})


def _imports_orchestrator(name: str) -> bool:
    return name == ORCHESTRATOR or name.startswith((ORCHESTRATOR + ".", ORCHESTRATOR + "_"))


def _wiring_modules() -> tuple[str, ...]:
    return tuple(w.removesuffix(".py").replace("/", ".") for w in WIRING)


def _imports_wiring(name: str) -> bool:
    return any(name == w or name.startswith(w + ".") for w in _wiring_modules())


def _imported_names(node: ast.AST, module_name: str) -> list[str]:
    """Absolute names a node imports: `import a`, `from a import b` (relative ones resolved against
    `module_name`, each imported name too, since it may be a submodule), import_module/__import__
    with a constant."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = module_name.split(".")
            base = ".".join(parts[: len(parts) - node.level])
            head = f"{base}.{node.module}" if node.module else base
        else:
            head = node.module or ""
        return [head, *(f"{head}.{a.name}" for a in node.names if a.name != "*")]
    if (
        isinstance(node, ast.Call)
        and dotted(node.func).split(".")[-1] in ("import_module", "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def _dynamic_import(node: ast.AST) -> bool:
    """Whether `node` is an import_module/__import__ call whose module name is not a constant."""
    return (
        isinstance(node, ast.Call)
        and dotted(node.func).split(".")[-1] in ("import_module", "__import__")
        and not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))
    )


def _module_name(shown: str) -> str:
    name = shown.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


# Run by a fresh interpreter: import the named modules one by one; after each, report whether the
# orchestrator is in sys.modules. Stops at the first module that brings it in (the caller starts a
# new interpreter for the rest), so every finding is a module imported with only clean ones before it.
_PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
prefix = sys.argv[2]
for name in sys.argv[3:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(json.dumps([name, "error", f"{type(exc).__name__}: {exc}"]), flush=True)
        continue
    found = sorted(m for m in sys.modules if m == prefix or m.startswith((prefix + ".", prefix + "_")))
    if found:
        print(json.dumps([name, "imports", found[:3]]), flush=True)
        break
    print(json.dumps([name, "clean", []]), flush=True)
"""


def _module_names(root: Path, files: Sequence[Path]) -> list[str]:
    """The dotted module names of `files` (paths under `root`), in their order."""
    return [_module_name(str(path.relative_to(root))) for path in files]


def _runtime_findings(root: Path, modules: list[str]) -> list[str]:
    """Import every module in a fresh interpreter (the project under `root` first on sys.path) and
    name each one after whose import Dagster is in sys.modules: that catches Dagster reached through
    any chain of imports, e.g. a wiring module a domain module imports. An import that fails is a
    finding too (fail closed: the module could not be checked)."""
    return _probe(root.resolve(), modules)


def fresh_interpreter(code: str, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -c code *args` in a new interpreter of this environment, in `cwd`, without PYTHONPATH
    (the code puts the package it means first on its sys.path), output captured as text."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600, check=False
    )


def _probe(root: Path, modules: list[str]) -> list[str]:
    findings: list[str] = []
    pending = list(modules)
    while pending:
        proc = fresh_interpreter(_PROBE, [str(root), ORCHESTRATOR, *pending], root)
        done = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
        if not done:
            detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            findings.append(f"{pending[0]}: the import probe failed: {detail}")
            pending = pending[1:]
            continue
        for name, state, detail in done:
            if state == "imports":
                findings.append(f"{name}: importing it loads {', '.join(detail)}")
            elif state == "error":
                findings.append(f"{name}: could not be imported to check it: {detail}")
        pending = pending[len(done) :]
    return findings


def domain_never_imports_dagster(ctx: GateContext) -> Outcome:
    """No module of the domain (eval_assets minus the wiring: defs/, definitions.py, cli.py,
    orchestrate.py) imports Dagster or a dagster_* package, nor a wiring module, anywhere in its
    source (statically, inside a function, or via import_module/__import__); and importing each
    domain module in a fresh interpreter leaves Dagster out of sys.modules."""
    files = python_files(ctx.root, PACKAGE, WIRING)
    if not files:
        return Outcome.failed(f"no Python files found under {PACKAGE}/: the walk would prove nothing")
    findings: list[str] = []
    for shown, module in parsed(files, ctx.root):
        findings += _orchestrator_imports(shown, module)
    findings = sorted(set(findings)) + _runtime_findings(ctx.root, _module_names(ctx.root, files))
    if findings:
        return Outcome.failed(f"{len(findings)} import(s) of {ORCHESTRATOR} in the domain", findings)
    return Outcome.ok(
        f"{len(files)} domain module(s): none imports {ORCHESTRATOR} or the wiring, and importing each "
        f"leaves {ORCHESTRATOR} out of sys.modules"
    )


_HOLE = "{}"  # stands for a part of a string whose value the walk cannot know


# The per-file walks below are kept per parsed tree (`_ast.parsed` hands out the same tree for the
# same text): the suite runs once per build in one process over the same files, and walking every
# module again cost ~1.5 s of CPU per build.


@lru_cache(maxsize=4096)
def _orchestrator_imports(shown: str, module: ast.Module) -> tuple[str, ...]:
    """domain_never_imports_dagster's findings in one file (`shown`, its path relative to the root)."""
    name = _module_name(shown)
    names = _string_assignments(module)
    findings = []
    for node in ast.walk(module):
        line = getattr(node, "lineno", 0)
        if _dynamic_import(node) and shown not in GUARDED_DYNAMIC_IMPORTS:
            assert isinstance(node, ast.Call)
            known = _text(node.args[0], names) if node.args else None
            if known is None or _HOLE in known:
                findings.append(f"{shown}:{line} imports a module by a name only known at run time")
            elif _imports_orchestrator(known) or _imports_wiring(known):
                findings.append(f"{shown}:{line} imports {known}")
            continue
        for imported in _imported_names(node, name):  # one finding per statement
            if _imports_orchestrator(imported):
                findings.append(f"{shown}:{line} imports {imported}")
                break
            if _imports_wiring(imported):
                findings.append(f"{shown}:{line} imports the wiring module {imported}")
                break
    return tuple(findings)


def _string_assignments(module: ast.Module) -> dict[str, ast.expr]:
    """`name = <string expression>` anywhere in the module (last one wins): enough to follow a
    statement built in steps (`head = "..."; sql = head + "..."`)."""
    out: dict[str, ast.expr] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _text(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> str | None:
    """The text a string expression evaluates to, with `{}` for unknown parts; None if it is not
    string-like. Follows `+` concatenation, f-strings, `"".join([...])` and names assigned in the module."""
    if depth > 20:
        return _HOLE
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v, names, depth + 1) or _HOLE for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _text(node.value, names, depth + 1) or _HOLE
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, names, depth + 1), _text(node.right, names, depth + 1)
        if left is None and right is None:
            return None
        return (left or _HOLE) + (right or _HOLE)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = _text(node.func.value, names, depth + 1) or ""
        return sep.join(_text(e, names, depth + 1) or _HOLE for e in node.args[0].elts)
    if isinstance(node, ast.Name) and node.id in names:
        return _text(names[node.id], names, depth + 1) or _HOLE
    return None


def one_partition_writer(ctx: GateContext) -> Outcome:
    """No module other than eval_assets/warehouse/_writer.py writes Parquet (to_parquet, write_parquet,
    pyarrow write_table/write_to_dataset/write_dataset called as a method, by name, imported from a
    module under any alias; a pyarrow ParquetWriter) or issues a `COPY ... TO` statement or asks for
    Parquet output (the FORMAT option), even in a statement put together from parts (`+`, f-strings, join, names)."""
    files = python_files(ctx.root, PACKAGE, (PARTITION_WRITER,))
    if not files:
        return Outcome.failed(f"no Python files found under {PACKAGE}/: the walk would prove nothing")
    findings: list[str] = []
    for shown, module in parsed(files, ctx.root):
        findings += _parquet_writes(shown, module)
    if findings:
        return Outcome.failed(f"{len(findings)} write(s) outside {PARTITION_WRITER}", sorted(set(findings)))
    return Outcome.ok(f"{len(files)} module(s) checked; only {PARTITION_WRITER} writes Parquet")


@lru_cache(maxsize=4096)
def _parquet_writes(shown: str, module: ast.Module) -> tuple[str, ...]:
    """one_partition_writer's findings in one file."""
    findings = []
    names = _string_assignments(module)
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in PARQUET_WRITERS:
                findings.append(f"{shown}:{node.lineno} calls .{node.func.attr}()")
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PARQUET_WRITERS
        ):
            findings.append(f"{shown}:{node.lineno} calls {node.func.id}()")
        if isinstance(node, ast.ImportFrom):  # `from pyarrow.parquet import write_table [as w]`
            for alias in node.names:
                if alias.name in PARQUET_WRITERS:
                    findings.append(f"{shown}:{node.lineno} imports {alias.name} from {node.module}")
        last = dotted(node).split(".")[-1] if isinstance(node, ast.Name | ast.Attribute) else ""
        if last in PARQUET_WRITER_CLASSES:
            findings.append(f"{shown}:{getattr(node, 'lineno', 0)} uses {last}")
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in PARQUET_WRITER_CLASSES:
            findings.append(f"{shown}:{getattr(node, 'lineno', 0)} imports {node.name}")
        elif isinstance(node, ast.expr) and not isinstance(node, ast.Name):
            text = _text(node, names)
            if text is not None and _COPY_TO.search(text):
                findings.append(f"{shown}:{node.lineno} has a COPY ... TO statement")
            elif text is not None and _FORMAT_PARQUET.search(text):
                findings.append(f"{shown}:{node.lineno} asks for Parquet output (the FORMAT option)")
    return tuple(findings)


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


# --- the import graph ----------------------------------------------------------------------------

# The floors are the design's table (docs/design.md, "| floor | rooms | what they hold |"), top floor
# first: the gate reads it there, so the table and the check cannot drift apart.
DESIGN = "docs/design.md"
_FLOORS_HEAD = re.compile(r"^\|\s*floor\s*\|\s*rooms\s*\|")
_ROOM = re.compile(r"`([A-Za-z0-9_./]+)`")

# Imports within one floor that would tie a lower room to a higher one, each a former tie of the
# import circle: (importer, imported, why). A module matches a name when it is that module or inside
# that package. An import up the floors needs no entry here: the floors forbid it.
FORBIDDEN_EDGES: tuple[tuple[str, str, str], ...] = (
    ("eval_assets.config", "eval_assets.providers.gateway", "the loader checks providers by name only"),
    ("eval_assets.config._registry", "eval_assets.config._loader", "the registry is read by the loader"),
    ("eval_assets.providers", "eval_assets.config", "providers import only leaves"),
    ("eval_assets.spend", "eval_assets.engine", "attempt identity lives in spend._keys"),
    ("eval_assets.engine", "eval_assets.trajectory", "the runtime Replay lives in the engine"),
    ("eval_assets.trajectory", "eval_assets.gates", "the raw-log rule lives in the domain"),
)
# Who else may only use public faces: these trees import the package, none is inside it.
FACE_USERS = ("tests", "benchmarks")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _private_package(module: str) -> str | None:
    """The package a private module belongs to (`a.b._c.d` -> `a.b`), or None for a public module."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every `.py` file under `root/package` (a package is its __init__)."""
    return {_module_name(str(p.relative_to(root))): p for p in python_files(root, package)}


def _import_edges(root: Path, files: list[Path], known: Mapping[str, Path]) -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import of a module in `known`, function-local and
    type-checking imports included. `from a import b` names the module a.b when there is one, else a;
    a parent package's __init__, which Python runs first, is not an edge (it is the package's face)."""
    edges = []
    for shown, module in parsed(files, root):
        for imported, from_import, line in _file_imports(shown, module):
            target = imported if imported in known else None
            if target is None and from_import and imported.rpartition(".")[0] in known:
                continue  # `from pkg import name`: the name is not a module; the head is counted
            if target is not None:
                edges.append((_module_name(shown), target, line))
    return sorted(set(edges))


@lru_cache(maxsize=8192)
def _file_imports(shown: str, module: ast.Module) -> tuple[tuple[str, bool, int], ...]:
    """(imported name, whether by `from ... import`, line) of every import in one file."""
    name = _module_name(shown)
    if shown.endswith("__init__.py"):
        name = f"{name}.__init__"  # relative imports resolve against the package itself
    return tuple(
        (imported, isinstance(node, ast.ImportFrom), getattr(node, "lineno", 0))
        for node in ast.walk(module)
        for imported in _imported_names(node, name)
    )


def _cycles(edges: Iterable[tuple[str, str, int]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (or a module importing itself),
    each as a sorted list: Tarjan's algorithm, iterative."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    out.append(sorted(component))
    return sorted(out)


def floors(root: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The design's floors table: (floor, its rooms as written: `release.py`, `gates/project_checks/`), top
    floor first; [] when the table is not there."""
    path = root / DESIGN
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    start = next((i for i, line in enumerate(lines) if _FLOORS_HEAD.match(line)), None)
    if start is None:
        return []
    table = []
    for line in lines[start + 2 :]:  # past the head and its `| --- |` rule
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2:
            break
        table.append((cells[0], tuple(_ROOM.findall(cells[1]))))
    return table


def _room_module(room: str) -> str:
    """`release.py` -> eval_assets.release, `gates/project_checks/` -> eval_assets.gates.project_checks."""
    return ".".join([PACKAGE, *room.removesuffix("/").removesuffix(".py").split("/")])


def floor_of(module: str, table: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[int, str] | None:
    """(floor index, top floor 0; room) of a module: the room naming the longest part of its name;
    None on no floor. The package's own (empty) face is on every floor."""
    best: tuple[int, str, int] | None = None
    for index, (_, rooms) in enumerate(table):
        for room in rooms:
            name = _room_module(room)
            if _within(module, name) and (best is None or len(name) > best[2]):
                best = (index, room, len(name))
    return None if best is None else (best[0], best[1])


def _floor_findings(
    known: Mapping[str, Path], edges: Iterable[tuple[str, str, int]], root: Path
) -> list[str]:
    """A room on no floor, a floor's room that names no module, and every import up the floors."""
    table = floors(root)
    if not table:
        return [
            f"{DESIGN}: no floors table ('| floor | rooms | what they hold |'): the floors cannot be checked"
        ]
    findings = []
    rooms = {room for _, named in table for room in named}
    modules = [m for m in known if m != PACKAGE]
    findings += sorted(
        f"{DESIGN}: room `{room}` names no module"
        for room in rooms
        if not any(_within(m, _room_module(room)) for m in modules)
    )
    unplaced = sorted({m for m in modules if floor_of(m, table) is None})
    findings += [f"{m}: on no floor of {DESIGN}'s table: add its room to a floor" for m in unplaced]
    for importer, imported, line in edges:
        low, high = floor_of(importer, table), floor_of(imported, table)
        if imported != PACKAGE and low is not None and high is not None and high[0] < low[0]:
            findings.append(
                f"{importer}:{line} imports {imported}: up the floors ({low[1]} on {table[low[0]][0]} "
                f"-> {high[1]} on {table[high[0]][0]})"
            )
    return findings


def import_graph(ctx: GateContext) -> Outcome:
    """The import graph of eval_assets/ (read from the source, nothing imported) has no cycle; every
    module is in a room of the design's floors table and no import runs up the floors; no module
    imports a `_private` module of a package it is not inside (tests/ and benchmarks/ are inside
    none: they use the faces); and no import runs along a FORBIDDEN_EDGES pair."""
    known = _modules(ctx.root, PACKAGE)
    if not known:
        return Outcome.failed(f"no Python files found under {PACKAGE}/: the walk would prove nothing")
    edges = _import_edges(ctx.root, sorted(known.values()), known)
    findings = _floor_findings(known, edges, ctx.root)
    for component in _cycles(edges):
        ties = sorted({f"{a} -> {b}" for a, b, _ in edges if a in component and b in component})
        findings.append(f"import cycle of {len(component)} module(s): {'; '.join(ties)}")
    outside = [p for tree in FACE_USERS if (ctx.root / tree).is_dir() for p in python_files(ctx.root, tree)]
    for importer, imported, line in edges + _import_edges(ctx.root, outside, known):
        package = _private_package(imported)
        if package is not None and not _within(importer, package):
            findings.append(f"{importer}:{line} imports {imported}, private to {package}: use its face")
        for low_floor, high_floor, why in FORBIDDEN_EDGES:
            if _within(importer, low_floor) and _within(imported, high_floor):
                findings.append(f"{importer}:{line} imports {imported}: forbidden ({why})")
    if findings:
        return Outcome.failed(f"{len(findings)} import-graph finding(s)", findings)
    return Outcome.ok(
        f"{len(known)} module(s), {len(edges)} import(s): no cycle, none up the floors of {DESIGN}, no "
        f"private import across a package boundary, none of {len(FORBIDDEN_EDGES)} forbidden edges"
    )


# A merge left unresolved: git's `<<<<<<< ours`, `||||||| base` (diff3) and `>>>>>>> theirs` lines.
# `=======` alone is not looked for: it is also a Markdown heading underline.
_CONFLICT = re.compile(r"^(?:<{7}|\|{7}|>{7})(?: |$)", re.MULTILINE)


def no_merge_conflict_markers(ctx: GateContext) -> Outcome:
    """No tracked text file holds a merge-conflict marker line (`<<<<<<< `, `||||||| `, `>>>>>>> `)."""
    files, listed = project_files(ctx.root)
    findings, scanned = [], 0
    for path in files:
        if not path.is_file():
            continue  # deleted in the work tree
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (a PNG, a Parquet fixture)
        scanned += 1
        text = data.decode("utf-8", errors="replace")
        findings += [
            f"{path.relative_to(ctx.root)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()} (merge conflict)"
            for m in _CONFLICT.finditer(text)
        ]
    if scanned == 0:
        return Outcome.failed("no tracked text file found: the scan would prove nothing")
    if findings:
        return Outcome.failed(f"{len(findings)} merge-conflict marker line(s) in {listed} files", findings)
    return Outcome.ok(f"{scanned} text file(s) scanned ({listed}), no merge-conflict marker")
