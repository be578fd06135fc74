"""The deterministic suite for one build: run the gate registry at the build's milestone, record it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from eval_assets.capability.track import Summary, Track
from eval_assets.gates import SuiteResult, materialize_suite, stored_evidence, utc_now
from eval_assets.stats import CheckSuiteEvidence


def run_deterministic_suite(
    track: Track, build_id: str, run_id: str, clock: Callable[[], datetime] = utc_now
) -> tuple[SuiteResult, Summary]:
    """Run every gate (and non-gate test) for the build's milestone; writes `gate_results`.

    A broken registry entry is an `error` row (it blocks), never a crash of the materialization.
    """
    manifest = track.build(build_id)
    result = materialize_suite(
        track.project.root, build=manifest, warehouse=track.warehouse, run_id=run_id, clock=clock
    )
    return result, Summary(dict(result.summary()))


def suite_evidence(track: Track, build_id: str) -> CheckSuiteEvidence:
    """The build's recorded gate results as decision evidence (quarantined tests and pending gates
    excluded; a suite that never ran decides nothing)."""
    return stored_evidence(track.warehouse, build_id)
