"""Release statistics: noise bands and reports per build × judge version, the decision per build."""

import dagster as dg

from eval_assets import release
from eval_assets.defs.capability.assets import judge_verdicts
from eval_assets.defs.capability.metadata import as_metadata
from eval_assets.defs.partitions import build_and_judge, build_by_judge, build_partitions
from eval_assets.defs.resources import TrackResource
from eval_assets.defs.suite.assets import deterministic_suite
from eval_assets.suite import suite_evidence


@dg.asset(
    partitions_def=build_by_judge,
    deps=[judge_verdicts],
    group_name="release",
    kinds={"python", "parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    description="How far the suite and each scenario move when nothing changed, from the build's own repeats.",
)
def noise_bands(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
    build, judge_version = build_and_judge(context)
    summary = release.run_noise_bands(track.track, build, judge_version, context.run_id)
    context.log.info(f"suite noise band ±{summary['suite_half_width']} over {summary['scenarios']} scenarios")
    return dg.MaterializeResult(metadata=as_metadata(summary.values))


@dg.asset(
    partitions_def=build_by_judge,
    deps=[judge_verdicts, noise_bands],
    group_name="release",
    kinds={"python", "parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    description="The build against its baseline under ONE judge version: policy, floor drops, mean drop, p10.",
)
def capability_report(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
    build, judge_version = build_and_judge(context)
    summary, markdown, png = release.run_capability_report(track.track, build, judge_version, context.run_id)
    plots = track.track.home.root / "reports" / build
    plots.mkdir(parents=True, exist_ok=True)
    png_path = plots / f"{judge_version}.png"
    png_path.write_bytes(png)
    context.log.info(f"report {build} vs {summary['baseline']} under {judge_version}: {summary['verdict']}")
    metadata = as_metadata(summary.values)
    metadata["summary"] = dg.MetadataValue.md(markdown)
    metadata["plot"] = dg.MetadataValue.md(release.png_markdown(png))
    metadata["plot_file"] = dg.MetadataValue.path(str(png_path))
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    partitions_def=build_partitions,
    deps=[capability_report, deterministic_suite],
    group_name="release",
    kinds={"python", "parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    description="allow / investigate / block for the build, with reasons most severe first.",
)
def release_decision(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
    build = context.partition_key
    summary = release.run_release_decision(
        track.track, build, context.run_id, [suite_evidence(track.track, build)]
    )
    context.log.info(f"release decision for {build}: {summary['decision']}")
    for reason in summary["reasons"]:
        context.log.info(f"  {reason}")
    metadata = as_metadata(summary.values)
    metadata["reasons_md"] = dg.MetadataValue.md("\n".join(f"- {r}" for r in summary["reasons"]) or "none")
    return dg.MaterializeResult(metadata=metadata)
