"""The gate registry: `gates/*.yaml`, one file per spec area (docs/design.md).

A registry file is a mapping with two optional lists, both validated strictly (unknown fields are
errors):

```yaml
gates:                      # hard gates: never retried, never quarantined, never skipped
  - id: config.example-builds-validate
    milestone: 0            # the build milestone from which the gate must run and pass
    kind: corpus            # case | corpus | property | structural
    declared_in: {document: docs/specs/configuration.md, heading: Hard gates}
    statement: Every example build manifest loads against the shipped project.
    check: eval_assets.gates.drivers:each_member
    corpus: examples/builds/*.yaml
    procedure: eval_assets.gates.project_checks.configuration:example_build_validates
    minimum_members: 3
tests:                      # ordinary (non-gate) tests: retried once, may be quarantined
  - id: myagent.answers-in-english
    statement: The agent answers an English question in English.
    check: myagent.checks:answers_in_english
```

Kind-specific gate fields: `property` → `generator`, `predicate` (callable paths) and `min_trials`;
`corpus` → `corpus` (a glob relative to the project root), `procedure` (callable path) and
`minimum_members`; `case` → `case` (a case file, relative to the root) and `expect` (`pass` or
`fail`); `structural` → none. For the kinds with a standard procedure, `check` names the driver that
runs it (`eval_assets.gates.drivers:for_all` / `each_member` / `run_case`); the runner enforces the
kind's floors around whatever driver is named.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from eval_assets.config import ConfigError, Id, Problem, read_yaml, script_problems, validate_model

from ._cases import case_file_problems

GATES_DIR = "gates"
KINDS: tuple[str, ...] = ("case", "corpus", "property", "structural")

CallablePath = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$",
        min_length=3,
    ),
]
"""`package.module:function`."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _relative(value: str) -> str:
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{value!r} must be a path relative to the project root, without '..'")
    return value


class DeclaredIn(_Strict):
    """Where a gate is declared: a spec document (relative to the root) and its heading."""

    document: str = Field(min_length=1)
    heading: str = Field(min_length=1)

    @field_validator("document")
    @classmethod
    def _relative_document(cls, value: str) -> str:
        return _relative(value)

    @property
    def link(self) -> str:
        """`document#heading`, as written to `gate_results.declared_in`."""
        return f"{self.document}#{self.heading}"


class _Common(BaseModel):
    """The fields every gate has, whatever its kind."""

    id: Id
    milestone: Annotated[int, Field(ge=0)]
    declared_in: DeclaredIn
    statement: str = Field(min_length=1)


class _GateFields(_Common):
    model_config = _Strict.model_config
    check: CallablePath


class StructuralGate(_GateFields):
    """Runs without the agent or any model: `check(ctx)` is the whole gate."""

    kind: Literal["structural"]


class PropertyGate(_GateFields):
    """`generator(ctx)` returns a hypothesis strategy; `predicate(value)` must hold for min_trials draws."""

    kind: Literal["property"]
    generator: CallablePath
    predicate: CallablePath
    min_trials: Annotated[int, Field(ge=1)]


class CorpusGate(_GateFields):
    """`procedure(member, ctx)` must accept every member of `corpus`; at least `minimum_members` exist."""

    kind: Literal["corpus"]
    corpus: str = Field(min_length=1)
    procedure: CallablePath
    minimum_members: Annotated[int, Field(ge=1)]

    @field_validator("corpus")
    @classmethod
    def _relative_corpus(cls, value: str) -> str:
        return _relative(value)


class CaseGate(_GateFields):
    """Runs the case file `case` deterministically; its outcome must equal `expect` (`error`: the case
    must refuse to run, e.g. an exhausted model script)."""

    kind: Literal["case"]
    case: str = Field(min_length=1)
    expect: Literal["pass", "fail", "error"]
    error_matches: str | None = Field(
        default=None, description="with `expect: error` (and only then): a regex the error's message must match"
    )

    @model_validator(mode="after")
    def _error_named(self) -> CaseGate:
        if (self.expect == "error") != (self.error_matches is not None):
            raise ValueError("error_matches: give it exactly when expect is error (the error the case must raise)")
        if self.error_matches is not None:
            try:
                re.compile(self.error_matches)
            except re.error as exc:
                raise ValueError(f"error_matches: not a regular expression: {exc}") from None
        return self

    @field_validator("case")
    @classmethod
    def _relative_case(cls, value: str) -> str:
        return _relative(value)


