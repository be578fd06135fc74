"""Assertions: what a person writes about one run of a case (a converted scenario or a case file).

The one format, and the one validation of an assertion list; the scenario schema and the gate cases
both read it from here. Assertions are never generated; a person writes them.
"""

from __future__ import annotations

import re
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
    # agent cases: what the agent reported and did (docs/specs/deterministic-suite.md, "Agent cases")
    "effects": "the tool invocations that reported an effect (effect_sent_at), in order, exactly; [] when unsaid",
    "event_order": "these events occur in this order (a subsequence of the attempt's events)",
    "tool_calls": "the tools the agent executed (names, optionally arguments), in order, exactly",
    "interventions": "the interventions asked and how each was answered, in order, exactly",
    "output_matches": "the output matches this regular expression (re.search)",
    "review_items": "exactly this many human-review items were queued (an UNCERTAIN outcome queues one)",
    "model_told": "a tool result the agent sent the model matches this regular expression (re.search)",
}
EVENT_KINDS = (
    "model_call",
    "disconnected",
    "asked",
    "answered",
    "tool_started",
    "effect_sent",
    "tool_finished",
    "review_item",
    "killed",
    "output",
)
ASKS = ("approval", "question")
ANSWERS = ("approved", "denied", "answer", "cancel")


def _regex(kind: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind}: expected a non-empty regular expression")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{kind}: not a regular expression: {exc}") from None


def _named_items(kind: str, value: Any, name: str, optional: dict[str, tuple[type, ...]]) -> None:
    """A list whose items are a name, or a mapping with `name` and some of `optional`."""
    if not isinstance(value, list):
        raise ValueError(f"{kind}: expected a list")
    for i, item in enumerate(value):
        if isinstance(item, str) and item:
            continue
        if not isinstance(item, dict) or not isinstance(item.get(name), str) or not item[name]:
            raise ValueError(f"{kind}[{i}]: expected a name or a mapping with `{name}`")
        unknown = sorted(set(item) - {name, *optional})
        if unknown:
            raise ValueError(
                f"{kind}[{i}]: unknown field {unknown[0]!r} (allowed: {name}, {', '.join(optional)})"
            )
        for key, types in optional.items():
            if key in item and not isinstance(item[key], types):
                raise ValueError(f"{kind}[{i}].{key}: expected {' or '.join(t.__name__ for t in types)}")


def _event_order(value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise ValueError("event_order: expected a non-empty list of events")
    for i, item in enumerate(value):
        if not isinstance(item, str) or item.split(":")[0] not in EVENT_KINDS:
            raise ValueError(
                f"event_order[{i}]: expected an event `kind[:detail]`, kind one of {', '.join(EVENT_KINDS)}"
            )


def _interventions(value: Any) -> None:
    if not isinstance(value, list):
        raise ValueError("interventions: expected a list of {asked, answered[, tool]}")
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"asked", "answered", "tool"} or "asked" not in item:
            raise ValueError(f"interventions[{i}]: expected {{asked, answered[, tool]}}")
        if item["asked"] not in ASKS:
            raise ValueError(f"interventions[{i}].asked: expected one of {', '.join(ASKS)}")
        if item.get("answered") not in (*ANSWERS, None):
            raise ValueError(f"interventions[{i}].answered: expected one of {', '.join(ANSWERS)} or null")


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
    elif kind == "effects":
        _named_items(kind, value, "tool", {"outcome": (str,), "id": (str,)})
    elif kind == "tool_calls":
        _named_items(kind, value, "name", {"arguments": (dict, str)})
    elif kind == "event_order":
        _event_order(value)
    elif kind == "interventions":
        _interventions(value)
    elif kind in ("output_matches", "model_told"):
        _regex(kind, value)
    elif kind == "review_items":
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
