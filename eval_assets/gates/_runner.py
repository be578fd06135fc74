"""The suite runner: every gate for a build's milestone, converted cases, and the ordinary tests.

Statuses (`gate_results.status`):

- `pending` — the gate's milestone is later than the build's; it does not run and does not block;
- `pass` / `fail` — the gate ran; a skip, a corpus below `minimum_members`, a property with fewer
  trials than `min_trials`, and a case whose outcome differs from `expect` are failures;
- `error` — the gate could not run: its check (or generator, predicate, procedure) does not import,
  its entry is invalid (e.g. no check), or the check raised. Blocks like a failure;
- `awaiting_assertions` — a converted case (`source: trajectory`) nobody has written assertions for
  yet: listed, never run, never blocking.

Gates run once: never retried, never quarantined. Ordinary tests are retried once and may be
quarantined (`_quarantine`). Gates and tests run in registry order, one at a time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eval_assets.config import ConfigError, Project, load_project

from ._cases import LoadedCase, case_outcome, converted_cases, load_case
from ._outcome import SKIP_TYPES, Clock, GateContext, GateFailed, Outcome, utc_now
from ._quarantine import (
    MemoryQuarantineStore,
    QuarantineStore,
    TestRecord,
    TryStatus,
    quarantine_at,
)
from ._registry import (
    CallableImportError,
    CaseGate,
    CorpusGate,
    Gate,
    InvalidEntry,
    PropertyGate,
    Registry,
    SuiteTest,
    resolve_callable,
)
from ._results import GateResult, Status, SuiteResult

if TYPE_CHECKING:
    from eval_assets.config import Subject

CONVERTED_GLOB = "scenarios/**/*.yaml"


@dataclass
class _Suite:
    root: Path
    build: str | None
    milestone: int
    subject: Subject | None
    clock: Clock
    extra_scan_paths: tuple[Path, ...]
    hooks: Mapping[str, Callable[..., Any]]
    _project: Project | ConfigError | None = None

    def project(self) -> Project:
        if self._project is None:
            try:
                self._project = load_project(self.root)
            except ConfigError as exc:
                self._project = exc
        if isinstance(self._project, ConfigError):
            raise self._project
        return self._project

    def context(self, gate_id: str, kind: str, **kind_fields: Any) -> GateContext:
        return GateContext(
            root=self.root,
            gate_id=gate_id,
            kind=kind,
            build=self.build,
            milestone=self.milestone,
            subject=self.subject,
            clock=self.clock,
            extra_scan_paths=self.extra_scan_paths,
            hooks=self.hooks,
            project_loader=self.project,
            **kind_fields,
        )


def _interpret(returned: Any) -> Outcome:
    """A check's return value as an Outcome (see `_outcome`); a returned Skip becomes a failure."""
    if returned is None:
        return Outcome.ok()
    if isinstance(returned, Outcome):
        return returned
    if isinstance(returned, SKIP_TYPES):
        return Outcome.failed(f"skipped at or past its milestone: {returned}")
    if isinstance(returned, str | bytes) or not isinstance(returned, Sequence):
        raise TypeError(
            f"a check returns None, an Outcome or a list of findings, not {type(returned).__name__}"
        )
    findings = [str(f) for f in returned]
    if findings:
        return Outcome.failed(f"{len(findings)} finding(s)", findings)
    return Outcome.ok()


def _call_check(
    check: Callable[..., Any], ctx: GateContext
) -> tuple[Literal["pass", "fail", "error"], Outcome]:
    """Call a check and classify: pass/fail from its outcome, skip → fail, raise → error."""
    try:
        outcome = _interpret(check(ctx))
    except SKIP_TYPES as exc:
        return "fail", Outcome.failed(f"skipped at or past its milestone: {exc}")
    except GateFailed as exc:
        return "fail", Outcome.failed(str(exc))
    except Exception as exc:
        return "error", Outcome.failed(f"check raised {type(exc).__name__}: {exc}")
    return ("pass" if outcome.passed else "fail"), outcome


def _declared(gate: Gate) -> str:
    return gate.declared_in.link


def _result(gate: Gate, status: Status, started: float, outcome: Outcome | str, **extra: Any) -> GateResult:
    if isinstance(outcome, str):
        outcome = Outcome(status == "pass", outcome)
    return GateResult(
        gate_id=gate.id,
        kind=gate.kind,
        milestone=gate.milestone,
        status=status,
        duration_s=time.perf_counter() - started,
        message=outcome.message or status,
        declared_in=_declared(gate),
        findings=outcome.findings,
        **extra,
    )


