"""Sensors: new builds start the graph; landed decisions are recorded and, on block, notified.

Downstream of the build roots everything moves by eager automation conditions, which only run while
an automation condition sensor is running: `automation_condition_sensor` declares Dagster's default
one as running from the start (Dagster's implicit default sensor starts stopped on a new instance).
"""

import warnings

import dagster as dg

from eval_assets.capability.track import Track
from eval_assets.defs.jobs import CAPABILITY_TRACK
from eval_assets.defs.partitions import build_partitions
from eval_assets.defs.release.assets import board_metadata, board_summary
from eval_assets.defs.resources import NotificationResource, TrackResource
from eval_assets.notify import DecisionNotice, NotifyError
from eval_assets.present import recorded_reasons

SCENARIO_RUNS = dg.AssetKey("scenario_runs")
BUILD_ROOT_ASSETS = [SCENARIO_RUNS, dg.AssetKey("deterministic_suite")]
RELEASE_DECISION = dg.AssetKey("release_decision")
RELEASE_BLOCK_NOTICE = dg.AssetKey("release_block_notice")
RELEASE_BOARD = dg.AssetKey("release_board")
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
DECISIONS_PER_TICK = 100


def already_started(instance: dg.DagsterInstance, builds: list[str]) -> set[str]:
    """Builds whose subject runs exist or are under way, however they were launched (the build sensor,
    the nightly schedule, `evaltrack run` / `demo`, the UI): a materialized `scenario_runs`
    partition (any generation: a fresh generation is only ever asked for explicitly), or a run of
    that partition still in progress."""
    done = set(instance.get_materialized_partitions(SCENARIO_RUNS)) & set(builds)
    running = instance.get_runs(filters=dg.RunsFilter(statuses=IN_PROGRESS))
    for run in running:
        partition = run.tags.get("dagster/partition")
        selection = run.asset_selection
        runs_subject = SCENARIO_RUNS in selection if selection else run.job_name == CAPABILITY_TRACK
        if partition in builds and runs_subject:
            done.add(partition)
    return done


@dg.sensor(
    name="build_sensor",
    description="Watches $EVAL_HOME/builds/ (where `evaltrack build add` writes): adds the build partition "
    "and starts its capability_track run, once; a build whose subject runs already exist (however "
    "launched) is not started again. Judge versions, reports and the decision follow by automation.",
    minimum_interval_seconds=10,
    default_status=dg.DefaultSensorStatus.RUNNING,
    job_name=CAPABILITY_TRACK,
)
def build_sensor(context: dg.SensorEvaluationContext, track: TrackResource) -> dg.SensorResult:
    known = set(context.instance.get_dynamic_partitions(build_partitions.name or "build"))
    valid = track.get().builds.loadable(context.log.warning)
    new = [b for b in valid if b not in known]
    started = already_started(context.instance, valid)
    requests = [
        dg.RunRequest(run_key=f"build-{b}", partition_key=b, asset_selection=BUILD_ROOT_ASSETS)
        for b in valid
        if b not in started
    ]
    if new:
        context.log.info(f"new builds: {', '.join(new)}")
    skip = None if requests or new else f"no new build ({len(started)} already have their subject runs)"
    return dg.SensorResult(
        run_requests=requests,  # run keys make this idempotent too: a build's runs are requested once
        dynamic_partitions_requests=[build_partitions.build_add_request(new)] if new else [],
        skip_reason=skip,
    )


def decision_of(record: dg.EventLogRecord) -> tuple[str, str]:
    """(build, decision) of a `release_decision` materialization record."""
    event = record.event_log_entry.dagster_event
    assert event is not None and event.step_materialization_data is not None
    materialization = event.step_materialization_data.materialization
    decision = materialization.metadata.get("decision")
    return str(materialization.partition), str(decision.value if decision is not None else "unknown")


def notice_from(record: dg.EventLogRecord, track: Track) -> DecisionNotice:
    """The notice of a decision: its block reasons come from the warehouse rows its run wrote."""
    build, decision = decision_of(record)
    rows = recorded_reasons(track.warehouse, build, record.run_id)
    reasons = [f"[{r['severity']}] {r['source']}: {r['message']}" for r in rows if r["severity"] == "block"]
    if decision == "block" and not reasons:  # fail closed: never a silent block
        reasons = [f"[block] the reasons of run {record.run_id} are not in the warehouse"]
    return DecisionNotice(build=build, decision=decision, reasons=reasons, run_id=record.run_id)


