"""A build's baseline and the verdicts it is compared on: what the release report compares with, and
what a candidate with adaptive repeats looks at before it tops up (`capability.materialize`)."""

from __future__ import annotations

import pandas as pd

from eval_assets.capability.track import Track
from eval_assets.config import BuildManifest

VERDICT_COLUMNS = "v.scenario_id, v.repeat, v.status, v.score, v.policy_failures"


def verdict_frame(track: Track, build: str, judge_version: str) -> pd.DataFrame:
    """Current verdicts of one build under one judge version (empty frame when there are none).

    `has_output` says whether the subject attempt behind each verdict produced an output (from
    `scenario_runs`; NULL when the run row is missing): policy failures and the evidence figures are
    counted over those attempts (`eval_assets.stats.release_invariant`).
    """
    return track.warehouse.query(
        f"SELECT {VERDICT_COLUMNS}, CASE WHEN r.scenario_id IS NULL THEN NULL "
        "ELSE r.output IS NOT NULL END AS has_output "
        "FROM judge_verdicts v LEFT JOIN scenario_runs r "
        "ON r.build = v.build AND r.scenario_id = v.scenario_id AND r.repeat = v.repeat "
        "WHERE v.build = ? AND v.judge_version = ? ORDER BY v.scenario_id, v.repeat",
        [build, judge_version],
    )


def newest_allowed_build(track: Track, *, excluding: str) -> str | None:
    """The newest build whose recorded decision was `allow` (by when the decision was written)."""
    frame = track.warehouse.query(
        "SELECT build FROM release_decisions WHERE decision = 'allow' AND build <> ? "
        "ORDER BY written_at DESC LIMIT 1",
        [excluding],
    )
    return None if frame.empty else str(frame["build"].iloc[0])


def baseline_for(track: Track, manifest: BuildManifest) -> str | None:
    """The manifest's baseline, else the newest build whose decision was allow, else None."""
    return manifest.baseline or newest_allowed_build(track, excluding=manifest.id)