def _run_gate(gate: Gate, suite: _Suite) -> GateResult:
    started = time.perf_counter()
    if gate.milestone > suite.milestone:
        return _result(
            gate, "pending", started, f"pending until milestone {gate.milestone} (build: {suite.milestone})"
        )
    try:
        check = resolve_callable(gate.check)
        fields: dict[str, Any] = {}
        if isinstance(gate, PropertyGate):
            fields = {
                "generator": resolve_callable(gate.generator),
                "predicate": resolve_callable(gate.predicate),
                "min_trials": gate.min_trials,
            }
        elif isinstance(gate, CorpusGate):
            members = tuple(sorted(suite.root.glob(gate.corpus)))
            if len(members) < gate.minimum_members:
                return _result(
                    gate,
                    "fail",
                    started,
                    f"corpus {gate.corpus!r} has {len(members)} member(s), fewer than "
                    f"minimum_members {gate.minimum_members}",
                )
            fields = {"members": members, "procedure": resolve_callable(gate.procedure)}
        elif isinstance(gate, CaseGate):
            path = suite.root / gate.case
            case, problems = load_case(path, gate.case)
            if case is None:
                return _result(
                    gate, "error", started, f"case file {gate.case} is invalid: {'; '.join(problems)}"
                )
            if case.awaiting_assertions:
                return _result(gate, "awaiting_assertions", started, _AWAITING)
            fields = {"case_path": path}
    except CallableImportError as exc:
        return _result(gate, "error", started, str(exc))
    ctx = suite.context(gate.id, gate.kind, **fields)
    status, outcome = _call_check(check, ctx)
    if status == "pass" and isinstance(gate, PropertyGate):
        if outcome.trials is None or outcome.trials < gate.min_trials:
            ran = (
                "no trial count was reported" if outcome.trials is None else f"{outcome.trials} trial(s) ran"
            )
            return _result(gate, "fail", started, f"{ran}, fewer than min_trials {gate.min_trials}")
    if isinstance(gate, CaseGate) and gate.expect == "error":
        if status == "error" and re.search(str(gate.error_matches), outcome.message or ""):
            return _result(gate, "pass", started, replace(outcome, message=f"an error as expected: {outcome.message}"))
        got = "an error not matching it" if status == "error" else "it ran"
        return _result(
            gate, "fail", started, f"expected an error matching {gate.error_matches!r}, {got}: {outcome.message}"
        )
    if isinstance(gate, CaseGate) and status != "error" and gate.expect == "fail":
        if status == "fail":
            return _result(
                gate, "pass", started, replace(outcome, message=f"failed as expected: {outcome.message}")
            )
        return _result(gate, "fail", started, "expected the case to fail, but every assertion held")
    return _result(gate, status, started, outcome)


_AWAITING = "converted case awaiting assertions: listed, never blocking, until a person writes them"


def _invalid_result(entry: InvalidEntry) -> GateResult:
    """An entry that failed validation: an `error` row (it cannot run), naming its problems."""
    problems = "; ".join(f"{p.field}: {p.message}" for p in entry.problems)
    kind = "test" if entry.section == "tests" else (entry.kind or "unknown")
    return GateResult(
        gate_id=entry.id,
        kind=kind,
        milestone=entry.milestone,
        status="error",
        duration_s=0.0,
        message=f"invalid registry entry in {entry.source}: {problems}",
        declared_in=entry.source,
    )


def _run_converted(path: Path, suite: _Suite, wanted: Callable[[str], bool]) -> list[GateResult]:
    """A converted scenario as a case row `case.<id>`: awaiting, or run as an ordinary case."""
    started = time.perf_counter()
    shown = str(path.relative_to(suite.root)) if path.is_relative_to(suite.root) else str(path)
    case, problems = load_case(path, shown)
    gate_id = f"case.{case.id if case else shown}"
    if not wanted(gate_id):
        return []

    def row(status: Status, message: str, findings: tuple[str, ...] = ()) -> list[GateResult]:
        duration = time.perf_counter() - started
        return [GateResult(gate_id, "case", 0, status, duration, message, shown, findings=findings)]

    if case is None:
        return row("error", f"converted case {shown} is invalid: {'; '.join(problems)}")
    if case.awaiting_assertions:
        return row("awaiting_assertions", _AWAITING)
    loaded: LoadedCase = case
    ctx = suite.context(gate_id, "case", case_path=path)
    status, outcome = _call_check(lambda c: case_outcome(loaded, c), ctx)
    return row(status, outcome.message or status, outcome.findings)


