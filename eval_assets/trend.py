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

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from eval_assets.bridge import calibration_row, to_new_scale
from eval_assets.capability.rows import Summary

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
        }


def _to_scale(row: Mapping[str, Any], mean: float) -> float:
    """A mean normalised score of `judge_from` on `judge_to`'s normalised scale (via rubric points)."""
    low, high = float(row["scale_low"]), float(row["scale_high"])
    return (to_new_scale(row, low + mean * (high - low)) - low) / (high - low)


def splice(
    builds: Sequence[str],
    means: Mapping[tuple[str, str], tuple[float, int]],
    version: str,
    bridges: Mapping[str, tuple[str, Mapping[str, Any] | None]],
) -> list[Point]:
    """The trend of `version` over `builds` (registration order).

    `means[(build, judge_version)] = (mean normalised score, scored verdicts)`; `bridges[judge_to] =
    (judge_from, current calibration row or None)` for every version that declares `bridges_from`.
    """

    def value(build: str, v: str, seen: frozenset[str]) -> tuple[Status, float | None, int | None, str | None, str | None]:
        if (build, v) in means:
            return "native", means[(build, v)][0], means[(build, v)][1], v, None
        if v in bridges and v not in seen:
            source, row = bridges[v]
            status, mean, n, origin, why = value(build, source, seen | {v})
            if status in ("native", "spliced") and mean is not None:
                if row is None or not row.get("published"):
                    state = "never run" if row is None else "not published"
                    return "break", None, n, origin, f"bridge {source} -> {v} {state}: {origin} score not carried"
                return "spliced", _to_scale(row, mean), n, origin, None
            if status == "break":
                return status, mean, n, origin, why
        return "missing", None, None, None, f"no verdicts under {v} or a version it bridges from"

    points = []
    for position, build in enumerate(builds):
        status, mean, n, origin, why = value(build, version, frozenset())
        points.append(Point(position, build, status, mean, n, origin, why))
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
        axes.scatter([p.position for p in native], [p.mean_score or 0.0 for p in native], s=40, color=_COLORS["native"],
                     zorder=3, label=f"native ({version})")
        axes.scatter([p.position for p in spliced], [p.mean_score or 0.0 for p in spliced], s=60, marker="D",
                     facecolors="none", edgecolors=_COLORS["spliced"], linewidths=1.6, zorder=3,
                     label="spliced through a published bridge")
        for p in spliced:
            axes.annotate(f"from {p.source_version}", (p.position, p.mean_score or 0.0), textcoords="offset points",
                          xytext=(0, 9), ha="center", fontsize=7, color=_COLORS["spliced"])
        finite = y[np.isfinite(y)]
        low = float(finite.min()) - 0.05 if finite.size else 0.0
        high = float(finite.max()) + 0.05 if finite.size else 1.0
        low, high = max(0.0, low), min(1.0, high) if high > low else low + 0.1
        labelled: set[str] = set()
        for p in points:
            if p.status not in ("break", "missing"):
                continue
            kind = "break: bridge not published" if p.status == "break" else "missing: no verdicts"
            axes.axvspan(p.position - 0.4, p.position + 0.4, color="#e74c3c" if p.status == "break" else "0.8",
                         alpha=0.25, hatch="//" if p.status == "break" else None, zorder=0,
                         label=None if kind in labelled else kind)
            labelled.add(kind)
            axes.text(p.position, low + 0.02 * (high - low), (p.reason or "").split(":")[0], rotation=90, fontsize=6,
                      ha="center", va="bottom", color="#922b21" if p.status == "break" else "0.3")
        axes.set_ylim(low, high)
        axes.set_xticks(x, [p.build for p in points], rotation=30, ha="right", fontsize=7)
        axes.set_xlabel("builds in registration order")
        axes.set_ylabel(f"mean score on the {version} scale (0-1)")
        axes.grid(axis="y", alpha=0.3)
        axes.legend(loc="upper left", fontsize=7)
        counts = {s: sum(1 for p in points if p.status == s) for s in ("native", "spliced", "break", "missing")}
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
        bridges[current.version_id] = (current.bridges_from, calibration_row(track.warehouse, current.version_id))
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
    plot = track.home.root / "reports" / "trend" / f"{version}.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    plot.write_bytes(png)
    counts = {s: sum(1 for p in points if p.status == s) for s in ("native", "spliced", "break", "missing")}
    values = {"builds": len(points), **{f"{s}_points": n for s, n in counts.items()}, "partition_file": str(path),
              "plot_file": str(plot)}
    table = "\n".join(
        f"| {p.position} | {p.build} | {p.status} | {'' if p.mean_score is None else f'{p.mean_score:.3f}'} | "
        f"{p.source_version or ''} | {p.reason or ''} |"
        for p in points
    )
    markdown = (
        f"**Score trend under {version}** (builds in registration order)\n\n"
        "| # | build | point | mean score | scored by | note |\n| --- | --- | --- | --- | --- | --- |\n"
        f"{table}\n\n![score trend](data:image/png;base64,{base64.b64encode(png).decode()})\n"
    )
    return Summary(values, markdown, {"plot_file": plot})
