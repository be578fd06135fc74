"""Release statistics: noise bands and reports per build × judge version, the decision per build.

Checks are per partition (Dagster 1.13's partitioned asset checks, `AssetCheckSpec(partitions_def=…)`):
each evaluation is recorded against the build (or build × judge version) it judged, so a check's
history and the partition pages show which build failed. `release_allowed` follows the decision:
block → failed with ERROR severity, investigate → failed with WARN, none → failed with WARN saying
why, allow → passed (ERROR severity, so a pass never reads as a warning).

One look per decision where builds are listed (docs/design.md, "The release verdict at a glance"):
`release_approval[build]` materializes (green) for allow, fails (red) for block and investigate, and
stays unmaterialized (grey) for none; its `decision` check tells block (ERROR, red) from investigate
and none (WARN, yellow) and carries the reasons to the partition's own panel. `release_board` is one
table of every build with a coloured mark per decision (refreshed by `release_block_sensor`).
"""

import warnings
from pathlib import Path
from typing import Any

import dagster as dg

from eval_assets import release
from eval_assets.capability.builds import Builds
from eval_assets.capability.track import Summary, Track
from eval_assets.defs.capability.metadata import as_metadata, short_path
from eval_assets.defs.conditions import release_decision_condition
from eval_assets.defs.failures import one_line_asset
from eval_assets.defs.links import partition_url, report_url
from eval_assets.defs.partitions import Partitions, build_and_judge, build_partitions
from eval_assets.defs.resources import TrackResource
from eval_assets.present import check_description, reason_counts

with warnings.catch_warnings():  # per-partition check results are a preview feature in Dagster 1.13
    warnings.simplefilter("ignore")
    RELEASE_ALLOWED = dg.AssetCheckSpec(
        "release_allowed",
        asset="release_decision",
        partitions_def=build_partitions,
        description="Per build: the release decision is allow (passes). block fails with ERROR severity; "
        "investigate, and none (no decision, with the reason), fail with WARN. The description names "
        "every reason of the worst severity.",
    )
    APPROVAL_DECISION = dg.AssetCheckSpec(
        "decision",
        asset="release_approval",
        partitions_def=build_partitions,
        description="Per build, the decision at a glance: allow passes (green); block fails with ERROR "
        "(red); investigate and none fail with WARN (yellow). The description names every reason of "
        "the worst severity; the check's Partitions tab shows it on each build's panel.",
    )


def severity(outcome: str) -> dg.AssetCheckSeverity:
    """WARN for an outcome that asks for a look (investigate, none: nothing decided); ERROR otherwise.
    A passing check (allow, ok) is ERROR too: Dagster draws a passed WARN check as a warning."""
    return dg.AssetCheckSeverity.WARN if outcome in ("investigate", "none") else dg.AssetCheckSeverity.ERROR


