"""The score trend of one judge version over the registered builds (docs/methods.md: score trend).

`splice` is the rule, on values: builds in registration order; a build scored by the trend's judge
version is a native point; a build scored only by an earlier version in the `bridges_from` chain is
carried onto the trend version's scale through each PUBLISHED calibration (equating function when
published, else the offset; `bridge.to_new_scale`) and marked spliced, naming the version it came
from; a build whose way onto the scale crosses a bridge that is not published (never run, or run and
not accepted) is a BREAK: no value, the reason, and the line stops there and starts again after it,
never joining across. A build with no verdicts under any version of the chain is `missing` (also a gap).
Scores are the mean normalised model score in [0, 1]; bridges work in rubric points, converted with the
calibration row's scale. `materialize_score_trend` writes the `score_trend_points` partition and the
PNG (EVAL_HOME/reports/trend/<judge version>.png). A trend never feeds a release decision.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from eval_assets.bridge import calibration_row, offset_interval, to_new_scale
from eval_assets.capability.rows import Summary
from eval_assets.present import png_uri
from eval_assets.safe_write import write_file

if TYPE_CHECKING:
    from eval_assets.capability.track import Track

Status = Literal["native", "spliced", "break", "missing"]
DATASET = "score_trend_points"


@dataclass(frozen=True)
class Point:
    position: int
    build: str
    status: Status
    mean_score: float | None
    scored: int | None
    source_version: str | None  # the judge version that scored the build (None: missing)
    reason: str | None
    score_low: float | None = None  # spliced: the interval the bridges' offset CIs give (clipped to [0, 1])
    score_high: float | None = None
    bridges: int = 0  # published bridges crossed to reach the trend's scale (0: native or no value)

    def row(self, trend_version: str) -> dict[str, Any]:
        return {
            "position": self.position,
            "build": self.build,
            "trend_version": trend_version,
            "status": self.status,
            "mean_score": self.mean_score,
            "scored": self.scored,
            "source_version": self.source_version,
            "spliced": self.status == "spliced",
            "reason": self.reason,
            "score_low": self.score_low,
            "score_high": self.score_high,
            "bridges": self.bridges,
        }


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _to_scale(row: Mapping[str, Any], mean: float) -> float:
    """A mean normalised score of `judge_from` on `judge_to`'s normalised scale (via rubric points)."""
    low, high = float(row["scale_low"]), float(row["scale_high"])
    return (to_new_scale(row, low + mean * (high - low)) - low) / (high - low)


def _interval_to_scale(row: Mapping[str, Any], interval: tuple[float, float]) -> tuple[float, float]:
    """A normalised interval of `judge_from` on `judge_to`'s normalised scale, widened by the bridge's
    offset CI (`bridge.offset_interval`)."""
    low, high = float(row["scale_low"]), float(row["scale_high"])
    a, b = offset_interval(row, low + interval[0] * (high - low), low + interval[1] * (high - low))
    return (a - low) / (high - low), (b - low) / (high - low)


@dataclass(frozen=True)
class _Value:
    status: Status
    mean: float | None = None
    scored: int | None = None
    origin: str | None = None
    reason: str | None = None
    interval: tuple[float, float] | None = None  # normalised, before clipping
    bridges: int = 0


def splice(
    builds: Sequence[str],
    means: Mapping[tuple[str, str], tuple[float, int]],
    version: str,
    bridges: Mapping[str, tuple[str, Mapping[str, Any] | None]],
) -> list[Point]:
    """The trend of `version` over `builds` (registration order: `position` 0, 1, ...).

    `means[(build, judge_version)] = (mean normalised score, scored verdicts)`; `bridges[judge_to] =
    (judge_from, current calibration row or None)` for every version that declares `bridges_from`.
    A build reached through k published bridges is spliced across all k steps: its mean goes through
    each step's equating function (or offset), and its interval `[score_low, score_high]` starts at
    the native mean and is widened at every step by how far that step's offset CI reaches; mean and
    interval are clipped to the score range [0, 1], so score_low <= mean_score <= score_high.
    """

    def value(build: str, v: str, seen: frozenset[str]) -> _Value:
        if (build, v) in means:
            mean, n = means[(build, v)]
            return _Value("native", mean, n, v, interval=(mean, mean))
        if v in bridges and v not in seen:
            source, row = bridges[v]
            inner = value(build, source, seen | {v})
            if inner.status in ("native", "spliced") and inner.mean is not None:
                if row is None or not row.get("published"):
                    state = "never run" if row is None else "not published"
                    why = f"bridge {source} -> {v} {state}: {inner.origin} score not carried"
                    return _Value("break", None, inner.scored, inner.origin, why)
                assert inner.interval is not None
                return _Value(
                    "spliced",
                    _to_scale(row, inner.mean),
                    inner.scored,
                    inner.origin,
                    interval=_interval_to_scale(row, inner.interval),
                    bridges=inner.bridges + 1,
                )
            if inner.status == "break":
                return inner
        return _Value("missing", reason=f"no verdicts under {v} or a version it bridges from")

    points = []
    for position, build in enumerate(builds):
        got = value(build, version, frozenset())
        mean = None if got.mean is None else _clip(got.mean)
        low = high = None
        if got.status == "spliced" and got.interval is not None and mean is not None:
            low, high = min(_clip(got.interval[0]), mean), max(_clip(got.interval[1]), mean)
        points.append(
            Point(
                position, build, got.status, mean, got.scored, got.origin, got.reason, low, high, got.bridges
            )
        )
    return points


_COLORS = {"native": "#2e86c1", "spliced": "#8e44ad"}


