"""Sensors: new builds start the graph; landed decisions are recorded and, on block, notified.

Downstream of the build roots everything moves by eager automation conditions, which only run while
an automation condition sensor is running: `automation_condition_sensor` declares Dagster's default
one as running from the start (Dagster's implicit default sensor starts stopped on a new instance).
"""

from collections.abc import Callable
from typing import Any

import dagster as dg

from eval_assets.config import ConfigError
from eval_assets.defs.capability.assets import scenario_runs
from eval_assets.defs.partitions import build_partitions
from eval_assets.defs.resources import NotificationResource, TrackResource
from eval_assets.notify import DecisionNotice, NotifyError
from eval_assets.track import Track, TrackError

BUILD_ROOT_ASSETS = [scenario_runs.key, dg.AssetKey("deterministic_suite")]
RELEASE_DECISION = dg.AssetKey("release_decision")
DECISIONS_PER_TICK = 100


def loadable_builds(track: Track, warn: Callable[[str], None]) -> list[str]:
    """Registered builds (by id) whose manifest loads and names itself like its file; others are
    skipped with a warning, so one bad file in builds/ never stops the others."""
    valid = []
    for build_id in track.registered_builds():
        try:
            manifest = track.build(build_id)
        except (ConfigError, TrackError) as exc:
            warn(f"skipping build {build_id}: {exc}")
            continue
        if manifest.id != build_id:
            warn(
                f"skipping build {build_id}: its manifest says id {manifest.id!r}; register it with `evaltrack build add`"
            )
            continue
        valid.append(build_id)
    return valid


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
    valid = loadable_builds(track.track, context.log.warning)
    new = [b for b in valid if b not in known]
    requests = [
        dg.RunRequest(run_key=f"build-{b}", partition_key=b, asset_selection=BUILD_ROOT_ASSETS) for b in valid
    ]
    if new:
        context.log.info(f"new builds: {', '.join(new)}")
    return dg.SensorResult(
        run_requests=requests,  # run keys make this idempotent: a build's runs are requested once
        dynamic_partitions_requests=[build_partitions.build_add_request(new)] if new else [],
    )


def notice_from(record: dg.EventLogRecord) -> DecisionNotice:
    event = record.event_log_entry.dagster_event
    assert event is not None and event.step_materialization_data is not None
    materialization = event.step_materialization_data.materialization
    meta: dict[str, Any] = {k: v.value for k, v in materialization.metadata.items()}
    return DecisionNotice(
        build=str(materialization.partition),
        decision=str(meta.get("decision")),
        reasons=[str(r) for r in (meta.get("reasons") or [])],
        run_id=record.run_id,
    )


@dg.sensor(
    name="release_block_sensor",
    description="Records every release decision that lands; notifies on block, once per decision.",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=10,
)
def release_block_sensor(
    context: dg.SensorEvaluationContext, notifications: NotificationResource
) -> dg.SkipReason:
    """Every `release_decision` materialization after the cursor, oldest first (not only the newest,
    as `@asset_sensor` would: two decisions landing within one interval are both handled).

    The cursor advances past each decision once it is handled; a failed webhook stops the tick
    there, so that decision is retried on the next tick. The sinks skip a decision they already hold.
    """
    try:
        after = int(context.cursor) if context.cursor else None
    except ValueError:
        after = None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RELEASE_DECISION, after_storage_id=after),
        limit=DECISIONS_PER_TICK,
        ascending=True,
    ).records
    if not records:
        return dg.SkipReason("no new release decision")
    notifier = notifications.notifier()
    done = []
    for record in records:
        notice = notice_from(record)
        context.log.info(f"release decision for {notice.build}: {notice.decision} (run {notice.run_id})")
        if notice.decision == "block":
            for reason in notice.reasons:
                context.log.warning(f"BLOCK {notice.build}: {reason}")
            try:
                sinks = notifier.send(notice)
            except NotifyError as exc:
                context.log.error(f"notifying the block of {notice.build} failed, retrying next tick: {exc}")
                break
            done.append(f"{notice.build}: block notified via log{''.join(', ' + s for s in sinks)}")
        else:
            done.append(f"{notice.build}: {notice.decision}, nothing to notify")
        context.update_cursor(str(record.storage_id))
    return dg.SkipReason("; ".join(done) or "a notification failed; retrying next tick")


automation_condition_sensor = dg.AutomationConditionSensorDefinition(
    "default_automation_condition_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates the eager automation conditions: judge verdicts, ledgers, noise bands, "
    "reports and the release decision follow a build's runs without anyone starting them.",
)
