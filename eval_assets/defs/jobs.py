"""Named jobs, so the run timeline and partition pages say what ran instead of "Jobless".

The capability track's roots (the build's subject runs and its deterministic suite) run together
when a build arrives or the nightly schedule fires; judging and reports run per build × judge
version; the release decision per build. `evaltrack run` / `demo` launch these same jobs.
"""

import dagster as dg

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

# one job per entry of `selections.JOBS`; each is partitioned as the assets it selects
JOB_DEFINITIONS = [
    dg.define_asset_job(
        CAPABILITY_TRACK,
        selection=list(JOBS[CAPABILITY_TRACK]),
        description="A build's subject runs and its deterministic suite; judging, reports and the decision "
        "follow by automation.",
    ),
    dg.define_asset_job(
        JUDGING,
        selection=list(JOBS[JUDGING]),
        description="One judge version over a build: verdicts, cost ledger, noise band, capability report.",
    ),
    dg.define_asset_job(
        DETERMINISTIC_SUITE,
        selection=list(JOBS[DETERMINISTIC_SUITE]),
        description="The gate registry at the build's milestone.",
    ),
    dg.define_asset_job(
        RELEASE_DECISION,
        selection=list(JOBS[RELEASE_DECISION]),
        description="allow / investigate / block for a build from every judge version's report and the suite; "
        "release_approval materializes only for allow.",
    ),
    dg.define_asset_job(
        RELEASE_BOARD,
        selection=list(JOBS[RELEASE_BOARD]),
        description="The release board: every build's decision, baseline and reason counts in one table.",
    ),
    dg.define_asset_job(
        SCORE_TREND,
        selection=list(JOBS[SCORE_TREND]),
        description="The score trend of one judge version over every registered build (splices and breaks).",
    ),
    dg.define_asset_job(
        BRIDGE_RUN,
        selection=list(JOBS[BRIDGE_RUN]),
        description="A bridge run: the new judge version and the one it bridges from score the same stored "
        "outputs; the offset is published only when the acceptance holds (`evaltrack bridge run`).",
    ),
]
