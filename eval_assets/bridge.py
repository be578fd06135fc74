"""Bridge runs: a new judge version and the version it replaces score the same stored outputs.

`run_bridge` is one materialization of `calibration_offsets` [judge_to]: for a judge version that
declares `bridges_from`, it makes sure both versions have current verdicts on the bridge builds
(reusing existing ones), pairs the outputs both versions scored, computes docs/methods.md: bridges with
`eval_assets.stats.calibrate`, and writes one row through the one partition writer.
`published_offset` is what release decisions and trend views read: a bridging version is not used
by a release decision until its offset is published, and only trend views ever apply it.

Rubric points (the unit of the figures): for a rubric whose criteria all share ONE numeric scale
[lo, hi], an output's points are the weighted mean of its criterion values on that scale, which is
lo + normalised score * (hi - lo); a sim judge `bias` of b points on every criterion moves it by b.
Any other rubric (label or bool criteria, or numeric criteria on different scales) has no shared
point: its figures are on the normalised [0, 1] score and one rubric point is defined as
`NORMALISED_POINT_SIZE` (a quarter of the range, the size of one point on a 1-5 scale), so the
acceptance "CI half-width <= 0.5 rubric points" is <= 0.125 there.
This convention, and the statistics, are written down in docs/methods.md ("Bridges").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval_assets.config import FloatScale, IntScale, Judge, Rubric
from eval_assets.judging import check_criteria
from eval_assets.warehouse import Warehouse

# a bridge run's materialization and statistics are imported by `run_bridge` and `launch_bridge`:
# the readers of a published offset (the review queue's command, release-status) need neither
if TYPE_CHECKING:
    from eval_assets.capability.rows import Summary
    from eval_assets.capability.track import Track
    from eval_assets.stats import Calibration

Log = Callable[[str], None]
NORMALISED_POINT_SIZE = 0.25
DEFAULT_BRIDGE_BUILDS = 3


BRIDGE_BUILDS_TAG = "evaltrack/bridge_builds"
"""The run tag naming a bridge run's builds (comma-joined), set by `evaltrack bridge run --builds`."""


class BridgeError(Exception):
    """A bridge that cannot run (no bridges_from, no builds, incompatible rubrics); says why."""


@dataclass(frozen=True)
class PointScale:
    """The unit calibration figures are in: [low, high], and one rubric point in those units."""

    low: float
    high: float
    point_size: float
    unit: str


def point_scale(rubric: Rubric) -> PointScale:
    """Rubric points [lo, hi] when every criterion shares one numeric scale, else the normalised score."""
    scales = [c.scale for c in rubric.criteria]
    numeric = [s for s in scales if isinstance(s, IntScale | FloatScale)]
    if len(numeric) == len(scales) and len({(float(s.min), float(s.max)) for s in numeric}) == 1:
        lo, hi = float(numeric[0].min), float(numeric[0].max)
        return PointScale(lo, hi, 1.0, f"rubric points [{lo:g}, {hi:g}]")
    return PointScale(
        0.0, 1.0, NORMALISED_POINT_SIZE, f"normalised score [0, 1] (1 point = {NORMALISED_POINT_SIZE:g})"
    )


def rubric_points(criteria: Mapping[str, Any], rubric: Rubric) -> float:
    """One output's score in `point_scale(rubric)` units, from its criterion values.

    The values are validated with the verdict parser's own checks; invalid values raise ValueError
    (a stored verdict that no longer validates is corrupt data, never a silent score).
    """
    verdict = check_criteria(dict(criteria), rubric)
    if verdict.status != "scored" or verdict.score is None:
        raise ValueError(f"criteria do not validate against {rubric.key}: {verdict.failure_reason}")
    scale = point_scale(rubric)
    return scale.low + verdict.score * (scale.high - scale.low)


# --- warehouse reads ----------------------------------------------------------------------------