def _run_test(
    test: SuiteTest, suite: _Suite, past_failures: list[datetime], now: datetime, source: str
) -> tuple[GateResult, TestRecord | None]:
    """Run one ordinary test: retried once on failure; quarantined per its failure history."""
    started = time.perf_counter()
    if test.milestone > suite.milestone:
        message = f"pending until milestone {test.milestone} (build: {suite.milestone})"
        return GateResult(test.id, "test", test.milestone, "pending", 0.0, message, source), None
    ctx = suite.context(test.id, "test")

    def attempt() -> tuple[TryStatus, Outcome]:
        try:
            check = resolve_callable(test.check)
        except CallableImportError as exc:
            return "error", Outcome.failed(str(exc))
        return _call_check(check, ctx)

    first = attempt()
    final = first if first[0] == "pass" else attempt()
    retried = first[0] != "pass"
    failures = [*past_failures, now] if retried else past_failures
    quarantine = quarantine_at(failures, now)
    message = final[1].message or final[0]
    if retried:
        message = f"first try {first[0]}: {first[1].message}; retry {final[0]}" + (
            f": {final[1].message}" if final[0] != "pass" and final[1].message else ""
        )
    if quarantine is not None:
        message += f" [quarantined {quarantine.start:%Y-%m-%d} to {quarantine.end:%Y-%m-%d}]"
    record = TestRecord(
        test_id=test.id,
        build=suite.build,
        ran_at=now,
        status=final[0],
        first_try=first[0],
        retried=retried,
        quarantined=quarantine is not None,
        quarantined_from=quarantine.start if quarantine else None,
        quarantined_until=quarantine.end if quarantine else None,
        message=message,
    )
    result = GateResult(
        gate_id=test.id,
        kind="test",
        milestone=test.milestone,
        status=final[0],
        duration_s=time.perf_counter() - started,
        message=message,
        declared_in=source,
        retried=retried,
        quarantined=quarantine is not None,
        findings=final[1].findings,
    )
    return result, record


def run_suite(
    registry: Registry,
    *,
    milestone: int,
    build: str | None = None,
    root: Path | None = None,
    subject: Subject | None = None,
    clock: Clock = utc_now,
    quarantine_store: QuarantineStore | None = None,
    converted_glob: str | None = CONVERTED_GLOB,
    extra_scan_paths: Sequence[Path] = (),
    hooks: Mapping[str, Callable[..., Any]] | None = None,
    only: Collection[str] | None = None,
    exclude: Collection[str] = (),
    kinds: Collection[str] | None = None,
) -> SuiteResult:
    """Run the registry for a build at `milestone`; never raises for a failing or broken gate.

    - every gate: `pending` past the build's milestone, else run once (see module doc);
    - every invalid registry entry: `error`;
    - every converted case matching `converted_glob` (relative to `root`; None: none) that no case
      gate already names: `awaiting_assertions`, or run as an ordinary case;
    - every ordinary test: run, retried once on failure, quarantined by the history in
      `quarantine_store` (default: empty) and `clock`.

    `subject` is the build's subject (cases that pin no subject run on it; it must be a sim model).
    `only` restricts the run to these ids (gates and tests), `exclude` leaves these ids out, `kinds`
    keeps only these kinds (`case` includes converted cases, `test` the ordinary tests); rows left
    out are not listed at all. `extra_scan_paths` and `hooks` are
    handed to every check through its context. Reads the quarantine store; writes nothing —
    persist with `record_suite`.
    """
    root = (root or registry.root).resolve()
    now = clock()
    suite = _Suite(root, build, milestone, subject, clock, tuple(extra_scan_paths), dict(hooks or {}))

    def wanted(gate_id: str) -> bool:
        return (only is None or gate_id in only) and gate_id not in exclude

    def kind_wanted(kind: str | None) -> bool:
        return kinds is None or kind in kinds

    results: list[GateResult] = []
    for gate in registry.gates:
        if wanted(gate.id) and kind_wanted(gate.kind):
            results.append(_run_gate(gate, suite))
    results += [
        _invalid_result(e)
        for e in registry.invalid
        if wanted(e.id) and kind_wanted("test" if e.section == "tests" else e.kind)
    ]
    if converted_glob is not None and kind_wanted("case"):
        named = {(root / g.case).resolve() for g in registry.gates if isinstance(g, CaseGate)}
        for path in converted_cases(root, converted_glob):
            if path.resolve() not in named:
                results += _run_converted(path, suite, wanted)
    store = MemoryQuarantineStore() if quarantine_store is None else quarantine_store
    tests = [t for t in registry.tests if wanted(t.id) and kind_wanted("test")]
    history = store.failure_times([t.id for t in tests])
    records: list[TestRecord] = []
    for test in tests:
        row, record = _run_test(test, suite, history.get(test.id, []), now, registry.sources.get(test.id, ""))
        results.append(row)
        if record is not None:
            records.append(record)
    return SuiteResult(build, milestone, now, tuple(results), tuple(records))
