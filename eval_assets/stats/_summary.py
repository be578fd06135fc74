"""A short markdown summary of a capability report, for materialization metadata and the CLI."""

from __future__ import annotations

from ._bootstrap import Interval
from ._compare import CapabilityReport
from ._findings import FLOOR_DROP, Finding
from ._intervals import SuiteIntervals

_MAX_SCENARIOS = 10


def summary_markdown(report: CapabilityReport) -> str:
    """Headline verdict, why nothing was decided (if so), the summary findings and flagged scenarios.

    Per-scenario rows appear only when flagged (block/investigate), at most 10 listed.
    """
    lines = [
        f"### Capability report: {report.source}",
        "",
        f"**Verdict: {report.verdict}**" + (f" — {report.decided_nothing}" if report.decided_nothing else ""),
        "",
        f"- {report.aa_text()}",
        f"- error budget: block alpha {report.alpha:g} per release over {report.n_judge_versions} judge "
        f"version(s) (weighted Holm within the report); investigate alpha/q {report.q:g} per release",
        f"- optimal repeats per scenario (Cochran, equal costs): {_repeats(report.optimal_repeats)}",
        *(
            f"- {role}: {_intervals(figures)}"
            for role, figures in (
                ("candidate", report.candidate_intervals),
                ("baseline", report.baseline_intervals),
            )
            if figures is not None
        ),
        "",
        "| finding | verdict | detail |",
        "| --- | --- | --- |",
    ]
    lines += [_row(f) for f in report.findings if f.finding != FLOOR_DROP or f.scenario_id is None]
    flagged = [
        f for f in report.findings if f.finding == FLOOR_DROP and f.verdict in ("block", "investigate")
    ]
    if flagged:
        lines += ["", f"**Flagged scenarios ({len(flagged)})**", ""]
        lines += [f"- `{f.scenario_id}` {f.verdict}: {f.detail}" for f in flagged[:_MAX_SCENARIOS]]
        if len(flagged) > _MAX_SCENARIOS:
            lines.append(f"- … and {len(flagged) - _MAX_SCENARIOS} more")
    return "\n".join(lines) + "\n"


def _intervals(s: SuiteIntervals) -> str:
    """Suite mean, pass rate and pass^k with their intervals (docs/methods.md: intervals)."""
    parts = [f"suite mean {_ci(s.mean, s.mean_interval)}"]
    if s.pass_rate is not None:
        parts.append(f"pass rate {_ci(s.pass_rate, s.pass_rate_interval)}")
        hat = "unknown" if s.pass_hat_k is None else _ci(s.pass_hat_k, s.pass_hat_k_interval)
        parts.append(f"pass^{s.k} {hat}")  # unknown: a judge could not score a repeat (docs/methods.md)
    return f"{', '.join(parts)} ({s.level:.0%} intervals over {s.n_scenarios} scenarios)"


def _ci(value: float | None, interval: Interval | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" + ("" if interval is None else f" [{interval.low:.3f}, {interval.high:.3f}]")


def _repeats(value: float | None) -> str:
    return "n/a (no between-scenario variance)" if value is None else f"{value:.1f}"


def _row(finding: Finding) -> str:
    detail = finding.detail.replace("|", "/")
    return f"| {finding.finding} | {finding.verdict} | {detail} |"
