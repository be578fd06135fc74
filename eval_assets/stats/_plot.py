"""The report plot a release engineer looks at: per-scenario means, the noise band, flagged scenarios."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._compare import CapabilityReport
from ._findings import fmt

_MARKERS = {"block": ("#c0392b", "X", "block"), "investigate": ("#e67e22", "D", "investigate")}
_MAX_LABELS = 25
SCORE_RANGE = (0.0, 1.0)  # the weighted aggregate's range (docs/methods.md); bands are drawn within it
_MARGIN = 0.03


def clipped_band(
    centre: np.ndarray, half: np.ndarray, low: float, high: float
) -> tuple[np.ndarray, np.ndarray]:
    """(centre - half, centre + half) clipped to [low, high]: a band never draws scores that cannot be."""
    return np.clip(centre - half, low, high), np.clip(centre + half, low, high)


_MAX_TICKS = 40


def plot_report(report: CapabilityReport, *, dpi: int = 110) -> bytes:
    """A PNG of `report.scenarios`, sorted by candidate - baseline difference.

    Top: baseline mean (grey, with its per-scenario noise band) and candidate mean (blue) per scenario.
    Bottom: the difference with the per-scenario band around 0. Blocked scenarios are red crosses,
    investigate ones orange diamonds, and up to 25 flagged ids per verdict are listed in a box (tick labels
    only up to 40 scenarios, so 200 stay readable). A report that compared nothing gives a PNG that
    says why. Uses the Agg canvas directly: no pyplot state, safe in worker threads.
    """
    scenarios = report.scenarios.sort_values("difference", kind="stable").reset_index(drop=True)
    figure = Figure(figsize=(max(10.0, min(22.0, 6.0 + 0.03 * len(scenarios))), 7.5), dpi=dpi)
    FigureCanvasAgg(figure)
    if scenarios.empty:
        axes = figure.add_subplot()
        axes.axis("off")
        axes.text(
            0.5,
            0.5,
            f"{report.source}\n{report.decided_nothing or 'no scenarios compared'}",
            ha="center",
            va="center",
            wrap=True,
        )
    else:
        top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        _means_panel(top, scenarios)
        _difference_panel(bottom, scenarios)
        _scenario_axis(bottom, scenarios)
        figure.suptitle(_title(report), fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    caption = f"{report.source}: {report.decided_nothing or report.verdict}"
    figure.savefig(buffer, format="png", metadata={"Title": "capability report", "Description": caption})
    return buffer.getvalue()


def _title(report: CapabilityReport) -> str:
    mean = next((f.statistic for f in report.findings if f.finding == "mean_drop"), None)
    flagged = report.scenarios["verdict"].isin(list(_MARKERS)).sum()
    return (
        f"{report.source} — {report.verdict.upper()}\n"
        f"mean difference {fmt(mean)} vs noise band ±{fmt(report.band_half_width)}; "
        f"{flagged} of {len(report.scenarios)} scenarios flagged"
    )


def _means_panel(axes: Axes, scenarios: pd.DataFrame) -> None:
    x = np.arange(len(scenarios))
    base, half = scenarios["baseline_mean"].to_numpy(float), scenarios["half_width"].to_numpy(float)
    low, high = clipped_band(base, half, *SCORE_RANGE)
    axes.fill_between(x, low, high, step="mid", color="0.85", label="baseline ± per-scenario band")
    axes.set_ylim(SCORE_RANGE[0] - _MARGIN, SCORE_RANGE[1] + _MARGIN)
    axes.scatter(x, base, s=10, color="0.35", label="baseline mean", rasterized=True)
    axes.scatter(
        x, scenarios["candidate_mean"], s=10, color="#2e86c1", label="candidate mean", rasterized=True
    )
    _mark_flagged(axes, scenarios, "candidate_mean", label_ids=False)
    axes.set_ylabel("score (mean of repeats)")
    axes.legend(loc="lower right", fontsize=8, ncols=2)
    axes.grid(axis="y", alpha=0.3)


def _difference_panel(axes: Axes, scenarios: pd.DataFrame) -> None:
    x = np.arange(len(scenarios))
    half = scenarios["half_width"].to_numpy(float)
    # a difference of two scores lies in [-1, 1]
    span = SCORE_RANGE[1] - SCORE_RANGE[0]
    low, high = clipped_band(np.zeros_like(half), half, -span, span)
    axes.fill_between(x, low, high, step="mid", color="0.85", label="re-run noise band (baseline)")
    axes.axhline(0.0, color="0.4", linewidth=0.8)
    axes.scatter(
        x, scenarios["difference"], s=10, color="#2e86c1", label="candidate - baseline", rasterized=True
    )
    _mark_flagged(axes, scenarios, "difference", label_ids=True)
    bottom, top = axes.get_ylim()  # autoscaled to what is drawn, never past a possible difference
    axes.set_ylim(max(bottom, -span - _MARGIN), min(top, span + _MARGIN))
    axes.set_ylabel("difference")
    axes.legend(loc="lower right", fontsize=8, ncols=2)
    axes.grid(axis="y", alpha=0.3)


def _mark_flagged(axes: Axes, scenarios: pd.DataFrame, column: str, *, label_ids: bool) -> None:
    lines = []
    for verdict, (color, marker, label) in _MARKERS.items():
        flagged = scenarios.loc[scenarios["verdict"] == verdict]
        if flagged.empty:
            continue
        axes.scatter(flagged.index, flagged[column], s=60, color=color, marker=marker, label=label, zorder=3)
        ids = [str(sid) for sid in flagged["scenario_id"]]
        shown = _wrap(ids[:_MAX_LABELS]) + (
            f"\n… and {len(ids) - _MAX_LABELS} more" if len(ids) > _MAX_LABELS else ""
        )
        lines.append(f"{label} ({len(ids)}):\n{shown}")
    if label_ids and lines:
        axes.text(
            0.01,
            0.97,
            "\n".join(lines),
            transform=axes.transAxes,
            va="top",
            fontsize=7,
            family="monospace",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"},
        )


def _wrap(ids: list[str], per_line: int = 5) -> str:
    return "\n".join(", ".join(ids[i : i + per_line]) for i in range(0, len(ids), per_line))


def _scenario_axis(axes: Axes, scenarios: pd.DataFrame) -> None:
    if len(scenarios) <= _MAX_TICKS:
        axes.set_xticks(
            np.arange(len(scenarios)), [str(s) for s in scenarios["scenario_id"]], rotation=90, fontsize=7
        )
    axes.set_xlabel(f"scenarios sorted by difference (n={len(scenarios)})")
