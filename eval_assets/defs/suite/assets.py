"""The deterministic suite: the gate registry run for a build's milestone; a failing gate blocks."""

import dagster as dg

from eval_assets.defs.capability.metadata import as_metadata
from eval_assets.defs.partitions import build_partitions
from eval_assets.defs.resources import TrackResource
from eval_assets.suite import run_deterministic_suite


@dg.asset(
    partitions_def=build_partitions,
    group_name="deterministic_suite",
    kinds={"python", "parquet"},
    description="Every gate in gates/ at the build's milestone (pending past it); writes gate_results.",
    check_specs=[dg.AssetCheckSpec("no_failing_gates", asset="deterministic_suite", blocking=True)],
)
def deterministic_suite(context: dg.AssetExecutionContext, track: TrackResource):  # type: ignore[no-untyped-def]
    build = context.partition_key
    result, summary = run_deterministic_suite(track.track, build, context.run_id)
    for row in result.results:
        log = context.log.error if row.blocks else context.log.info
        log(f"{row.gate_id} [{row.kind}, milestone {row.milestone}]: {row.status} {row.message}")
    metadata = as_metadata(summary.values)
    metadata["gates_md"] = dg.MetadataValue.md(result.text())
    yield dg.MaterializeResult(metadata=metadata)
    blocking = [r.gate_id for r in result.blocking]
    yield dg.AssetCheckResult(
        check_name="no_failing_gates",
        passed=not blocking,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"failing_gates": dg.MetadataValue.json(blocking)},
        description="failing or erroring gates: " + (", ".join(blocking) or "none"),
    )
