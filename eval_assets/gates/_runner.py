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

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eval_assets.config import ConfigError, Project

from ._cases import LoadedCase, case_outcome, converted_cases, load_case
from ._outcome import SKIP_TYPES, Clock, GateContext, GateFailed, Outcome, utc_now
from ._quarantine import (
    MemoryQuarantineStore,
    QuarantineStore,
    TestRecord,
    TryStatus,
    naive_utc,
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
    read_registry,
    resolve_callable,
)

if TYPE_CHECKING:
    from eval_assets.config import BuildManifest, Subject
    from eval_assets.stats import CheckSuiteEvidence
    from eval_assets.warehouse import Warehouse

Status = Literal["pass", "fail", "pending", "error", "awaiting_assertions"]
BLOCKING: frozenset[str] = frozenset({"fail", "error"})
CONVERTED_GLOB = "scenarios/**/*.yaml"
EVIDENCE_SOURCE = "deterministic_suite"
MESSAGE_MAX_CHARS = 4000
MAX_FINDINGS_SHOWN = 25


@dataclass(frozen=True)
class GateResult:
    """One row of `gate_results`: a gate, an invalid registry entry, a converted case or a test.

    `kind` is the gate kind, or `test` for an ordinary test. `blocks` is True for fail/error
    results that are not quarantined (only tests are ever quarantined).
    """

    gate_id: str
    kind: str
    milestone: int | None
    status: Status
    duration_s: float
    message: str
    declared_in: str
    retried: bool = False
    quarantined: bool = False
    findings: tuple[str, ...] = ()

    @property
    def blocks(self) -> bool:
        return self.status in BLOCKING and not self.quarantined

    def full_message(self) -> str:
        """The message and the first findings, capped at MESSAGE_MAX_CHARS."""
        lines = [self.message, *self.findings[:MAX_FINDINGS_SHOWN]]
        if len(self.findings) > MAX_FINDINGS_SHOWN:
            lines.append(f"... and {len(self.findings) - MAX_FINDINGS_SHOWN} more")
        text = "\n".join(line for line in lines if line)
        return text if len(text) <= MESSAGE_MAX_CHARS else text[:MESSAGE_MAX_CHARS] + " [cut]"


@dataclass(frozen=True)
class SuiteResult:
    """The suite's results for one build: rows for `gate_results`/`test_quarantine`, and evidence."""

    build: str | None
    milestone: int
    ran_at: datetime
    results: tuple[GateResult, ...]
    test_records: tuple[TestRecord, ...] = ()

    @property
    def blocking(self) -> tuple[GateResult, ...]:
        """Results that block the release: fail or error, not quarantined."""
        return tuple(r for r in self.results if r.blocks)

    @property
    def passed(self) -> bool:
        """True when nothing blocks (pending, awaiting and quarantined results never block)."""
        return not self.blocking

    def counts(self) -> dict[str, int]:
        """Number of results per status (tests included)."""
        return dict(Counter(r.status for r in self.results))

    @property
    def retry_rate(self) -> float | None:
        """Share of ordinary tests that were retried in this run (None when no test ran)."""
        if not self.test_records:
            return None
        return sum(r.retried for r in self.test_records) / len(self.test_records)

    def ids(self, status: Status) -> list[str]:
        return [r.gate_id for r in self.results if r.status == status]

    def evidence(self, source: str = EVIDENCE_SOURCE) -> CheckSuiteEvidence:
        """Release-decision evidence: one outcome per result that can block (ran, not quarantined).

        Pending and awaiting results, and quarantined tests, are left out: they never block. A suite
        in which nothing ran therefore "decided nothing".
        """
        from eval_assets.stats import CheckOutcome, CheckSuiteEvidence

        outcomes = tuple(
            CheckOutcome(
                r.gate_id, r.status == "pass", "" if r.status == "pass" else f"{r.status}: {r.message}"
            )
            for r in self.results
            if r.status in ("pass", "fail", "error") and not r.quarantined
        )
        return CheckSuiteEvidence(source, outcomes)

    def gate_rows(self) -> list[dict[str, Any]]:
        """Rows for the `gate_results` dataset (partition: build)."""
        ran_at = _naive(self.ran_at)
        return [
            {
                "build": self.build,
                "gate_id": r.gate_id,
                "kind": r.kind,
                "milestone": r.milestone,
                "status": r.status,
                "duration_s": round(r.duration_s, 6),
                "message": r.full_message(),
                "declared_in": r.declared_in,
                "retried": r.retried,
                "quarantined": r.quarantined,
                "blocks": r.blocks,
                "ran_at": ran_at,
            }
            for r in self.results
        ]

    def quarantine_rows(self) -> list[dict[str, Any]]:
        """Rows to append to `test_quarantine` (one per ordinary test run)."""
        return [r.row() for r in self.test_records]

    def summary(self) -> dict[str, Any]:
        """Counts and lists for a materialization's metadata (tracked figures included)."""
        return {
            "build": self.build,
            "milestone": self.milestone,
            "passed": self.passed,
            "counts": self.counts(),
            "blocking": [r.gate_id for r in self.blocking],
            "pending": self.ids("pending"),
            "awaiting_assertions": self.ids("awaiting_assertions"),
            "quarantined": [r.gate_id for r in self.results if r.quarantined],
            "tests_retried": [r.test_id for r in self.test_records if r.retried],
            "retry_rate": self.retry_rate,
            "duration_s": round(sum(r.duration_s for r in self.results), 3),
        }

    def text(self) -> str:
        """One line per result, blocking ones first, then the retry rate."""
        order = {"error": 0, "fail": 1, "awaiting_assertions": 2, "pending": 3, "pass": 4}
        lines = []
        for r in sorted(self.results, key=lambda r: (not r.blocks, order[r.status])):
            flags = "".join([" (retried)" if r.retried else "", " (quarantined)" if r.quarantined else ""])
            lines.append(f"{r.status:>19}  {r.gate_id}{flags}: {r.message}")
        rate = self.retry_rate
        lines.append(f"retry rate: {'n/a' if rate is None else f'{rate:.1%}'}")
        return "\n".join(lines)


