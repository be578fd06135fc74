"""The deterministic suite (the gate registry run for one build's milestone), as one materialization.

"Suite" alone is ambiguous here: the *deterministic suite* is the gates and tests of `gates/` run for
a build (this module, the `deterministic_suite` asset, the `gate_results` table); a *scenario suite*
is a group of scenarios (`scenarios/<suite>/`, the `suite` column of `scenario_runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from eval_assets.capability.track import Summary, Track
from eval_assets.gates import REVIEW_QUEUE_HOOK, run_and_record_suite, stored_evidence, utc_now
from eval_assets.present import gates_markdown
from eval_assets.review import UncertainEffects
from eval_assets.stats import CheckSuiteEvidence


def materialize_deterministic_suite(
    track: Track, build_id: str, run_id: str, clock: Callable[[], datetime] = utc_now
) -> Summary:
    """Run every gate (and non-gate test) for the build's milestone; writes `gate_results`.

    A broken registry entry is an `error` row (it blocks), never a crash of the materialization.
    The summary's values are the suite's counts and lists (`blocking`: the gates that block), its
    markdown the results table, its log one line per result (`error` for a blocking one).
    """
    manifest = track.build(build_id)  # resolved once for this materialization
    result = run_and_record_suite(
        track.project.root,
        build=manifest,
        warehouse=track.warehouse,
        run_id=run_id,
        clock=clock,
        hooks={REVIEW_QUEUE_HOOK: UncertainEffects},
    )
    log = tuple(
        (
            "error" if row.blocks else "info",
            f"{row.gate_id} [{row.kind}, milestone {row.milestone}]: {row.status} {row.message}",
        )
        for row in result.results
    )
    return Summary(dict(result.summary()), gates_markdown(result.results), log=log)


def suite_evidence(track: Track, build_id: str) -> CheckSuiteEvidence:
    """The build's recorded gate results as decision evidence (quarantined tests and pending gates
    excluded; a suite that never ran decides nothing)."""
    return stored_evidence(track.warehouse, build_id)
