"""What each named job materializes: one table, read by the jobs (`defs/jobs.py`) and by the CLI, which
launches the same jobs step by step (`cli/orchestrate.py`). Plain data: importing it loads neither
Dagster nor the project, so a command module may import it before `--project` is read."""

from collections.abc import Mapping
from types import MappingProxyType

CAPABILITY_TRACK = "capability_track"
JUDGING = "judge_and_report"
DETERMINISTIC_SUITE = "deterministic_suite_job"
RELEASE_DECISION = "release_decision_job"
SCORE_TREND = "score_trend_job"
RELEASE_BOARD = "release_board_job"
BRIDGE_RUN = "bridge_run_job"

JOBS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        CAPABILITY_TRACK: ("scenario_runs", "deterministic_suite"),
        JUDGING: ("judge_verdicts", "cost_ledger", "noise_bands", "capability_report"),
        DETERMINISTIC_SUITE: ("deterministic_suite",),
        RELEASE_DECISION: ("release_decision", "release_approval"),
        RELEASE_BOARD: ("release_board",),
        SCORE_TREND: ("score_trend",),
        BRIDGE_RUN: ("calibration_offsets",),
    }
)
"""job name -> the assets it selects, in the order the CLI materializes them."""

JOB_OF: Mapping[str, str] = MappingProxyType(
    {
        asset: min((job for job, assets in JOBS.items() if asset in assets), key=lambda job: len(JOBS[job]))
        for assets in JOBS.values()
        for asset in assets
    }
)
"""asset -> the smallest job that selects it: the job a CLI step of that asset runs in (so the UI never
says "Jobless")."""

PER_BUILD_RUN_ASSETS = tuple(a for a in JOBS[CAPABILITY_TRACK] if a not in JOBS[DETERMINISTIC_SUITE])
"""The build's first step: its subject runs and whatever is made from them alone."""

PER_JUDGE_ASSETS = JOBS[JUDGING]
"""One step per build × judge version."""

PER_BUILD_FINAL_ASSETS = JOBS[DETERMINISTIC_SUITE] + JOBS[RELEASE_DECISION]
"""The per-build steps after judging, one asset each, in order."""
