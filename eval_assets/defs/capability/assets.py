"""Capability track assets: subject runs per build, verdicts and the cost ledger per build × judge."""

from collections.abc import Mapping

import dagster as dg

from eval_assets.capability.builds import Builds
from eval_assets.capability.materialize import (
    materialize_cost_ledger,
    materialize_judge_verdicts,
    materialize_scenario_runs,
)
from eval_assets.capability.progress import PROGRESS_LOGGER, Progress
from eval_assets.defs.capability.metadata import as_metadata
from eval_assets.defs.conditions import judge_version_eager
from eval_assets.defs.failures import one_line_asset
from eval_assets.defs.partitions import Partitions, build_and_judge, build_partitions
from eval_assets.defs.resources import TrackResource

GENERATION_TAG = "evaltrack/generation"


def generation(context: dg.AssetExecutionContext) -> int:
    """0 normally (settled tries are reused); an explicit fresh run carries a new generation tag."""
    return int(context.run.tags.get(GENERATION_TAG, "0"))


def capability_assets(
    pools: Mapping[str, str], builds: Builds, parts: Partitions
) -> list[dg.AssetsDefinition]:
    """The build's subject runs, and per build × judge version its verdicts and cost ledger; the
    model-calling ones in their provider's concurrency pool (`Project.asset_pools`)."""

    @one_line_asset(
        partitions_def=build_partitions,
        pool=pools["scenario_runs"],
        group_name="capability",
        description="Every scenario × repeat of the build's subject, through litellm. Outputs, policy checks, spend.",
    )
    def scenario_runs(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        build = context.partition_key
        context.log.info(f"running the subject of build {build}")

        def progress(p: Progress) -> None:
            context.log.info(p.line())  # a Dagster log event on the run page
            PROGRESS_LOGGER.info(p.line(), extra={"progress": p})

        summary = materialize_scenario_runs(
            track.get(),
            build,
            context.run_id,
            log=context.log.info,
            generation=generation(context),
            progress=progress,
        )
        context.log.info(f"{summary['attempts']} attempts: {summary['errors']} errors, ${summary['spend_usd']}")
        return dg.MaterializeResult(metadata=as_metadata(summary.values, track.get().home.root))

    @one_line_asset(
        partitions_def=parts.build_by_judge,
        pool=pools["judge_verdicts"],
        deps=[scenario_runs],
        group_name="capability",
        automation_condition=judge_version_eager(builds),
        description="One judge version's validated verdicts on the build's stored outputs (fail closed). "
        "Automation materializes only the judge versions that apply to the build.",
    )
    def judge_verdicts(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        build, judge_version = build_and_judge(context)
        context.log.info(f"judging build {build} with {judge_version}")
        summary = materialize_judge_verdicts(
            track.get(),
            build,
            judge_version,
            context.run_id,
            log=context.log.info,
            generation=generation(context),
        )
        context.log.info(
            f"{summary['verdicts']} verdicts: {summary['scored']} scored, {summary['failed']} failed, "
            f"{summary['excluded']} excluded"
        )
        return dg.MaterializeResult(metadata=as_metadata(summary.values, track.get().home.root, judge_version))

    @one_line_asset(
        partitions_def=parts.build_by_judge,
        deps=[judge_verdicts],
        group_name="capability",
        automation_condition=dg.AutomationCondition.eager(),
        description="The spend journal's per-attempt rows for the build's subject and this judge version.",
    )
    def cost_ledger(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        build, judge_version = build_and_judge(context)
        summary = materialize_cost_ledger(track.get(), build, judge_version, context.run_id)
        context.log.info(f"published {summary['rows']} ledger rows, ${summary['spend_usd']}")
        return dg.MaterializeResult(metadata=as_metadata(summary.values, track.get().home.root, judge_version))

    return [scenario_runs, judge_verdicts, cost_ledger]