def plot_trend(points: Sequence[Point], version: str, *, dpi: int = 110) -> bytes:
    """A PNG: the suite score over builds in registration order. One line through consecutive points
    with a value (a break or a missing build cuts it: NaN never joins); native points filled blue,
    spliced points hollow purple diamonds labelled with their source version; a break is a red
    hatched band with its reason, a missing build a grey band. Agg canvas directly (thread-safe)."""
    figure = Figure(figsize=(max(8.0, min(22.0, 4.0 + 0.6 * len(points))), 5.5), dpi=dpi)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if not points:
        axes.axis("off")
        axes.text(0.5, 0.5, f"score trend {version}: no registered builds", ha="center", va="center")
    else:
        x = np.arange(len(points))
        y = np.array([np.nan if p.mean_score is None else p.mean_score for p in points], dtype=float)
        axes.plot(x, y, color="0.35", linewidth=1.2, zorder=1, label="suite score (gaps: no value)")
        native = [p for p in points if p.status == "native"]
        spliced = [p for p in points if p.status == "spliced"]
        axes.scatter(
            [p.position for p in native],
            [p.mean_score or 0.0 for p in native],
            s=40,
            color=_COLORS["native"],
            zorder=3,
            label=f"native ({version})",
        )
        axes.scatter(
            [p.position for p in spliced],
            [p.mean_score or 0.0 for p in spliced],
            s=60,
            marker="D",
            facecolors="none",
            edgecolors=_COLORS["spliced"],
            linewidths=1.6,
            zorder=3,
            label="spliced through a published bridge",
        )
        for p in spliced:
            axes.annotate(
                f"from {p.source_version}",
                (p.position, p.mean_score or 0.0),
                textcoords="offset points",
                xytext=(0, 9),
                ha="center",
                fontsize=7,
                color=_COLORS["spliced"],
            )
        finite = y[np.isfinite(y)]
        low = float(finite.min()) - 0.05 if finite.size else 0.0
        high = float(finite.max()) + 0.05 if finite.size else 1.0
        low, high = max(0.0, low), min(1.0, high) if high > low else low + 0.1
        labelled: set[str] = set()
        for p in points:
            if p.status not in ("break", "missing"):
                continue
            kind = "break: bridge not published" if p.status == "break" else "missing: no verdicts"
            axes.axvspan(
                p.position - 0.4,
                p.position + 0.4,
                color="#e74c3c" if p.status == "break" else "0.8",
                alpha=0.25,
                hatch="//" if p.status == "break" else None,
                zorder=0,
                label=None if kind in labelled else kind,
            )
            labelled.add(kind)
            axes.text(
                p.position,
                low + 0.02 * (high - low),
                (p.reason or "").split(":")[0],
                rotation=90,
                fontsize=6,
                ha="center",
                va="bottom",
                color="#922b21" if p.status == "break" else "0.3",
            )
        axes.set_ylim(low, high)
        axes.set_xticks(x, [p.build for p in points], rotation=30, ha="right", fontsize=7)
        axes.set_xlabel("builds in registration order")
        axes.set_ylabel(f"mean score on the {version} scale (0-1)")
        axes.grid(axis="y", alpha=0.3)
        axes.legend(loc="upper left", fontsize=7)
        counts = {
            s: sum(1 for p in points if p.status == s) for s in ("native", "spliced", "break", "missing")
        }
        axes.set_title(
            f"score trend under {version}: " + ", ".join(f"{n} {s}" for s, n in counts.items()), fontsize=10
        )
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Title": f"score trend {version}"})
    return buffer.getvalue()


def _chain(track: Track, version: str) -> dict[str, tuple[str, Mapping[str, Any] | None]]:
    bridges: dict[str, tuple[str, Mapping[str, Any] | None]] = {}
    current = track.judge(version)
    while current.bridges_from is not None and current.version_id not in bridges:
        bridges[current.version_id] = (
            current.bridges_from,
            calibration_row(track.warehouse, current.version_id),
        )
        current = track.judge(current.bridges_from)
    return bridges


def materialize_score_trend(track: Track, version: str, run_id: str) -> Summary:
    """The `score_trend` materialization of one judge version: points, partition and plot."""
    builds = track.builds_by_registration()
    frame = track.warehouse.query(
        "SELECT build, judge_version, mean_score, scored FROM score_trend WHERE scored > 0"
    )
    means = {
        (str(r.build), str(r.judge_version)): (float(r.mean_score), int(r.scored))
        for r in frame.itertuples()
        if r.mean_score is not None and not math.isnan(r.mean_score)
    }
    points = splice(builds, means, version, _chain(track, version))
    rows = [p.row(version) for p in points]
    path = track.warehouse.write_partition(DATASET, {"trend_version": version}, rows, run_id)
    png = plot_trend(points, version)
    plot = track.home.trend_reports / f"{version}.png"
    write_file(plot, png)
    counts = {s: sum(1 for p in points if p.status == s) for s in ("native", "spliced", "break", "missing")}
    values = {
        "builds": len(points),
        **{f"{s}_points": n for s, n in counts.items()},
        "partition_file": str(path),
        "plot_file": str(plot),
    }
    table = "\n".join(
        f"| {p.position} | {p.build} | {p.status} | {'' if p.mean_score is None else f'{p.mean_score:.3f}'} | "
        f"{p.source_version or ''} | {p.reason or ''} |"
        for p in points
    )
    markdown = (
        f"**Score trend under {version}** (builds in registration order)\n\n"
        "| # | build | point | mean score | scored by | note |\n| --- | --- | --- | --- | --- | --- |\n"
        f"{table}\n\n![score trend]({png_uri(png)})\n"
    )
    return Summary(values, markdown, {"plot_file": plot})