def _runs_written_at(warehouse: Warehouse) -> dict[str, pd.Timestamp]:
    frame = warehouse.query("SELECT build, max(written_at) AS at FROM scenario_runs GROUP BY build")
    return {str(r.build): pd.Timestamp(r.at) for r in frame.itertuples()}


def _verdicts_written_at(warehouse: Warehouse, build: str, judge_version: str) -> pd.Timestamp | None:
    frame = warehouse.query(
        "SELECT max(written_at) AS at FROM judge_verdicts WHERE build = ? AND judge_version = ?",
        [build, judge_version],
    )
    at = frame["at"].iloc[0] if len(frame) else None
    return None if at is None or pd.isna(at) else pd.Timestamp(at)


def bridge_builds(track: Track, judge: Judge, builds: Sequence[str] | None = None) -> list[str]:
    """The builds a bridge scores: `builds` when given (`evaltrack bridge run --builds`), else the judge
    file's `bridge_builds`, else the newest three builds with scenario_runs (newest by the current
    scenario_runs partition's written_at; ties by build id).

    Raises BridgeError for a named build that is unregistered or has no scenario_runs, or when no
    build has any.
    """
    runs = _runs_written_at(track.warehouse)
    registered = set(track.registered_builds())
    named = list(builds) if builds else list(judge.bridge_builds or ())
    if named:
        bad = [b for b in named if b not in registered or b not in runs]
        if bad:
            raise BridgeError(
                f"{judge.version_id}: bridge builds {', '.join(bad)} are not registered builds with "
                "scenario_runs: materialize scenario_runs first"
            )
        return named
    newest = sorted((b for b in runs if b in registered), key=lambda b: (runs[b], b), reverse=True)
    if not newest:
        raise BridgeError(
            f"{judge.version_id}: no build has scenario_runs yet: materialize scenario_runs first"
        )
    return newest[:DEFAULT_BRIDGE_BUILDS]


def _scored(warehouse: Warehouse, builds: list[str], judge_version: str) -> pd.DataFrame:
    marks = ", ".join("?" for _ in builds)
    return warehouse.query(
        "SELECT build, scenario_id, repeat, criteria, status FROM judge_verdicts "
        f"WHERE judge_version = ? AND build IN ({marks})",
        [judge_version, *builds],
    )


def _points(frame: pd.DataFrame, rubric: Rubric) -> pd.Series:
    return pd.Series(
        [rubric_points(json.loads(c), rubric) for c in frame["criteria"]], index=frame.index, dtype=float
    )


# --- the materialization ------------------------------------------------------------------------


def materialize_calibration_offsets(
    track: Track,
    judge_version: str,
    run_id: str,
    log: Log | None = None,
    builds: Sequence[str] | None = None,
) -> Summary:
    """The `calibration_offsets` materialization of one judge version: a bridge run (`run_bridge`, over
    `builds` when given) when the version declares `bridges_from`; otherwise nothing is written and
    the summary says so."""
    from eval_assets.capability.rows import Summary

    new = track.judge(judge_version)
    if new.bridges_from is None:
        note = f"{judge_version} declares no bridges_from: nothing to calibrate"
        return Summary({"bridge": "none declared"}, log=(("info", note),))
    values = run_bridge(track, judge_version, run_id, log=log, builds=builds)
    note = f"bridge {new.bridges_from} -> {judge_version}: published={values.get('published')}"
    return Summary(values, log=(("info", note),))


