"""The deterministic suite: the gate registry, its four kinds, cases, and flaky-test quarantine.

Plain typed Python (no Dagster): `read_registry`/`load_registry` read `gates/*.yaml`,
`check_docs` reconciles it with `docs/specs/*.md`, `run_suite` runs it for a build's milestone,
and `record_suite` writes `gate_results` and `test_quarantine` through the one partition writer.
`SuiteResult.evidence()` is the release decision's input.
"""

from eval_assets.config import ASSERTION_KINDS

from ._cases import (
    REVIEW_QUEUE_HOOK,
    CaseError,
    CaseFile,
    CaseRun,
    LoadedCase,
    case_outcome,
    checked_kinds,
    execute_case,
    failed_assertions,
    load_case,
)
from ._docs import check_docs, validate_gates
from ._outcome import Clock, GateContext, GateFailed, Outcome, Skip, utc_now
from ._quarantine import (
    FAILURE_WINDOW,
    QUARANTINE_LENGTH,
    MemoryQuarantineStore,
    Quarantine,
    QuarantineStore,
    TestRecord,
    WarehouseQuarantineStore,
    quarantine_at,
)
from ._records import gate_result_rows, quarantine_rows, record_suite, run_and_record_suite, stored_evidence
from ._registry import (
    KINDS,
    CallableImportError,
    CaseGate,
    CorpusGate,
    DeclaredIn,
    Gate,
    InvalidEntry,
    PropertyGate,
    Registry,
    StructuralGate,
    SuiteTest,
    load_registry,
    read_registry,
    resolve_callable,
)
from ._results import EVIDENCE_SOURCE, GateResult, Status, SuiteResult
from ._runner import CONVERTED_GLOB, run_suite
from ._scratch import scratch
from ._script_recording import RECORD_BUILD, Recording, RecordRefused, find_case, record_script

__all__ = [
    "ASSERTION_KINDS",
    "CONVERTED_GLOB",
    "EVIDENCE_SOURCE",
    "FAILURE_WINDOW",
    "KINDS",
    "QUARANTINE_LENGTH",
    "RECORD_BUILD",
    "RecordRefused",
    "Recording",
    "CallableImportError",
    "CaseError",
    "CaseFile",
    "CaseGate",
    "CaseRun",
    "checked_kinds",
    "REVIEW_QUEUE_HOOK",
    "Clock",
    "CorpusGate",
    "DeclaredIn",
    "Gate",
    "GateContext",
    "GateFailed",
    "GateResult",
    "InvalidEntry",
    "LoadedCase",
    "MemoryQuarantineStore",
    "Outcome",
    "PropertyGate",
    "Quarantine",
    "QuarantineStore",
    "Registry",
    "Skip",
    "Status",
    "StructuralGate",
    "SuiteResult",
    "SuiteTest",
    "TestRecord",
    "WarehouseQuarantineStore",
    "case_outcome",
    "failed_assertions",
    "check_docs",
    "execute_case",
    "find_case",
    "gate_result_rows",
    "record_script",
    "load_case",
    "load_registry",
    "run_and_record_suite",
    "quarantine_at",
    "quarantine_rows",
    "read_registry",
    "record_suite",
    "resolve_callable",
    "run_suite",
    "scratch",
    "stored_evidence",
    "utc_now",
    "validate_gates",
]
