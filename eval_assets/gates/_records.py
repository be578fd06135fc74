"""The suite in the warehouse: the rows of `gate_results` and `test_quarantine` (one builder per
table), record a run's rows through the one partition writer, run and record one
`deterministic_suite` materialization, and read a build's stored evidence back."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._outcome import Clock, utc_now
from ._quarantine import WarehouseQuarantineStore, naive_utc
from ._registry import read_registry
from ._results import EVIDENCE_SOURCE, SuiteResult
from ._runner import run_suite

if TYPE_CHECKING:
    from eval_assets.config import BuildManifest
    from eval_assets.stats import CheckSuiteEvidence
    from eval_assets.warehouse import Warehouse


def gate_result_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """The `gate_results` rows of a suite run: one per gate, invalid entry, converted case and test
    (timestamps as naive UTC)."""
    return [
        {
            "build": result.build,
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
            "ran_at": naive_utc(result.ran_at),
        }
        for r in result.results
    ]


def quarantine_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """The rows a suite run appends to `test_quarantine`: one per ordinary test run (timestamps as
    naive UTC)."""
    return [
        {
            "build": t.build,
            "test_id": t.test_id,
            "ran_at": naive_utc(t.ran_at),
            "status": t.status,
            "first_try": t.first_try,
            "retried": t.retried,
            "failed": t.failed,
            "quarantined": t.quarantined,
            "quarantined_from": naive_utc(t.quarantined_from),
            "quarantined_until": naive_utc(t.quarantined_until),
            "message": t.message,
        }
        for t in result.test_records
    ]


def record_suite(warehouse: Warehouse, result: SuiteResult, run_id: str) -> dict[str, Path]:
    """Write `gate_results` (the build's partition) and append the test runs to `test_quarantine`.

    Both through the one partition writer. Raises ValueError when the result has no build.
    Returns the files written by dataset name.
    """
    if result.build is None:
        raise ValueError("a suite result without a build cannot be recorded")
    partition = {"build": result.build}
    written = {
        "gate_results": warehouse.write_partition("gate_results", partition, gate_result_rows(result), run_id)
    }
    if result.test_records:
        written["test_quarantine"] = warehouse.write_partition(
            "test_quarantine", partition, quarantine_rows(result), run_id
        )
    return written


def run_and_record_suite(
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
    # pandas and scipy, which `validate` (it imports the gates) never needs
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