def notified_keys(instance: dg.DagsterInstance, build: str) -> set[str]:
    """Keys of the notices already recorded as `release_block_notice` events for this build."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RELEASE_BLOCK_NOTICE, asset_partitions=[build]), limit=1000
    ).records
    keys = set()
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is not None and event.step_materialization_data is not None:
            key = event.step_materialization_data.materialization.metadata.get("notice_key")
            if key is not None:
                keys.add(str(key.value))
    return keys


def notice_event(notice: DecisionNotice, sinks: list[str]) -> dg.AssetMaterialization:
    lines = "\n".join(f"- {r}" for r in notice.reasons)
    return dg.AssetMaterialization(
        asset_key=RELEASE_BLOCK_NOTICE,
        partition=notice.build,
        description=f"release of {notice.build} blocked (decision run {notice.run_id[:8]})",
        metadata={
            "build": notice.build,
            "decision": notice.decision,
            "decision_run": dg.MetadataValue.dagster_run(notice.run_id),
            "notice_key": notice.key,
            "sent_to": ", ".join(["log", *sinks]),
            "block_reasons": dg.MetadataValue.md(f"**{notice.build}: block**\n\n{lines}\n"),
        },
    )


@dg.sensor(
    name="release_block_sensor",
    description="Records every release decision that lands; notifies a block once per (build, decision "
    "run), across restarts, and records each notice as a release_block_notice event; refreshes the "
    "release_board after the decisions of a tick.",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=10,
)
def release_block_sensor(
    context: dg.SensorEvaluationContext, notifications: NotificationResource, track: TrackResource
) -> dg.SensorResult:
    """Every `release_decision` materialization after the cursor, oldest first (not only the newest,
    as `@asset_sensor` would: two decisions landing within one interval are both handled).

    Exactly once per (build, decision run): the cursor (the last handled event's storage id) is
    stored by Dagster with the tick, so a daemon or UI restart resumes after it; a decision whose
    `release_block_notice` event already exists is not sent again (the JSONL sink also skips a
    key it holds), which covers a restart between sending and storing the cursor. A failed webhook
    stops the tick there, so that decision is retried on the next tick.
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
        return dg.SensorResult(skip_reason="no new release decision")
    notifier = notifications.notifier()
    done, events = [], []
    for record in records:
        build, decision = decision_of(record)
        context.log.info(f"release decision for {build}: {decision} (run {record.run_id})")
        if decision == "block":
            notice = notice_from(record, track.get())
            if notice.key in notified_keys(context.instance, build):
                done.append(f"{build}: block already notified")
                context.update_cursor(str(record.storage_id))
                continue
            for reason in notice.reasons:
                context.log.warning(f"BLOCK {build}: {reason}")
            try:
                sinks = notifier.send(notice)
            except NotifyError as exc:
                context.log.error(f"notifying the block of {build} failed, retrying next tick: {exc}")
                break
            events.append(notice_event(notice, sinks))
            done.append(f"{build}: block notified via log{''.join(', ' + s for s in sinks)}")
        else:
            done.append(f"{build}: {decision}, nothing to notify")
        context.update_cursor(str(record.storage_id))
    if done:  # at least one decision handled: the board shows it
        board = board_summary(track.get())
        events.append(
            dg.AssetMaterialization(
                asset_key=RELEASE_BOARD,
                description=f"refreshed after {len(done)} decision(s)",
                metadata=board_metadata(board),
            )
        )
    return dg.SensorResult(
        skip_reason="; ".join(done) or "a notification failed; retrying next tick", asset_events=events
    )


with warnings.catch_warnings():  # use_user_code_server is a beta parameter in Dagster 1.13
    warnings.simplefilter("ignore", dg.BetaWarning)
    automation_condition_sensor = dg.AutomationConditionSensorDefinition(
        "default_automation_condition_sensor",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        # the judge-version condition reads build manifests (Python): evaluated on the code server
        use_user_code_server=True,
        description="Evaluates the eager automation conditions: judge verdicts, ledgers, noise bands, "
        "reports and the release decision follow a build's runs without anyone starting them.",
    )
