"""A short markdown summary of a capability report, for materialization metadata and the CLI."""

from __future__ import annotations

from ._compare import CapabilityReport
from ._findings import FLOOR_DROP, Finding

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


def _repeats(value: float | None) -> str:
    return "n/a (no between-scenario variance)" if value is None else f"{value:.1f}"


def _row(finding: Finding) -> str:
    detail = finding.detail.replace("|", "/")
    return f"| {finding.finding} | {finding.verdict} | {detail} |"