def release_assets(builds: Builds, parts: Partitions) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """Per build × judge version its noise band and capability report; per build the decision, its
    approval and the block notices; the board over every build."""
    with warnings.catch_warnings():  # per-partition check results are a preview feature in Dagster 1.13
        warnings.simplefilter("ignore")
        no_regression = dg.AssetCheckSpec(
            "no_regression",
            asset="capability_report",
            partitions_def=parts.build_by_judge,
            description="Per build × judge version: the report against the baseline found nothing to block "
            "(ERROR) or investigate (WARN), and could decide (a report that decided nothing fails with WARN).",
        )

    @one_line_asset(
        partitions_def=parts.build_by_judge,
        deps=["judge_verdicts"],
        group_name="release",
        automation_condition=dg.AutomationCondition.eager(),
        description="How far the suite and each scenario move when nothing changed, from the build's own repeats.",
    )
    def noise_bands(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        build, judge_version = build_and_judge(context)
        summary = release.materialize_noise_bands(track.get(), build, judge_version, context.run_id)
        context.log.info(f"suite noise band ±{summary['suite_half_width']} over {summary['scenarios']} scenarios")
        return dg.MaterializeResult(metadata=as_metadata(summary.values, track.get().home.root, judge_version))

    @one_line_asset(
        partitions_def=parts.build_by_judge,
        deps=["judge_verdicts", noise_bands],
        group_name="release",
        automation_condition=dg.AutomationCondition.eager(),
        description="The build against its baseline under ONE judge version: policy, floor drops, mean drop, p10.",
        check_specs=[no_regression],
    )
    def capability_report(context: dg.AssetExecutionContext, track: TrackResource):  # type: ignore[no-untyped-def]
        build, judge_version = build_and_judge(context)
        home = track.get().home.root
        summary = release.materialize_capability_report(track.get(), build, judge_version, context.run_id)
        verdict = summary["verdict"]
        context.log.info(f"report {build} vs {summary['baseline']} under {judge_version}: {verdict}")
        metadata: dict[str, Any] = {"build": build, "judge_version": judge_version}
        metadata |= as_metadata(
            {k: v for k, v in summary.values.items() if k != "reason_rows"}, home, judge_version
        )
        metadata["report"] = dg.MetadataValue.md(summary.markdown)
        metadata["plot_file"] = dg.MetadataValue.path(short_path(summary.files["plot_file"], home))
        yield dg.MaterializeResult(metadata=metadata)
        yield dg.AssetCheckResult(
            check_name="no_regression",
            passed=verdict == "ok",
            severity=severity(verdict),
            metadata={"build": build, "judge_version": judge_version, "verdict": verdict},
            description=check_description(f"{build} under {judge_version}", verdict, summary["reason_rows"]),
        )

    @one_line_asset(
        partitions_def=build_partitions,
        deps=[capability_report, "deterministic_suite"],
        group_name="release",
        automation_condition=release_decision_condition(builds),
        description="allow / investigate / block for the build, with reasons most severe first. "
        "The release_allowed check is red for a blocked build. Decided once every applicable judge "
        "version's evidence is materialized or failed; a failed or missing one makes it none, named.",
        check_specs=[RELEASE_ALLOWED],
    )
    def release_decision(context: dg.AssetExecutionContext, track: TrackResource):  # type: ignore[no-untyped-def]
        build = context.partition_key
        summary = release.materialize_release_decision(
            track.get(),
            build,
            context.run_id,
            report_link=lambda jv: report_url(build, jv),
            evidence_failure=lambda jv: evidence_failure(context.instance, parts, build, jv),
        )
        decision = summary["decision"]
        rows = summary["reason_rows"]
        context.log.info(f"release decision for {build}: {decision}")
        for row in rows:
            text = f"  [{row['severity']}] {row['source']}: {row['message']}"
            if row["severity"] == "block":
                context.log.warning(text)
            elif row["severity"] in ("investigate", "none"):
                context.log.info(text)
        metadata = {
            "build": build,
            "decision": decision,
            "baseline": summary["baseline"],
            "judge_versions": ", ".join(summary["judge_versions"]) or "none active",
            "reasons": dg.MetadataValue.md(summary.markdown),
            "partition": dg.MetadataValue.url(partition_url("release_decision", build)),
        }
        if "html_report" in summary.files:
            # a link the UI draws clickable (a path it draws as text to copy): the page opens without a server
            metadata["html_report"] = dg.MetadataValue.url(Path(summary.files["html_report"]).resolve().as_uri())
        yield dg.MaterializeResult(metadata=metadata)
        counts = reason_counts(rows)
        yield dg.AssetCheckResult(
            check_name="release_allowed",
            passed=decision == "allow",
            severity=severity(decision),
            # counts as text: a numeric key would be plotted as one line across different builds
            metadata={
                "build": build,
                "decision": decision,
                "reasons": ", ".join(f"{n} {s}" for s, n in counts.items()),
            },
            description=check_description(build, "no decision" if decision == "none" else decision, rows),
        )

    release_block_notice = dg.AssetSpec(
        "release_block_notice",
        deps=[release_decision],
        partitions_def=build_partitions,
        group_name="release",
        description="One event per blocked decision, recorded by release_block_sensor when it notifies "
        "(Dagster log, JSONL file, webhook): the build, the decision run and its block reasons.",
    )

    @one_line_asset(
        partitions_def=build_partitions,
        deps=[release_decision],
        group_name="release",
        automation_condition=dg.AutomationCondition.eager(),
        output_required=False,
        check_specs=[APPROVAL_DECISION],
        description="The build may ship: materialized (green) only when its release decision is allow. "
        "block and investigate fail the step (red: may not ship), as does none once the build had been "
        "approved, so an older approval never reads as current; none of a build never approved leaves the "
        "partition unmaterialized (grey: nothing decided). The `decision` check tells block (red) from "
        "investigate and none (yellow) and names the reasons on each build's panel.",
    )
    def release_approval(context: dg.AssetExecutionContext, track: TrackResource):  # type: ignore[no-untyped-def]
        build = context.partition_key
        summary = release.materialize_release_approval(track.get(), build)
        context.log.info(summary["why"])
        decision = summary["decision"]
        shown = {"build": build, "decision": decision, "baseline": summary["baseline"]}
        check = dg.AssetCheckResult(
            check_name="decision",
            passed=summary["approved"],
            severity=severity(decision),
            description=summary["why"],  # the decision and every reason of the worst severity
            metadata=shown,
        )
        if summary["approved"]:
            # after the materialization: an evaluation older than the partition's latest one reads as missing
            yield dg.MaterializeResult(metadata={**shown, "reasons": dg.MetadataValue.md(summary["why"])})
            yield check
            return
        yield check  # before the step fails: the partition's panel shows the decision and its reasons
        if decision in ("block", "investigate") or was_approved(context.instance, build):
            raise dg.Failure(
                description=f"not approved: {summary['why']}",
                metadata={**shown, "approved": False},
                allow_retries=False,
            )
        context.log.info(f"{build}: no decision ({summary['why']}): nothing materialized, nothing blocked")

    @one_line_asset(
        deps=[release_decision],
        group_name="release",
        description="The release board: every registered build with its decision, baseline, reason counts and "
        "a link to its partition. Materialized by `evaltrack run`/`demo`, and refreshed by "
        "release_block_sensor whenever a decision lands.",
    )
    def release_board(context: dg.AssetExecutionContext, track: TrackResource) -> dg.MaterializeResult:
        summary = board_summary(track.get())
        context.log.info(f"{summary['builds']} builds, {len(summary['allowed'])} may ship")
        return dg.MaterializeResult(metadata=board_metadata(summary))

    return [noise_bands, capability_report, release_decision, release_block_notice, release_approval, release_board]


EVIDENCE_CHAIN = ("judge_verdicts", "noise_bands", "capability_report")  # what a report rests on, in order


def evidence_failure(
    instance: dg.DagsterInstance, parts: Partitions, build: str, judge_version: str
) -> str | None:
    """Why judge version `judge_version` of `build` gives no evidence, as this instance knows it: the
    first asset of its chain whose latest materialization failed, or that was never materialized;
    None when the whole chain is materialized."""
    key = dg.MultiPartitionKey({"build": build, "judge_version": judge_version})
    for asset in EVIDENCE_CHAIN:
        status = (instance.get_status_by_partition(dg.AssetKey(asset), [key], parts.build_by_judge) or {}).get(key)
        if status == dg.AssetPartitionStatus.FAILED:
            return f"judge version {judge_version} of build {build} failed: its latest {asset} run failed"
        if status != dg.AssetPartitionStatus.MATERIALIZED:
            return f"judge version {judge_version} of build {build} is not materialized: {asset} [{key}] is missing"
    return None


def was_approved(instance: dg.DagsterInstance, build: str) -> bool:
    """Whether release_approval[build] was ever materialized (an approval a newer decision revokes)."""
    status = (
        instance.get_status_by_partition(dg.AssetKey("release_approval"), [build], build_partitions) or {}
    ).get(build)
    return status == dg.AssetPartitionStatus.MATERIALIZED


def board_summary(track: Track) -> Summary:
    """The board with each build linked to its release_decision partition."""
    return release.materialize_release_board(
        track, partition_link=lambda b: partition_url("release_decision", b)
    )


def board_metadata(summary: Summary) -> dict[str, Any]:
    """The board's metadata: the table (markdown) and who may ship, as text."""
    return {
        "board": dg.MetadataValue.md(summary.markdown),
        "builds": summary["builds"],
        "may_ship": ", ".join(summary["allowed"]) or "none",
        "blocked": ", ".join(summary["blocked"]) or "none",
    }
