"""Release decisions: block, investigate, allow or none, from any number of pieces of evidence.

The rules live in the evidence (a capability report's findings already say block / investigate);
this module only combines them: any block reason blocks; else, if every piece of evidence decided
nothing, there is no decision; else any investigate reason investigates; else allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from eval_assets import exit_codes

from ._evidence import SEVERITY_ORDER, Evidence, Reason
from ._findings import FINDING_ORDER

Decision = Literal["allow", "block", "investigate", "none"]
EXIT_CODES: Final = exit_codes.DECISION


def exit_code(decision: Decision) -> int:
    """The CLI exit code of a decision: allow 0, block 1, none (no decision) 2, investigate 3."""
    return EXIT_CODES[decision]


@dataclass(frozen=True)
class ReleaseDecision:
    """A decision and its reasons, most severe first (block, investigate, none, info)."""

    decision: Decision
    reasons: tuple[Reason, ...]

    @property
    def exit_code(self) -> int:
        """See `exit_code`."""
        return exit_code(self.decision)

    def text(self) -> str:
        """The decision, then the reasons grouped by source (judge version, suite, ...), most severe
        group first; the source is written once per group, not repeated on every line."""
        head = "no decision" if self.decision == "none" else self.decision
        lines = [f"decision: {head}"]
        for source, reasons in grouped_by_source(self.reasons):
            lines.append(f"  {source}:")
            lines += [f"    {reason.line()}" for reason in reasons]
        return "\n".join(lines)


def grouped_by_source(reasons: Iterable[Reason]) -> list[tuple[str, list[Reason]]]:
    """Reasons grouped by source, groups in order of their first (most severe) reason."""
    groups: dict[str, list[Reason]] = {}
    for reason in reasons:
        groups.setdefault(reason.source, []).append(reason)
    return list(groups.items())


def budget_problem(pieces: Sequence[object]) -> str | None:
    """Why the capability reports among `pieces` do not share ONE error budget (None when they do).

    A release's alpha is split evenly over its judge versions; a report that was given a budget for
    fewer versions than the decision combines would spend more than its share.
    """
    splits = [p.n_judge_versions for p in pieces if hasattr(p, "n_judge_versions")]
    if splits and min(splits) < len(splits):
        return (
            f"the error budget was split over {min(splits)} judge version(s) but {len(splits)} reports are "
            "combined: re-run the reports with the release's judge versions"
        )
    return None


def decide(evidence: Iterable[Evidence]) -> ReleaseDecision:
    """Combine evidence into one decision.

    block if any reason blocks (even from evidence that otherwise decided nothing); none when there
    is no evidence or ANY piece decided nothing (fail closed: a release is never allowed on partial
    evidence, e.g. a judge version whose report was refused, or a suite that never ran); investigate
    if any reason investigates; else allow. Evidence with nothing to report contributes one 'info' reason saying so. Reasons are sorted by severity, then by signal (policy failures, floor drops, mean drop,
    ...), keeping the order the evidence was given in.
    """
    pieces = list(evidence)
    reasons: list[Reason] = []
    for piece in pieces:
        found = piece.reasons()
        if piece.decided_nothing is not None and not any(r.severity == "none" for r in found):
            found = (*found, Reason("none", piece.source, "evidence", piece.decided_nothing))
        reasons += found or [Reason("info", piece.source, "summary", "nothing to block or investigate")]
    overspent = budget_problem(pieces)
    if overspent is not None:
        reasons.append(Reason("none", "release", "error_budget", overspent))
    severities = {reason.severity for reason in reasons}
    if "block" in severities:
        decision: Decision = "block"
    elif not pieces or overspent or any(piece.decided_nothing is not None for piece in pieces):
        decision = "none"
        if not pieces:
            reasons.append(Reason("none", "release", "evidence", "no evidence: nothing to decide on"))
    elif "investigate" in severities:
        decision = "investigate"
    else:
        decision = "allow"
    return ReleaseDecision(decision, tuple(sorted(reasons, key=_severity_key)))


def _severity_key(reason: Reason) -> tuple[int, int]:
    order = FINDING_ORDER.index(reason.finding) if reason.finding in FINDING_ORDER else len(FINDING_ORDER)
    return SEVERITY_ORDER.index(reason.severity), order