def run_bridge(
    track: Track,
    judge_version: str,
    run_id: str,
    log: Log | None = None,
    builds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Calibrate `judge_version` against its `bridges_from`; write its `calibration_offsets` partition.

    For each bridge build and each of the two versions, verdicts are reused when the current
    judge_verdicts partition was written after the build's current scenario_runs partition (so both
    versions scored the same stored outputs); otherwise `track.run_judge_verdicts` is called for that
    (build, version) alone. Pairs are the (build, scenario, repeat) BOTH versions scored; failed and
    excluded verdicts pair with nothing. Writes one row even when nothing pairs (published=False,
    with the reason). Returns a summary for the materialization's metadata.
    Raises BridgeError (no bridges_from, unknown builds, rubrics on different point scales).
    """
    from eval_assets.capability.materialize import materialize_judge_verdicts
    from eval_assets.stats import calibrate

    new = track.judge(judge_version)
    if new.bridges_from is None:
        raise BridgeError(f"{judge_version} declares no bridges_from: there is nothing to calibrate against")
    old = track.judge(new.bridges_from)
    r_old, r_new = track.project.rubric_for(old), track.project.rubric_for(new)
    scale = point_scale(r_new)
    if point_scale(r_old) != scale:
        raise BridgeError(
            f"{old.version_id} ({r_old.key}: {point_scale(r_old).unit}) and {new.version_id} "
            f"({r_new.key}: {scale.unit}) do not score on one scale: a bridge cannot pair them"
        )
    builds = bridge_builds(track, new, builds)
    runs_at = _runs_written_at(track.warehouse)
    reused: list[str] = []
    judged: list[str] = []
    spend = 0.0
    for build in builds:
        for version in (old.version_id, new.version_id):
            at = _verdicts_written_at(track.warehouse, build, version)
            if at is not None and at >= runs_at[build]:
                reused.append(f"{build}/{version}")
                continue
            if log:
                log(f"bridge {old.version_id} -> {new.version_id}: judging {build} with {version}")
            summary = materialize_judge_verdicts(track, build, version, run_id, log)
            spend += float(summary["spend_usd"] or 0.0)
            judged.append(f"{build}/{version}")

    key = ["build", "scenario_id", "repeat"]
    before = _scored(track.warehouse, builds, old.version_id)
    after = _scored(track.warehouse, builds, new.version_id)
    counts = {
        "old_failed": int((before["status"] == "failed").sum()),
        "new_failed": int((after["status"] == "failed").sum()),
    }
    before = before[before["status"] == "scored"]
    after = after[after["status"] == "scored"]
    before = before.assign(old_score=_points(before, r_old)).loc[:, [*key, "old_score"]]
    after = after.assign(new_score=_points(after, r_new)).loc[:, [*key, "new_score"]]
    pairs = before.merge(after, on=key, how="inner")
    cal = calibrate(pairs, point_size=scale.point_size)
    row = calibration_offset_row(old.version_id, new.version_id, cal, builds, scale)
    path = track.warehouse.write_partition("calibration_offsets", {"judge_to": new.version_id}, [row], run_id)
    return {
        "judge_from": old.version_id,
        "judge_to": new.version_id,
        "builds": builds,
        "verdicts_reused": reused,
        "verdicts_judged": judged,
        "spend_usd": round(spend, 6),
        "n_outputs": cal.n,
        "n_scenarios": cal.n_scenarios,
        "unpaired_old": len(before) - cal.n,
        "unpaired_new": len(after) - cal.n,
        **counts,
        "published": cal.published,
        "reasons": list(cal.reasons),
        "offset": None if cal.offset is None else round(cal.offset, 4),
        "ci": None if cal.ci_low is None else [round(cal.ci_low, 4), round(cal.ci_high or 0.0, 4)],
        "krippendorff_alpha": None if cal.krippendorff_alpha is None else round(cal.krippendorff_alpha, 4),
        "equating": cal.equating_slope is not None,
        "unit": scale.unit,
        "partition_file": str(path),
    }


def calibration_offset_row(
    judge_from: str, judge_to: str, cal: Calibration, builds: Sequence[str], scale: PointScale
) -> dict[str, Any]:
    """The one `calibration_offsets` row of a bridge run (reasons one per line, builds comma-joined;
    figures in `scale.unit`)."""
    return {
        "judge_from": judge_from,
        "judge_to": judge_to,
        "published": cal.published,
        "reasons": "\n".join(cal.reasons),
        "offset_points": cal.offset,
        "ci_low": cal.ci_low,
        "ci_high": cal.ci_high,
        "half_width": cal.half_width,
        "sd_diff": cal.sd_diff,
        "ba_low": cal.ba_low,
        "ba_high": cal.ba_high,
        "slope": cal.slope,
        "slope_ci_low": cal.slope_ci_low,
        "slope_ci_high": cal.slope_ci_high,
        "equating_intercept": cal.equating_intercept,
        "equating_slope": cal.equating_slope,
        "spearman_rho": cal.spearman_rho,
        "krippendorff_alpha": cal.krippendorff_alpha,
        "krippendorff_alpha_raw": cal.krippendorff_alpha_raw,
        "n_outputs": cal.n,
        "n_scenarios": cal.n_scenarios,
        "n_needed": cal.n_needed,
        "builds": ",".join(builds),
        "unit": scale.unit,
        "scale_low": scale.low,
        "scale_high": scale.high,
        "point_size": scale.point_size,
        "level": cal.level,
    }


def calibration_row(warehouse: Warehouse, judge_version: str) -> dict[str, Any] | None:
    """The current `calibration_offsets` row for `judge_version` (published or not), or None."""
    frame = warehouse.query("SELECT * FROM calibration_offsets WHERE judge_to = ?", [judge_version])
    if frame.empty:
        return None
    rec = frame.iloc[0].to_dict()
    return {k: (None if not isinstance(v, str) and pd.isna(v) else v) for k, v in rec.items()}


def published_offset(warehouse: Warehouse, judge_version: str) -> dict[str, Any] | None:
    """The current calibration row for `judge_version` if it is PUBLISHED, else None.

    None covers: never bridged, bridge not materialized yet, and the newest bridge not published. A
    release decision must refuse a version with `bridges_from` while this is None.
    """
    row = calibration_row(warehouse, judge_version)
    return row if row is not None and bool(row["published"]) else None


def bridge_refusal(warehouse: Warehouse, judge: Judge) -> str | None:
    """Why a release decision may not use `judge` yet (None: it may): a bridging version whose offset
    is not published. A version without `bridges_from` is never refused here."""
    if judge.bridges_from is None:
        return None
    row = calibration_row(warehouse, judge.version_id)
    if row is None:
        return (
            f"judge {judge.version_id} bridges from {judge.bridges_from} and has no calibration_offsets "
            "yet: materialize its bridge run"
        )
    if not row["published"]:
        reasons = "; ".join(str(row["reasons"] or "").splitlines())
        return f"judge {judge.version_id}: calibration against {judge.bridges_from} not published ({reasons})"
    return None


def to_new_scale(row: Mapping[str, Any], old_points: float) -> float:
    """An old-version score (in the row's unit) on the new version's scale, for TREND views only.

    Applies the published equating function when present, else the constant offset. Raises
    ValueError for an unpublished row. Release comparisons never call this (docs/methods.md: judge versions).
    """
    if not row.get("published"):
        raise ValueError(f"calibration for {row.get('judge_to')} is not published")
    if row.get("equating_slope") is not None and row.get("equating_intercept") is not None:
        return float(row["equating_intercept"]) + float(row["equating_slope"]) * old_points
    return old_points + float(row["offset_points"])


def offset_interval(row: Mapping[str, Any], low_points: float, high_points: float) -> tuple[float, float]:
    """An interval of old-version scores `[low_points, high_points]` (rubric points) carried onto the new
    version's scale with the bridge's uncertainty: each end through `to_new_scale`, widened by how far the
    offset's confidence interval reaches below and above the offset. Ordered (low <= high); not clipped.
    Raises ValueError for an unpublished row."""
    offset = float(row["offset_points"])
    below = 0.0 if row.get("ci_low") is None else float(row["ci_low"]) - offset
    above = 0.0 if row.get("ci_high") is None else float(row["ci_high"]) - offset
    ends = sorted((to_new_scale(row, low_points), to_new_scale(row, high_points)))
    return ends[0] + min(below, 0.0), ends[1] + max(above, 0.0)
