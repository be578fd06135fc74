"""Assertions: what a person writes about one run of a case (a converted scenario or a case file).

The one format, and the one validation of an assertion list; the scenario schema and the gate cases
both read it from here. Assertions are never generated; a person writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ASSERTION_KINDS: dict[str, str] = {
    "contains": "the subject output contains this text",
    "not_contains": "the subject output does not contain this text",
    "policy_failures": "the scenario's policy checks find exactly this many failures",
    "replay_misses": "exactly this many tool calls were not in the scenario's recording",
    "tries": "the subject's tries (over every turn) were exactly this many",
    "paid_tries": "exactly this many subject tries were reserved at a priced worst case and settled once",
    "tool_call_ids": "the subject's tool calls carried exactly these call ids, in order",
    "verdict": "the judge's verdict status (scored or failed)",
    "score_at_least": "the judge's aggregate score (0-1) is at least this",
    "score_at_most": "the judge's aggregate score (0-1) is at most this",
}


@dataclass(frozen=True)
class Assertion:
    """One assertion: its kind (a key of ASSERTION_KINDS) and expected value."""

    kind: str
    value: Any

    def text(self) -> str:
        return f"{self.kind}: {self.value!r}"


def parse_assertion(item: Any) -> Assertion:
    """Validate one assertion entry (a one-key mapping). Raises ValueError saying what is wrong."""
    if not isinstance(item, dict) or len(item) != 1:
        raise ValueError(f"an assertion is a mapping with one key (one of {', '.join(ASSERTION_KINDS)})")
    ((kind, value),) = item.items()
    if kind not in ASSERTION_KINDS:
        raise ValueError(f"unknown assertion {kind!r} (known: {', '.join(ASSERTION_KINDS)})")
    if kind in ("contains", "not_contains"):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{kind}: expected a non-empty string")
    elif kind == "tool_call_ids":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"{kind}: expected a list of non-empty strings")
    elif kind in ("policy_failures", "replay_misses", "tries", "paid_tries"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{kind}: expected a whole number >= 0")
    elif kind == "verdict":
        if value not in ("scored", "failed"):
            raise ValueError("verdict: expected 'scored' or 'failed'")
    elif isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{kind}: expected a number in [0, 1]")
    return Assertion(kind, value)


def parse_assertions(items: list[Any]) -> tuple[Assertion, ...]:
    """Validate an assertion list, in order. Raises ValueError naming the first bad entry's index
    (`assertion 2: ...`)."""
    out = []
    for index, item in enumerate(items):
        try:
            out.append(parse_assertion(item))
        except ValueError as exc:
            raise ValueError(f"assertion {index}: {exc}") from None
    return tuple(out)
