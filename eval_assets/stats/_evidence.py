"""Evidence: what a release decision is made from.

Anything with a `source`, a `decided_nothing` reason (or None) and `reasons()` is evidence: a
capability report per judge version, and later the deterministic suite. A reason's severity is
`block`, `investigate`, `none` (this evidence decided nothing) or `info`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Severity = Literal["block", "investigate", "none", "info"]
SEVERITY_ORDER: tuple[Severity, ...] = ("block", "investigate", "none", "info")


@dataclass(frozen=True)
class Reason:
    """One reason behind a decision, naming its source (e.g. judge version) and the scenarios involved."""

    severity: Severity
    source: str
    finding: str
    message: str
    scenario_ids: tuple[str, ...] = ()
    advice: str | None = None

    def text(self) -> str:
        """One line: severity, source, message and advice."""
        advice = f" — {self.advice}" if self.advice else ""
        return f"[{self.severity}] {self.source}: {self.message}{advice}"

    def line(self) -> str:
        """One line without the source (for a listing grouped by source): severity, message, advice."""
        advice = f" — {self.advice}" if self.advice else ""
        return f"[{self.severity}] {self.message}{advice}"


@runtime_checkable
class Evidence(Protocol):
    """One input to a release decision.

    `reasons()` returns the evidence's block / investigate / info reasons (none when all is well);
    `decided_nothing` is a reason string when the evidence cannot support a decision, else None.
    Evidence that decided nothing may still return block reasons (a policy failure blocks even when
    the scores cannot be compared).
    """

    @property
    def source(self) -> str: ...

    @property
    def decided_nothing(self) -> str | None: ...

    def reasons(self) -> tuple[Reason, ...]: ...


@dataclass(frozen=True)
class CheckOutcome:
    """One blocking check (e.g. a gate of the deterministic suite) and whether it passed.

    A check that could not run is a failure: record it with `passed=False` and say why in `detail`.
    """

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class CheckSuiteEvidence:
    """A suite of blocking checks as evidence: any failed check blocks; no checks decides nothing."""

    source: str
    outcomes: tuple[CheckOutcome, ...]

    @property
    def decided_nothing(self) -> str | None:
        """'no checks ran' for an empty suite, else None."""
        return None if self.outcomes else "no checks ran"

    def reasons(self) -> tuple[Reason, ...]:
        """One block reason per failed check, in the order given."""
        return tuple(
            Reason(
                severity="block",
                source=self.source,
                finding=outcome.name,
                message=f"check {outcome.name} failed" + (f": {outcome.detail}" if outcome.detail else ""),
            )
            for outcome in self.outcomes
            if not outcome.passed
        )
