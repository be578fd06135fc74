"""Interventions: what a case scripts for an agent attempt (docs/specs/deterministic-suite.md, "Agent
cases"), in order: responses to the agent's asks (approve, deny, answer, cancel) and triggers at points
of the attempt (kill_worker, disconnect). One format and one validation; the engine's attempt control
plays them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

InterventionKind = Literal["approve", "deny", "answer", "cancel", "kill_worker", "disconnect"]
RESPONSES = frozenset({"approve", "deny", "answer", "cancel"})
KILL_POINTS = ("tool_started", "effect_sent")


@dataclass(frozen=True)
class Intervention:
    """One scripted step: a response to the next ask (`approve`, `deny` with `reason`, `answer` with
    `text`, `cancel`), or a trigger (`kill_worker` at `at` of `tool`; `disconnect` of model call `call`)."""

    kind: InterventionKind
    reason: str | None = None
    text: str | None = None
    at: str | None = None
    tool: str | None = None
    call: int | None = None

    def label(self) -> str:
        if self.kind == "kill_worker":
            return f"kill_worker at {self.at} of {self.tool}"
        if self.kind == "disconnect":
            return f"disconnect call {self.call}"
        return self.kind


def _text(kind: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind}: expected a non-empty string ({what})")
    return value


def parse_intervention(item: Any) -> Intervention:
    """`approve`, `cancel`, `{deny: REASON}`, `{answer: TEXT}`, `{kill_worker: {at, tool}}`,
    `{disconnect: {call: N}}`. Raises ValueError saying what is wrong."""
    if item in ("approve", "cancel"):
        return Intervention(item)
    if not isinstance(item, dict) or len(item) != 1:
        raise ValueError(
            "an intervention is `approve`, `cancel` or a one-key mapping "
            "(deny, answer, kill_worker, disconnect)"
        )
    ((kind, value),) = item.items()
    if kind == "deny":
        return Intervention("deny", reason=_text(kind, value, "the reason"))
    if kind == "answer":
        return Intervention("answer", text=_text(kind, value, "the answer"))
    if kind == "kill_worker":
        if not isinstance(value, dict) or set(value) != {"at", "tool"}:
            raise ValueError("kill_worker: expected {at: tool_started|effect_sent, tool: NAME}")
        if value["at"] not in KILL_POINTS:
            raise ValueError(f"kill_worker.at: expected one of {', '.join(KILL_POINTS)}")
        return Intervention(
            "kill_worker", at=value["at"], tool=_text("kill_worker.tool", value["tool"], "a tool")
        )
    if kind == "disconnect":
        call = value.get("call") if isinstance(value, dict) and set(value) == {"call"} else None
        if isinstance(call, bool) or not isinstance(call, int) or call < 1:
            raise ValueError("disconnect: expected {call: N} (the model call to drop, 1-based)")
        return Intervention("disconnect", call=call)
    raise ValueError(
        f"unknown intervention {kind!r} (known: approve, deny, answer, cancel, kill_worker, disconnect)"
    )


def parse_interventions(items: list[Any]) -> tuple[Intervention, ...]:
    out = []
    for index, item in enumerate(items):
        try:
            out.append(parse_intervention(item))
        except ValueError as exc:
            raise ValueError(f"intervention {index}: {exc}") from None
    return tuple(out)
