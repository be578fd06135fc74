"""Automation conditions of the per-judge-version assets and of the release decision.

A build is scored only by the judge versions that apply to it (its manifest's `judges:`, else every
active version): `judge_version_applies` keeps eager automation off every other `judge_version`
partition. The release decision fires once every applicable judge version's evidence has settled,
materialized or failed, so one failing version never leaves the decision waiting; the decision then
names what is missing (eval_assets/release.py). `judge_version_applies` runs Python (it reads the
build's manifest), so the automation sensor evaluates on the code server (`use_user_code_server`).
"""

from __future__ import annotations

import dagster as dg

from eval_assets.capability.builds import Builds


def judge_version_applies(builds: Builds) -> dg.AutomationCondition:
    """True for a build × judge version partition whose judge version scores the build (read from the
    build's manifest in `builds`); true for any other target (an asset partitioned by build alone)."""
    return _JudgeVersionApplies(builds)


class _JudgeVersionApplies(dg.AutomationCondition):
    def __init__(self, builds: Builds) -> None:
        super().__init__()
        self._builds = builds

    @property
    def name(self) -> str:
        return "judge_version_applies"

    @property
    def description(self) -> str:
        return "the judge version scores the build (its manifest's judges, else every active version)"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:  # type: ignore[override]
        candidates = context.candidate_subset
        if not isinstance(context.partitions_def, dg.MultiPartitionsDefinition):
            return dg.AutomationResult(context=context, true_subset=candidates)
        builds = self._builds
        versions: dict[str, frozenset[str]] = {}
        applies = set()
        for key in candidates.expensively_compute_partition_keys():
            assert isinstance(key, dg.MultiPartitionKey)
            build, judge_version = key.keys_by_dimension["build"], key.keys_by_dimension["judge_version"]
            if build not in versions:
                versions[build] = builds.judge_versions(build)
            if judge_version in versions[build]:
                applies.add(key)
        return dg.AutomationResult(
            context=context, true_subset=candidates.compute_intersection_with_partition_keys(applies)
        )


def judge_version_eager(builds: Builds) -> dg.AutomationCondition:
    """Eager, on the judge versions that apply to the build only."""
    return (dg.AutomationCondition.eager() & judge_version_applies(builds)).with_label(
        "eager, applicable judge version"
    )


def _unsettled(builds: Builds) -> dg.AutomationCondition:
    """An upstream partition the decision cannot be made on yet: applicable, and either something of
    it in progress, or missing without a failure (of itself or one of its own upstreams)."""
    failed = dg.AutomationCondition.execution_failed() | dg.AutomationCondition.any_deps_match(
        dg.AutomationCondition.execution_failed()
    )
    busy = dg.AutomationCondition.in_progress() | dg.AutomationCondition.any_deps_in_progress()
    pending = dg.AutomationCondition.missing() & ~failed
    return (judge_version_applies(builds) & (busy | pending)).with_label(
        "applicable evidence not yet materialized or failed"
    )


def release_decision_condition(builds: Builds) -> dg.AutomationCondition:
    """Decide when something upstream changed and every applicable upstream partition has settled
    (materialized or failed): never waits on a judge version that does not apply, nor forever on one
    that failed. (`any_deps_match` holds when any one mapped upstream partition matches, so "all
    settled" is "none unsettled".)"""
    return (
        dg.AutomationCondition.any_deps_updated()
        .since_last_handled()
        .with_label("new evidence since last decision")
        & ~dg.AutomationCondition.any_deps_match(_unsettled(builds))
        & ~dg.AutomationCondition.in_progress()
    ).with_label("decide on settled evidence")