Gate = StructuralGate | PropertyGate | CorpusGate | CaseGate
GATE_MODELS: Mapping[str, type[_GateFields]] = {
    "structural": StructuralGate,
    "property": PropertyGate,
    "corpus": CorpusGate,
    "case": CaseGate,
}


class SuiteTest(_Strict):
    """An ordinary (non-gate) test: `check(ctx)` like a structural gate, but retried once and quarantinable."""

    __test__ = False  # not a pytest class

    id: Id
    statement: str = Field(min_length=1)
    check: CallablePath
    milestone: Annotated[int, Field(ge=0)] = 0


class _LenientCommon(_Common):
    """The common fields alone, for reporting them when the kind itself is missing or unknown."""

    model_config = ConfigDict(extra="ignore")
    check: CallablePath


class _RegistryFile(_Strict):
    gates: list[Any] = Field(default_factory=list)
    tests: list[Any] = Field(default_factory=list)


@dataclass(frozen=True)
class InvalidEntry:
    """A registry entry that failed validation; the runner reports it as an `error` row.

    `id` is the declared id when there is one and it is not a duplicate, else `<file>#<section>.<n>`.
    """

    id: str
    section: Literal["gates", "tests"]
    source: str
    kind: str | None
    milestone: int | None
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Registry:
    """Every valid gate and test, the entries that failed validation, and all problems found.

    `problems` is empty exactly when the registry is valid (`load_registry` would not raise).
    Gates and tests keep file order (files sorted by name). `sources` maps each id to its file.
    """

    root: Path
    gates: tuple[Gate, ...] = ()
    tests: tuple[SuiteTest, ...] = ()
    invalid: tuple[InvalidEntry, ...] = ()
    problems: tuple[Problem, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    def gate(self, gate_id: str) -> Gate:
        """The gate with this id; KeyError if there is none."""
        for gate in self.gates:
            if gate.id == gate_id:
                return gate
        raise KeyError(gate_id)


class CallableImportError(Exception):
    """A `module:function` path that does not resolve to a callable; the message says why."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path!r} does not import: {reason}")


_WIRING_PACKAGES = ("eval_assets.defs", "eval_assets.cli", "eval_assets.definitions")


def resolve_callable(path: str) -> Callable[..., Any]:
    """Import `module:function` and return the callable. Raises CallableImportError naming the path.

    Any exception raised while importing the module counts as "does not import".
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise CallableImportError(path, "expected 'package.module:function'")
    if module_name.split(".")[0].startswith("dagster") or module_name.startswith(_WIRING_PACKAGES):
        raise CallableImportError(path, "the gate registry never imports Dagster or the Dagster wiring")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise CallableImportError(path, f"{type(exc).__name__}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CallableImportError(path, f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise CallableImportError(path, f"{attr!r} is not callable")
    return target  # type: ignore[no-any-return]


def callable_paths(gate: Gate | SuiteTest) -> dict[str, str]:
    """Field name → callable path for every callable the entry names (check, generator, ...)."""
    out = {"check": gate.check}
    if isinstance(gate, PropertyGate):
        out |= {"generator": gate.generator, "predicate": gate.predicate}
    elif isinstance(gate, CorpusGate):
        out["procedure"] = gate.procedure
    return out


def _registry_files(root: Path) -> list[Path]:
    directory = root / GATES_DIR
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in {".yaml", ".yml"})


def _prefixed(problems: list[Problem], loc: str) -> list[Problem]:
    return [Problem(p.path, loc if p.field == "<root>" else f"{loc}.{p.field}", p.message) for p in problems]


def _validate_gate(data: Any, shown: str, loc: str) -> tuple[Gate | None, list[Problem]]:
    if not isinstance(data, dict):
        return None, [Problem(shown, loc, f"expected a mapping, got {type(data).__name__}")]
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in GATE_MODELS:
        if kind is None:
            head = Problem(shown, f"{loc}.kind", "required field is missing")
        else:
            head = Problem(shown, f"{loc}.kind", f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
        _, rest = validate_model(_LenientCommon, data, shown)
        return None, [head, *_prefixed(rest, loc)]
    gate, problems = validate_model(GATE_MODELS[kind], data, shown)
    return gate, _prefixed(problems, loc)  # type: ignore[return-value]


def _validate_test(data: Any, shown: str, loc: str) -> tuple[SuiteTest | None, list[Problem]]:
    if not isinstance(data, dict):
        return None, [Problem(shown, loc, f"expected a mapping, got {type(data).__name__}")]
    test, problems = validate_model(SuiteTest, data, shown)
    return test, _prefixed(problems, loc)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_registry(root: Path, *, check_imports: bool = True) -> Registry:
    """Read and validate every `gates/*.yaml` under `root`. Never raises for bad content.

    Problems (each `path: field: message`, path relative to `root`): malformed YAML, missing fields,
    unknown fields, an unknown kind, a duplicate id (across files, gates and tests together), a case
    file that is missing or invalid (a model script it names included), an invalid model script under
    `gates/fixtures/models/`, and — with `check_imports` — a check, generator, predicate or
    procedure that does not import (named, with the import error). An entry that fails validation
    is listed in `invalid`; a valid entry whose callable does not import stays in `gates`/`tests`
    (the runner reports it as `error`).
    """
    root = root.resolve()
    problems: list[Problem] = []
    gates: list[Gate] = []
    tests: list[SuiteTest] = []
    invalid: list[InvalidEntry] = []
    sources: dict[str, str] = {}

    for path in _registry_files(root):
        shown = str(path.relative_to(root))
        data, found = read_yaml(path, shown)
        if not found:
            _, found = validate_model(_RegistryFile, data, shown)
        if found:
            problems += found
            continue
        assert isinstance(data, dict)
        for section in ("gates", "tests"):
            entries = data.get(section) or []
            for index, entry in enumerate(entries):
                loc = f"{section}.{index}"
                obj: Gate | SuiteTest | None
                if section == "gates":
                    obj, found = _validate_gate(entry, shown, loc)
                else:
                    obj, found = _validate_test(entry, shown, loc)
                declared = entry.get("id") if isinstance(entry, dict) else None
                if obj is not None and obj.id in sources:
                    found = [
                        Problem(shown, f"{loc}.id", f"duplicate id {obj.id!r} (also in {sources[obj.id]})")
                    ]
                    declared = None
                if found or obj is None:
                    problems += found
                    good_id = isinstance(declared, str) and declared and declared not in sources
                    invalid.append(
                        InvalidEntry(
                            id=str(declared) if good_id else f"{shown}#{loc}",
                            section=section,  # type: ignore[arg-type]
                            source=shown,
                            kind=entry.get("kind")
                            if isinstance(entry, dict) and section == "gates"
                            else None,
                            milestone=_int_or_none(entry.get("milestone"))
                            if isinstance(entry, dict)
                            else None,
                            problems=tuple(found),
                        )
                    )
                    if good_id:
                        sources[str(declared)] = shown
                    continue
                sources[obj.id] = shown
                if isinstance(obj, SuiteTest):
                    tests.append(obj)
                else:
                    gates.append(obj)
                    if isinstance(obj, CaseGate):
                        problems += [
                            Problem(shown, f"{loc}.case", msg) for msg in case_file_problems(root, obj.case)
                        ]
                if check_imports:
                    for name, target in callable_paths(obj).items():
                        try:
                            resolve_callable(target)
                        except CallableImportError as exc:
                            problems.append(Problem(shown, f"{loc}.{name}", str(exc)))
    problems += script_problems(root)  # every model script, named by a case or not
    return Registry(root, tuple(gates), tuple(tests), tuple(invalid), tuple(problems), sources)


def load_registry(root: Path, *, check_imports: bool = True) -> Registry:
    """`read_registry`, raising ConfigError listing every problem when the registry is not valid."""
    registry = read_registry(root, check_imports=check_imports)
    if registry.problems:
        raise ConfigError(registry.problems)
    return registry
