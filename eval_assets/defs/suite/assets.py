"""The deterministic suite: the gate registry run for a build's milestone; a failing gate blocks."""

import warnings

import dagster as dg

from eval_assets.defs.capability.metadata import as_metadata
from eval_assets.defs.failures import one_line_asset
from eval_assets.defs.partitions import build_partitions
from eval_assets.defs.resources import TrackResource
from eval_assets.suite import materialize_deterministic_suite

with warnings.catch_warnings():  # per-partition check results are a preview feature in Dagster 1.13
    warnings.simplefilter("ignore")
    NO_FAILING_GATES = dg.AssetCheckSpec(
        "no_failing_gates",
        asset="deterministic_suite",
        blocking=True,
        partitions_def=build_partitions,
        description="Per build: no gate of the build's milestone failed or errored (quarantined tests and "
        "pending gates never block). A failure blocks the release.",
    )


@one_line_asset(
    partitions_def=build_partitions,
    group_name="deterministic_suite",
    description="Every gate in gates/ at the build's milestone (pending past it); writes gate_results.",
    check_specs=[NO_FAILING_GATES],
)
def deterministic_suite(context: dg.AssetExecutionContext, track: TrackResource):  # type: ignore[no-untyped-def]
    build = context.partition_key
    summary = materialize_deterministic_suite(track.get(), build, context.run_id)
    for level, line in summary.log:
        (context.log.error if level == "error" else context.log.info)(line)
    metadata = {"build": build, **as_metadata(summary.values, track.get().home.root)}
    metadata["gates_md"] = dg.MetadataValue.md(summary.markdown)
    yield dg.MaterializeResult(metadata=metadata)
    blocking = list(summary["blocking"])
    description = f"{build}: " + (
        f"failing or erroring gates: {', '.join(blocking)}" if blocking else "no gate fails"
    )
    yield dg.AssetCheckResult(
        check_name="no_failing_gates",
        passed=not blocking,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"build": build, "failing_gates": ", ".join(blocking) or "none"},
        description=description,
    )
    if blocking:
        # the step fails here, as one line, before Dagster raises its own check error outside the
        # step's boundary, where its stack would be stored (docs/specs/security.md)
        raise dg.Failure(description=description, allow_retries=False)
