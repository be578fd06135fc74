"""A build's baseline and the verdicts it is compared on: what the release report compares with, and
what a candidate with adaptive repeats looks at before it tops up (`capability.materialize`); the
design a build's subject run looked under, as its stored rows record it."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from eval_assets.capability.errors import TrackError
from eval_assets.capability.track import Track
from eval_assets.config import BuildManifest
from eval_assets.stats import AdaptiveDesign, NoiseBand, Reliability, noise_band, reliability

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


def build_reliability(track: Track, build: str, judge_version: str) -> list[Reliability]:
    """The build's pass@k and pass^k per scenario and per suite under one judge version: the one
    definition (`stats.reliability`) over its current verdicts, what the warehouse rows, the HTML report,
    `compare` and the release board all show."""
    floor = track.project.rubric_for(track.judge(judge_version)).floor
    suite_of = {sid: s.suite for sid, s in track.project.scenarios.items()}
    return reliability(verdict_frame(track, build, judge_version), floor, suite_of)


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


def run_design(track: Track, build: str) -> AdaptiveDesign | None:
    """The adaptive design `build`'s subject run looked under, as its `scenario_runs` rows record it
    (`adaptive_start`, `adaptive_maximum`); None when it ran the fixed count (the columns NULL, or
    absent: no run in this home wrote them). What the run did, not what the project says now, so a
    stored build's decision does not change when `repeats` is switched after it ran.

    Raises TrackError when the build's rows record more than one design, or half of one."""
    columns = set(track.warehouse.query("SELECT * FROM scenario_runs LIMIT 0").columns)
    if not {"adaptive_start", "adaptive_maximum"} <= columns:
        return None
    frame = track.warehouse.query(
        "SELECT DISTINCT adaptive_start, adaptive_maximum FROM scenario_runs WHERE build = ?", [build]
    )
    designs = {
        (None if pd.isna(s) else int(s), None if pd.isna(m) else int(m))
        for s, m in zip(frame["adaptive_start"], frame["adaptive_maximum"], strict=True)
    }
    if designs <= {(None, None)}:
        return None
    if len(designs) > 1 or None in next(iter(designs)):
        raise TrackError(
            f"scenario_runs of build {build!r}: adaptive_start, adaptive_maximum record "
            f"{sorted(designs, key=str)}, not one complete design; the run's looks cannot be read back"
        )
    ((start, maximum),) = designs
    assert start is not None and maximum is not None
    return AdaptiveDesign(start=start, maximum=maximum)


def registered_manifests(track: Track) -> dict[str, BuildManifest]:
    """Every registered build's manifest, resolved once (for one materialization); an unreadable
    manifest is left out: it is not a rebuild anyone can use."""
    out = {}
    for other in track.registered_builds():
        try:
            out[other] = track.build(other)
        except Exception:  # an unreadable manifest is not a rebuild anyone can use  # noqa: BLE001
            continue
    return out


def rebuild_of(
    track: Track,
    build: str,
    judge_version: str,
    excluding: str | None = None,
    registered: Mapping[str, BuildManifest] | None = None,
) -> tuple[str, pd.DataFrame] | None:
    """A registered unchanged rebuild of `build` (manifest `rebuild_of: build`) with verdicts under
    `judge_version`: (its id, its verdicts), the first by id; None when there is none.
    `registered`: the manifests already resolved for this materialization (else resolved here)."""
    manifests = registered if registered is not None else registered_manifests(track)
    for other, manifest in sorted(manifests.items()):
        if other in (build, excluding):  # never the candidate itself: it would be its own noise reference
            continue
        if manifest.rebuild_of == build:
            frame = verdict_frame(track, other, judge_version)
            if not frame.empty:
                return other, frame
    return None


def band_for(
    track: Track,
    build: str,
    judge_version: str,
    frame: pd.DataFrame,
    excluding: str | None = None,
    registered: Mapping[str, BuildManifest] | None = None,
) -> NoiseBand:
    """The build's noise band, with the run-to-run variance of a registered unchanged rebuild if any
    (other than `excluding`, the candidate being compared)."""
    rebuild = rebuild_of(track, build, judge_version, excluding, registered)
    return noise_band(frame, rebuild=None if rebuild is None else rebuild[1])
