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

DESCRIPTIONS = {
    CAPABILITY_TRACK: "A build's subject runs and its deterministic suite; judging, reports and the decision "
        "follow by automation.",
    JUDGING: "One judge version over a build: verdicts, cost ledger, noise band, capability report.",
    DETERMINISTIC_SUITE: "The gate registry at the build's milestone.",
    RELEASE_DECISION: "allow / investigate / block for a build from every judge version's report and the suite; "
        "release_approval materializes only for allow.",
    RELEASE_BOARD: "The release board: every build's decision, baseline and reason counts in one table.",
    SCORE_TREND: "The score trend of one judge version over every registered build (splices and breaks).",
    BRIDGE_RUN: "A bridge run: the new judge version and the one it bridges from score the same stored "
        "outputs; the offset is published only when the acceptance holds (`evaltrack bridge run`).",
}

# one job per entry of `selections.JOBS`; each is partitioned as the assets it selects
JOB_DEFINITIONS = [
    dg.define_asset_job(name, selection=list(assets), description=DESCRIPTIONS[name])
    for name, assets in JOBS.items()
]