def _naive(moment: datetime) -> datetime:
    out = naive_utc(moment)
    assert out is not None
    return out


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
            from eval_assets.config import load_project

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
) -> SuiteResult:
    """Run the registry for a build at `milestone`; never raises for a failing or broken gate.

    - every gate: `pending` past the build's milestone, else run once (see module doc);
    - every invalid registry entry: `error`;
    - every converted case matching `converted_glob` (relative to `root`; None: none) that no case
      gate already names: `awaiting_assertions`, or run as an ordinary case;
    - every ordinary test: run, retried once on failure, quarantined by the history in
      `quarantine_store` (default: empty) and `clock`.

    `subject` is the build's subject (cases that pin no subject run on it; it must be a sim model).
    `only` restricts the run to these ids (gates and tests). `extra_scan_paths` and `hooks` are
    handed to every check through its context. Reads the quarantine store; writes nothing —
    persist with `record_suite`.
    """
    root = (root or registry.root).resolve()
    now = clock()
    suite = _Suite(root, build, milestone, subject, clock, tuple(extra_scan_paths), dict(hooks or {}))
    wanted = (lambda i: True) if only is None else (lambda i: i in only)
    results: list[GateResult] = []
    for gate in registry.gates:
        if wanted(gate.id):
            results.append(_run_gate(gate, suite))
    results += [_invalid_result(e) for e in registry.invalid if wanted(e.id)]
    if converted_glob is not None:
        named = {(root / g.case).resolve() for g in registry.gates if isinstance(g, CaseGate)}
        for path in converted_cases(root, converted_glob):
            if path.resolve() not in named:
                results += _run_converted(path, suite, wanted)
    store = MemoryQuarantineStore() if quarantine_store is None else quarantine_store
    tests = [t for t in registry.tests if wanted(t.id)]
    history = store.failure_times([t.id for t in tests])
    records: list[TestRecord] = []
    for test in tests:
        row, record = _run_test(test, suite, history.get(test.id, []), now, registry.sources.get(test.id, ""))
        results.append(row)
        if record is not None:
            records.append(record)
    return SuiteResult(build, milestone, now, tuple(results), tuple(records))


def record_suite(warehouse: Warehouse, result: SuiteResult, run_id: str) -> dict[str, Path]:
    """Write `gate_results` (the build's partition) and append the test runs to `test_quarantine`.

    Both through the one partition writer. Raises ValueError when the result has no build.
    Returns the files written by dataset name.
    """
    if result.build is None:
        raise ValueError("a suite result without a build cannot be recorded")
    partition = {"build": result.build}
    written = {
        "gate_results": warehouse.write_partition("gate_results", partition, result.gate_rows(), run_id)
    }
    if result.test_records:
        written["test_quarantine"] = warehouse.write_partition(
            "test_quarantine", partition, result.quarantine_rows(), run_id
        )
    return written


def materialize_suite(
    root: Path,
    *,
    build: BuildManifest,
    warehouse: Warehouse,
    run_id: str,
    clock: Clock = utc_now,
    hooks: Mapping[str, Callable[..., Any]] | None = None,
    extra_scan_paths: Sequence[Path] = (),
) -> SuiteResult:
    """One `deterministic_suite` materialization: read `root/gates` leniently (a broken entry is an
    `error` row, not a crash), run it for the build's milestone and subject with the quarantine
    history from the warehouse, and record `gate_results` and `test_quarantine`. Returns the result
    (its `summary()` is the materialization metadata; `passed` is the blocking check's verdict)."""
    from ._quarantine import WarehouseQuarantineStore

    registry = read_registry(root, check_imports=False)
    result = run_suite(
        registry,
        milestone=build.milestone,
        build=build.id,
        root=root,
        subject=build.subject,
        clock=clock,
        quarantine_store=WarehouseQuarantineStore(warehouse),
        hooks=hooks,
        extra_scan_paths=extra_scan_paths,
    )
    record_suite(warehouse, result, run_id)
    return result


def stored_evidence(warehouse: Warehouse, build: str, source: str = EVIDENCE_SOURCE) -> CheckSuiteEvidence:
    """The release-decision evidence of the build's current `gate_results` (newest suite run).

    Same rule as `SuiteResult.evidence`: one outcome per row that ran (pass/fail/error) and is not
    quarantined. A build with no suite run yields evidence with no outcomes, which decides nothing.
    """
    from eval_assets.stats import CheckOutcome, CheckSuiteEvidence

    frame = warehouse.query(
        "SELECT gate_id, status, message FROM gate_results "
        "WHERE build = ? AND status IN ('pass', 'fail', 'error') AND NOT coalesce(quarantined, false) "
        "ORDER BY gate_id",
        [build],
    )
    outcomes = []
    for gate_id, status, message in zip(frame["gate_id"], frame["status"], frame["message"], strict=True):
        headline = message.splitlines()[0] if isinstance(message, str) and message else ""
        detail = "" if status == "pass" else f"{status}: {headline}"
        outcomes.append(CheckOutcome(str(gate_id), status == "pass", detail))
    return CheckSuiteEvidence(source, tuple(outcomes))
