"""Sensors: new builds start the graph; landed decisions are recorded and, on block, notified."""

from typing import Any

import dagster as dg

from eval_assets.config import ConfigError
from eval_assets.defs.capability.assets import scenario_runs
from eval_assets.defs.partitions import build_partitions
from eval_assets.defs.resources import NotificationResource, TrackResource
from eval_assets.notify import DecisionNotice
from eval_assets.track import TrackError

BUILD_ROOT_ASSETS = [scenario_runs.key, dg.AssetKey("deterministic_suite")]


@dg.sensor(
    name="build_sensor",
    description="Watches $EVAL_HOME/builds/ (where `evaltrack build add` writes): adds the build partition "
    "and starts its runs; judge versions, reports and the decision follow by their automation conditions.",
    minimum_interval_seconds=10,
    default_status=dg.DefaultSensorStatus.RUNNING,
    asset_selection=BUILD_ROOT_ASSETS,
)
def build_sensor(context: dg.SensorEvaluationContext, track: TrackResource) -> dg.SensorResult:
    known = set(context.instance.get_dynamic_partitions(build_partitions.name or "build"))
    valid, new = [], []
    for build_id in track.track.registered_builds():
        try:
            track.track.build(build_id)
        except (ConfigError, TrackError) as exc:
            context.log.warning(f"skipping build {build_id}: {exc}")
            continue
        valid.append(build_id)
        if build_id not in known:
            new.append(build_id)
    requests = [
        dg.RunRequest(run_key=f"build-{b}", partition_key=b, asset_selection=BUILD_ROOT_ASSETS) for b in valid
    ]
    if new:
        context.log.info(f"new builds: {', '.join(new)}")
    return dg.SensorResult(
        run_requests=requests,  # run keys make this idempotent: a build's runs are requested once
        dynamic_partitions_requests=[build_partitions.build_add_request(new)] if new else [],
    )


@dg.asset_sensor(
    asset_key=dg.AssetKey("release_decision"),
    name="release_block_sensor",
    description="Records every release decision that lands; notifies on block, once per decision.",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=10,
)
def release_block_sensor(
    context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry, notifications: NotificationResource
) -> dg.SkipReason:
    event = asset_event.dagster_event
    assert event is not None and event.step_materialization_data is not None
    materialization = event.step_materialization_data.materialization
    meta: dict[str, Any] = {k: v.value for k, v in materialization.metadata.items()}
    notice = DecisionNotice(
        build=str(materialization.partition),
        decision=str(meta.get("decision")),
        reasons=[str(r) for r in (meta.get("reasons") or [])],
        run_id=asset_event.run_id,
    )
    context.log.info(f"release decision for {notice.build}: {notice.decision}")
    if notice.decision != "block":
        return dg.SkipReason(f"{notice.build}: {notice.decision}, nothing to notify")
    for reason in notice.reasons:
        context.log.warning(f"BLOCK {notice.build}: {reason}")
    sinks = notifications.notifier().send(notice)
    return dg.SkipReason(f"{notice.build}: block notified via log{''.join(', ' + s for s in sinks)}")
