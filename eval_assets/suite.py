"""The deterministic suite for one build: run the gate registry at the build's milestone, record it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from eval_assets.gates import (
    SuiteResult,
    WarehouseQuarantineStore,
    load_registry,
    record_suite,
    run_suite,
    utc_now,
)
from eval_assets.stats import CheckOutcome, CheckSuiteEvidence
from eval_assets.track import Summary, Track


def run_deterministic_suite(
    track: Track, build_id: str, run_id: str, clock: Callable[[], datetime] = utc_now
) -> tuple[SuiteResult, Summary]:
    """Run every gate (and non-gate test) for the build's milestone; writes `gate_results`."""
    manifest = track.build(build_id)
    registry = load_registry(track.project.root)
    result = run_suite(
        registry,
        milestone=manifest.milestone,
        build=manifest.id,
        root=track.project.root,
        subject=manifest.subject,
        clock=clock,
        quarantine_store=WarehouseQuarantineStore(track.warehouse),
    )
    written = record_suite(track.warehouse, result, run_id)
    summary = dict(result.summary())
    summary["partition_file"] = str(written["gate_results"])
    return result, Summary(summary)


def suite_evidence(track: Track, build_id: str) -> CheckSuiteEvidence:
    """The recorded `gate_results` of a build as decision evidence (decides nothing if it never ran)."""
    frame = track.warehouse.query(
        "SELECT gate_id, status, message FROM gate_results WHERE build = ? ORDER BY gate_id", [build_id]
    )
    if frame.empty:
        return CheckSuiteEvidence(source="deterministic suite", outcomes=())
    outcomes = tuple(
        CheckOutcome(
            name=str(r.gate_id), passed=r.status not in ("fail", "error"), detail=f"{r.status}: {r.message}"
        )
        for r in frame.itertuples()
        if r.status in ("pass", "fail", "error")
    )
    return CheckSuiteEvidence(source="deterministic suite", outcomes=outcomes)
