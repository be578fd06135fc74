"""Named jobs, so the run timeline and partition pages say what ran instead of "Jobless".

The capability track's roots (the build's subject runs and its deterministic suite) run together
when a build arrives or the nightly schedule fires; judging and reports run per build × judge
version; the release decision per build. `evaltrack run` / `demo` launch these same jobs.
"""

import dagster as dg

from eval_assets.defs.partitions import build_by_judge, build_partitions, judge_version_partitions
from eval_assets.defs.selections import (
    BRIDGE_RUN,
    CAPABILITY_TRACK,
    DETERMINISTIC_SUITE,
    JOBS,
    JUDGING,
    RELEASE_BOARD,
    RELEASE_DECISION,
    SCORE_TREND,
)

capability_track = dg.define_asset_job(
    CAPABILITY_TRACK,
    selection=list(JOBS[CAPABILITY_TRACK]),
    partitions_def=build_partitions,
    description="A build's subject runs and its deterministic suite; judging, reports and the decision "
    "follow by automation.",
)
judge_and_report = dg.define_asset_job(
    JUDGING,
    selection=list(JOBS[JUDGING]),
    partitions_def=build_by_judge,
    description="One judge version over a build: verdicts, cost ledger, noise band, capability report.",
)
deterministic_suite_job = dg.define_asset_job(
    DETERMINISTIC_SUITE,
    selection=list(JOBS[DETERMINISTIC_SUITE]),
    partitions_def=build_partitions,
    description="The gate registry at the build's milestone.",
)
release_decision_job = dg.define_asset_job(
    RELEASE_DECISION,
    selection=list(JOBS[RELEASE_DECISION]),
    partitions_def=build_partitions,
    description="allow / investigate / block for a build from every judge version's report and the suite; "
    "release_approval materializes only for allow.",
)
release_board_job = dg.define_asset_job(
    RELEASE_BOARD,
    selection=list(JOBS[RELEASE_BOARD]),
    description="The release board: every build's decision, baseline and reason counts in one table.",
)
score_trend_job = dg.define_asset_job(
    SCORE_TREND,
    selection=list(JOBS[SCORE_TREND]),
    partitions_def=judge_version_partitions,
    description="The score trend of one judge version over every registered build (splices and breaks).",
)
bridge_run_job = dg.define_asset_job(
    BRIDGE_RUN,
    selection=list(JOBS[BRIDGE_RUN]),
    partitions_def=judge_version_partitions,
    description="A bridge run: the new judge version and the one it bridges from score the same stored "
    "outputs; the offset is published only when the acceptance holds (`evaltrack bridge run`).",
)
