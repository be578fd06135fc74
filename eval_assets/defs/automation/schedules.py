"""The nightly schedule: the newest build's runs; judge versions and the decision follow by automation."""

import dagster as dg

from eval_assets.defs.automation.sensors import BUILD_ROOT_ASSETS
from eval_assets.defs.project import PROJECT
from eval_assets.defs.resources import TrackResource


@dg.schedule(
    name="nightly_capability_track",
    cron_schedule=PROJECT.settings.nightly_cron,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    target=BUILD_ROOT_ASSETS,
    description="Every night: the newest registered build, every active judge version, then the decision.",
)
def nightly_capability_track(
    context: dg.ScheduleEvaluationContext, track: TrackResource
) -> dg.RunRequest | dg.SkipReason:
    builds = track.track.builds_by_registration()
    if not builds:
        return dg.SkipReason("no build registered yet")
    newest = builds[-1]
    tick = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return dg.RunRequest(
        run_key=f"nightly-{newest}-{tick}",
        partition_key=newest,
        asset_selection=BUILD_ROOT_ASSETS,
        tags={"evaltrack/trigger": "nightly"},
    )
