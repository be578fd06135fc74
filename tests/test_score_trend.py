"""The score trend: splicing through published bridges, breaks at unpublished ones (on values), the
plot, and the `score_trend_points` partition a materialization writes."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome
from eval_assets.trend import materialize_score_trend, plot_trend, splice

PUBLISHED = {
    "published": True,
    "offset_points": 0.4,
    "scale_low": 1.0,
    "scale_high": 5.0,
    "equating_slope": None,
    "equating_intercept": None,
    "judge_to": "j-v2",
}
BUILDS = ["b0", "b1", "b2", "b3", "b4"]


def test_old_points_are_spliced_through_a_published_offset_and_marked() -> None:
    means = {
        ("b0", "j-v1"): (0.5, 10),
        ("b1", "j-v1"): (0.6, 10),
        ("b2", "j-v2"): (0.7, 10),
        ("b2", "j-v1"): (0.1, 10),
    }
    points = splice(BUILDS[:3], means, "j-v2", {"j-v2": ("j-v1", PUBLISHED)})
    assert [p.status for p in points] == ["spliced", "spliced", "native"]
    assert points[0].mean_score == pytest.approx(0.5 + 0.4 / 4)  # 0.4 points on a 1..5 scale
    assert points[1].mean_score == pytest.approx(0.6 + 0.1)
    assert points[2].mean_score == 0.7  # native wins: the old version's 0.1 for b2 is never used
    assert [p.source_version for p in points] == ["j-v1", "j-v1", "j-v2"]


def test_the_equating_function_is_used_when_published() -> None:
    row = {**PUBLISHED, "equating_slope": 0.5, "equating_intercept": 2.0}
    [point] = splice(["b0"], {("b0", "j-v1"): (0.5, 3)}, "j-v2", {"j-v2": ("j-v1", row)})
    assert point.mean_score == pytest.approx(((2.0 + 0.5 * 3.0) - 1.0) / 4.0)


@pytest.mark.parametrize("row", [None, {**PUBLISHED, "published": False}], ids=["never-run", "unpublished"])
def test_an_unpublished_bridge_is_a_break_with_no_value(row: dict | None) -> None:
    means = {("b0", "j-v1"): (0.5, 10), ("b1", "j-v2"): (0.7, 10), ("b3", "j-v2"): (0.8, 10)}
    points = splice(BUILDS[:4], means, "j-v2", {"j-v2": ("j-v1", row)})
    assert [p.status for p in points] == ["break", "native", "missing", "native"]
    assert points[0].mean_score is None and points[0].source_version == "j-v1"
    assert "j-v1 -> j-v2" in (points[0].reason or "")
    assert points[2].mean_score is None


def test_a_chain_splices_twice_and_breaks_where_any_link_is_unpublished() -> None:
    v3 = {**PUBLISHED, "offset_points": 0.8, "judge_to": "j-v3"}
    means = {("b0", "j-v1"): (0.5, 10), ("b1", "j-v2"): (0.5, 10), ("b2", "j-v3"): (0.9, 10)}
    points = splice(BUILDS[:3], means, "j-v3", {"j-v3": ("j-v2", v3), "j-v2": ("j-v1", PUBLISHED)})
    assert [p.status for p in points] == ["spliced", "spliced", "native"]
    assert points[0].mean_score == pytest.approx(0.5 + 0.1 + 0.2)
    assert points[0].source_version == "j-v1" and points[1].source_version == "j-v2"
    broken = splice(BUILDS[:3], means, "j-v3", {"j-v3": ("j-v2", v3), "j-v2": ("j-v1", None)})
    assert [p.status for p in broken] == ["break", "spliced", "native"]


def test_the_plot_is_a_png_whose_line_never_joins_across_a_break() -> None:
    means = {("b0", "j-v2"): (0.5, 10), ("b1", "j-v1"): (0.6, 10), ("b2", "j-v2"): (0.7, 10)}
    points = splice(BUILDS[:3], means, "j-v2", {"j-v2": ("j-v1", None)})
    png = plot_trend(points, "j-v2")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert points[1].status == "break" and points[1].mean_score is None  # a NaN: matplotlib cuts the line


@pytest.fixture
def track(project: Project, tmp_path: Path) -> Track:
    track = Track(project, EvalHome(tmp_path / "eval_home"))
    for name in ("baseline", "candidate"):
        track.register_build(project.root / "examples" / "builds" / f"{name}.yaml")
    return track


def test_materializing_writes_one_row_per_registered_build_in_registration_order(track: Track) -> None:
    first = track.builds_by_registration()[0]
    materialize_scenario_runs(track, first, "runs")
    materialize_judge_verdicts(track, first, "helpfulness-v1", "verdicts")
    summary = materialize_score_trend(track, "helpfulness-v1", "trend-run")
    rows = track.warehouse.query("SELECT * FROM score_trend_points ORDER BY position")
    assert rows["build"].tolist() == track.builds_by_registration()
    assert rows["status"].tolist() == ["native", "missing"]
    native = track.warehouse.query(
        "SELECT mean_score FROM score_trend WHERE build = ? AND judge_version = 'helpfulness-v1'", [first]
    )["mean_score"].iloc[0]
    assert math.isclose(rows["mean_score"].iloc[0], native)
    assert summary["native_points"] == 1 and summary["missing_points"] == 1
    assert Path(summary.files["plot_file"]).read_bytes()[:4] == b"\x89PNG"


def test_the_asset_shows_the_plot_in_the_ui_metadata(project: Project, track: Track) -> None:
    import dagster as dg

    from eval_assets.cli.orchestrate import instance_for
    from eval_assets.definitions import location

    score_trend = location(project, track.home).resolve_assets_def("score_trend")
    instance = instance_for(track.home)
    result = dg.materialize([score_trend], instance=instance, partition_key="helpfulness-v1")
    assert result.success
    event = instance.get_latest_materialization_event(dg.AssetKey("score_trend"))
    assert event is not None and event.asset_materialization is not None
    meta = event.asset_materialization.metadata
    assert "![score trend](data:image/png;base64," in str(meta["trend"].value)
    assert str(meta["plot_file"].value) == "reports/trend/helpfulness-v1.png"
    assert meta["missing_points"].value == 2


@st.composite
def _chains(
    draw: st.DrawFn,
) -> tuple[dict[str, tuple[str, dict | None]], float, int, list[tuple[float, float, float]]]:
    """A chain j-v0 -> j-v1 -> ... -> j-vk of published bridges (offsets, CIs, some equated), and the
    native mean of one build under j-v0."""
    steps = draw(st.integers(1, 4))
    bridges: dict[str, tuple[str, dict | None]] = {}
    widths = []
    for k in range(1, steps + 1):
        offset = draw(st.floats(-3.0, 3.0))
        below, above = draw(st.floats(0.0, 1.5)), draw(st.floats(0.0, 1.5))
        equated = draw(st.booleans())
        row = {
            **PUBLISHED,
            "judge_to": f"j-v{k}",
            "offset_points": offset,
            "ci_low": offset - below,
            "ci_high": offset + above,
            "equating_slope": draw(st.floats(0.5, 1.5)) if equated else None,
            "equating_intercept": draw(st.floats(-1.0, 1.0)) if equated else None,
        }
        bridges[f"j-v{k}"] = (f"j-v{k - 1}", row)
        widths.append((offset, below, above))
    return bridges, draw(st.floats(0.0, 1.0)), steps, widths


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_chains())
def test_a_spliced_point_carries_an_ordered_interval_clipped_to_the_score_range(
    chain: tuple[dict[str, tuple[str, dict | None]], float, int, list[tuple[float, float, float]]],
) -> None:
    bridges, mean, steps, widths = chain
    points = splice(
        ["b-old", "b-new"],
        {("b-old", "j-v0"): (mean, 5), ("b-new", f"j-v{steps}"): (0.5, 5)},
        f"j-v{steps}",
        bridges,
    )
    spliced, native = points
    assert [p.position for p in points] == [0, 1] and (spliced.status, native.status) == ("spliced", "native")
    assert spliced.bridges == steps and native.bridges == 0
    assert native.score_low is None and native.score_high is None
    assert spliced.mean_score is not None and spliced.score_low is not None and spliced.score_high is not None
    assert 0.0 <= spliced.score_low <= spliced.mean_score <= spliced.score_high <= 1.0
    # unclipped, the interval is at least as wide as the widest step's CI (a pure-offset chain: their sum)
    if all(bridges[f"j-v{k}"][1]["equating_slope"] is None for k in range(1, steps + 1)):  # type: ignore[index]
        total = sum(o for o, _, _ in widths)
        low, high = (
            mean + (total - sum(b for _, b, _ in widths)) / 4,
            mean + (total + sum(a for _, _, a in widths)) / 4,
        )
        assert spliced.score_low == pytest.approx(min(max(low, 0.0), spliced.mean_score), abs=1e-9)
        assert spliced.score_high == pytest.approx(max(min(high, 1.0), spliced.mean_score), abs=1e-9)


def test_a_spliced_point_of_an_offset_without_a_ci_is_a_point_interval() -> None:
    row = {**PUBLISHED, "ci_low": None, "ci_high": None}
    [point] = splice(["b0"], {("b0", "j-v1"): (0.5, 3)}, "j-v2", {"j-v2": ("j-v1", row)})
    assert point.score_low == point.score_high == point.mean_score == pytest.approx(0.6)


def test_a_spliced_mean_beyond_the_scale_is_clipped_to_it() -> None:
    row = {**PUBLISHED, "offset_points": 2.0, "ci_low": 0.0, "ci_high": 2.5}
    [point] = splice(["b0"], {("b0", "j-v1"): (0.7, 3)}, "j-v2", {"j-v2": ("j-v1", row)})
    assert point.mean_score == 1.0 and point.score_high == 1.0  # 0.7 + 2/4 and 0.7 + 2.5/4, clipped
    assert point.score_low == pytest.approx(0.7)


# normalised rubric scores (points on 1..4, 1..5 and 0..10 scales): most are not sums a DOUBLE keeps exact
_SCORES = st.sampled_from(sorted({k / n for n in (3, 4, 10) for k in range(n + 1)}))


SCORE_TREND_VIEW = (
    Path(__file__).resolve().parents[1] / "eval_assets/warehouse/views/derived/06-score_trend.sql"
)


@settings(max_examples=60, deadline=None)
@given(scores=st.lists(_SCORES, min_size=2, max_size=40), order=st.randoms(use_true_random=False))
def test_a_builds_mean_score_is_the_same_bits_whatever_order_its_verdicts_were_written_in(
    scores: list[float], order: Any
) -> None:
    # the stored trend points are read from this view; attempts finish (and are written) in any order
    shuffled = list(scores)
    order.shuffle(shuffled)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE judge_verdicts (build VARCHAR, judge_version VARCHAR, score DOUBLE, status VARCHAR, "
        "source VARCHAR, written_at TIMESTAMP)"
    )
    for build, values in (("written", scores), ("reordered", shuffled)):
        con.executemany(
            "INSERT INTO judge_verdicts VALUES (?, 'j-v1', ?, 'scored', 'model', now())",
            [(build, x) for x in values],
        )
    means = dict(con.execute(f"SELECT build, mean_score FROM ({SCORE_TREND_VIEW.read_text()})").fetchall())
    assert means["written"] == means["reordered"]
    exact = sum(Fraction(x) for x in scores) / len(scores)
    assert abs(means["written"] - float(exact)) <= 1e-15
