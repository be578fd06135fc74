"""Judge governance: bridge runs publish calibration offsets between judge versions; the score trend
per judge version splices earlier versions in through them."""

from collections.abc import Mapping

import dagster as dg

from eval_assets.bridge import BRIDGE_BUILDS_TAG, materialize_calibration_offsets
from eval_assets.defs.capability.metadata import as_metadata
from eval_assets.defs.failures import one_line_asset
from eval_assets.defs.partitions import Partitions
from eval_assets.defs.resources import TrackResource
from eval_assets.trend import materialize_score_trend


def judge_assets(pools: Mapping[str, str], parts: Partitions) -> list[dg.AssetsDefinition]:
    """Per judge version: its calibration offsets (a bridge run, in the judges' provider pool) and its
    score trend."""

    @one_line_asset(
        partitions_def=parts.judge_version,
        pool=pools["calibration_offsets"],
        deps=["judge_verdicts"],
        group_name="judges",
        description="Bridge run: old and new judge versions score the same stored outputs; publishes the offset "
        "(with CI, Bland-Altman, slope, Spearman, Krippendorff's alpha) only when docs/methods.md: bridges acceptance holds.",
    )
    def calibration_offsets(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        judge_version = context.partition_key
        # `evaltrack bridge run --builds` names the builds in a run tag; otherwise the judge file's or the newest
        named = context.run.tags.get(BRIDGE_BUILDS_TAG, "")
        builds = [b for b in named.split(",") if b] or None
        summary = materialize_calibration_offsets(
            track.get(), judge_version, context.run_id, log=context.log.info, builds=builds
        )
        for _level, line in summary.log:
            context.log.info(line)
        return dg.MaterializeResult(metadata=as_metadata(summary.values, track.get().home.root))

    @one_line_asset(
        partitions_def=parts.judge_version,
        deps=["judge_verdicts", calibration_offsets],
        group_name="judges",
        description="The suite score over builds in registration order under one judge version: earlier "
        "versions' points spliced in through published calibration offsets (marked), a break where a bridge "
        "is not published. Never feeds a release decision.",
    )
    def score_trend(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        judge_version = context.partition_key
        summary = materialize_score_trend(track.get(), judge_version, context.run_id)
        metadata = as_metadata(summary.values, track.get().home.root)
        metadata["trend"] = dg.MetadataValue.md(summary.markdown)
        return dg.MaterializeResult(metadata=metadata)

    return [calibration_offsets, score_trend]
