"""Release decisions: block, investigate, allow or none, from any number of pieces of evidence.

The rules live in the evidence (a capability report's findings already say block / investigate);
this module only combines them: any block reason blocks; else, if every piece of evidence decided
nothing, there is no decision; else any investigate reason investigates; else allow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from ._evidence import SEVERITY_ORDER, Evidence, Reason
from ._findings import FINDING_ORDER

Decision = Literal["allow", "block", "investigate", "none"]
EXIT_CODES: Final = MappingProxyType({"allow": 0, "block": 1, "none": 2, "investigate": 3})


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
        """The decision and one line per reason, for `evaltrack release-status`."""
        head = "no decision" if self.decision == "none" else self.decision
        return "\n".join([f"decision: {head}", *(f"  {reason.text()}" for reason in self.reasons)])

    def rows(self) -> list[dict[str, object]]:
        """One row per reason (decision, severity, source, finding, scenario_ids, message, advice)."""
        return [
            {
                "decision": self.decision,
                "severity": r.severity,
                "source": r.source,
                "finding": r.finding,
                "scenario_ids": ",".join(r.scenario_ids),
                "message": r.message,
                "advice": r.advice,
            }
            for r in self.reasons
        ]


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
    severities = {reason.severity for reason in reasons}
    if "block" in severities:
        decision: Decision = "block"
    elif not pieces or any(piece.decided_nothing is not None for piece in pieces):
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
