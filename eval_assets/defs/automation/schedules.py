"""The nightly schedule: the newest build's runs; judge versions and the decision follow by automation."""

from datetime import UTC, datetime

import dagster as dg

from eval_assets.defs.automation.sensors import BUILD_ROOT_ASSETS
from eval_assets.defs.jobs import CAPABILITY_TRACK
from eval_assets.defs.resources import TrackResource

NIGHTLY = "nightly_capability_track"


def nightly_schedule(cron: str) -> dg.ScheduleDefinition:
    """The nightly schedule on `cron` (UTC): evaltrack.yaml's `nightly_cron`, default 02:00."""

    @dg.schedule(
        name=NIGHTLY,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        job_name=CAPABILITY_TRACK,
        description="Every night: the newest registered build, every active judge version, then the decision.",
    )
    def nightly_capability_track(
        context: dg.ScheduleEvaluationContext, track: TrackResource
    ) -> dg.RunRequest | dg.SkipReason:
        loadable = set(track.get().builds.loadable(context.log.warning))
        builds = [b for b in track.get().builds_by_registration() if b in loadable]
        if not builds:
            return dg.SkipReason("no build registered yet")
        newest = builds[-1]
        tick = (context.scheduled_execution_time or datetime.now(UTC)).strftime("%Y-%m-%d")
        return dg.RunRequest(
            run_key=f"nightly-{newest}-{tick}",
            partition_key=newest,
            asset_selection=BUILD_ROOT_ASSETS,
            tags={"evaltrack/trigger": "nightly"},
        )

    return nightly_capability_track
