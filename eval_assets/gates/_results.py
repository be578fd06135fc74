"""What a suite run returns: one result per gate, converted case or test, and the suite's result
(its summary and the release-decision evidence). Plain results: their `gate_results` and
`test_quarantine` rows are shaped where they are recorded (`_records`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from ._quarantine import TestRecord

if TYPE_CHECKING:
    from eval_assets.stats import CheckSuiteEvidence

Status = Literal["pass", "fail", "pending", "error", "awaiting_assertions"]
BLOCKING: frozenset[str] = frozenset({"fail", "error"})
EVIDENCE_SOURCE = "deterministic_suite"
MESSAGE_MAX_CHARS = 4000
MAX_FINDINGS_SHOWN = 25


@dataclass(frozen=True)
class GateResult:
    """One row of `gate_results`: a gate, an invalid registry entry, a converted case or a test.

    `kind` is the gate kind, or `test` for an ordinary test. `blocks` is True for fail/error
    results that are not quarantined (only tests are ever quarantined).
    """

    gate_id: str
    kind: str
    milestone: int | None
    status: Status
    duration_s: float
    message: str
    declared_in: str
    retried: bool = False
    quarantined: bool = False
    findings: tuple[str, ...] = ()

    @property
    def blocks(self) -> bool:
        return self.status in BLOCKING and not self.quarantined

    def full_message(self) -> str:
        """The message and the first findings, capped at MESSAGE_MAX_CHARS."""
        lines = [self.message, *self.findings[:MAX_FINDINGS_SHOWN]]
        if len(self.findings) > MAX_FINDINGS_SHOWN:
            lines.append(f"... and {len(self.findings) - MAX_FINDINGS_SHOWN} more")
        text = "\n".join(line for line in lines if line)
        return text if len(text) <= MESSAGE_MAX_CHARS else text[:MESSAGE_MAX_CHARS] + " [cut]"


@dataclass(frozen=True)
class SuiteResult:
    """The suite's results for one build: rows for `gate_results`/`test_quarantine`, and evidence."""

    build: str | None
    milestone: int
    ran_at: datetime
    results: tuple[GateResult, ...]
    test_records: tuple[TestRecord, ...] = ()

    @property
    def blocking(self) -> tuple[GateResult, ...]:
        """Results that block the release: fail or error, not quarantined."""
        return tuple(r for r in self.results if r.blocks)

    @property
    def passed(self) -> bool:
        """True when nothing blocks (pending, awaiting and quarantined results never block)."""
        return not self.blocking

    def counts(self) -> dict[str, int]:
        """Number of results per status (tests included)."""
        return dict(Counter(r.status for r in self.results))

    @property
    def retry_rate(self) -> float | None:
        """Share of ordinary tests that were retried in this run (None when no test ran)."""
        if not self.test_records:
            return None
        return sum(r.retried for r in self.test_records) / len(self.test_records)

    def ids(self, status: Status) -> list[str]:
        return [r.gate_id for r in self.results if r.status == status]

    def evidence(self, source: str = EVIDENCE_SOURCE) -> CheckSuiteEvidence:
        """Release-decision evidence: one outcome per result that can block (ran, not quarantined).

        Pending and awaiting results, and quarantined tests, are left out: they never block. A suite
        in which nothing ran therefore "decided nothing".
        """
        # pandas and scipy, which `validate` (it imports the gates) never needs
        from eval_assets.stats import CheckOutcome, CheckSuiteEvidence

        outcomes = tuple(
            CheckOutcome(
                r.gate_id, r.status == "pass", "" if r.status == "pass" else f"{r.status}: {r.message}"
            )
            for r in self.results
            if r.status in ("pass", "fail", "error") and not r.quarantined
        )
        return CheckSuiteEvidence(source, outcomes)

    def summary(self) -> dict[str, Any]:
        """Counts and lists for a materialization's metadata (tracked figures included)."""
        return {
            "build": self.build,
            "milestone": self.milestone,
            "passed": self.passed,
            "counts": self.counts(),
            "blocking": [r.gate_id for r in self.blocking],
            "pending": self.ids("pending"),
            "awaiting_assertions": self.ids("awaiting_assertions"),
            "quarantined": [r.gate_id for r in self.results if r.quarantined],
            "tests_retried": [r.test_id for r in self.test_records if r.retried],
            "retry_rate": self.retry_rate,
            "duration_s": round(sum(r.duration_s for r in self.results), 3),
        }

    def text(self) -> str:
        """One line per result, blocking ones first, then the retry rate."""
        order = {"error": 0, "fail": 1, "awaiting_assertions": 2, "pending": 3, "pass": 4}
        lines = []
        for r in sorted(self.results, key=lambda r: (not r.blocks, order[r.status])):
            flags = "".join([" (retried)" if r.retried else "", " (quarantined)" if r.quarantined else ""])
            lines.append(f"{r.status:>19}  {r.gate_id}{flags}: {r.message}")
        rate = self.retry_rate
        lines.append(f"retry rate: {'n/a' if rate is None else f'{rate:.1%}'}")
        return "\n".join(lines)
