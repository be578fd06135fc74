"""One agent attempt's interventions, tool invocations and events (docs/agents.md, "Interventions").

The endpoint hands every ask (`POST /v1/interventions`), tool report (`POST /v1/tool_invocations`)
and model call of an attempt to its `AttemptControl`, which answers asks from a case's scripted
`interventions:` list in order (every answer from the principal `eval.approver`), fires the script's
`kill_worker` and `disconnect` steps at their points, and records what happened as events. Outside a
case there is no script: no person answers during the capability track, so every ask is denied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eval_assets.agent_protocol import APPROVER
from eval_assets.config import RESPONSES, Intervention

TOOL_EVENTS = ("tool_started", "effect_sent", "tool_finished")
OUTCOMES = ("ok", "failed", "denied", "cancelled", "uncertain")
TRACK_PRINCIPAL = "eval.track"


class ControlError(Exception):
    """A request the control refuses (HTTP status and message)."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass
class AttemptControl:
    """The interventions, tool invocations and events of one attempt (over its re-runs, in a case).

    `script` None: no person answers (the capability track), every ask is denied. `kill` is set by
    the runner of an entry-point attempt; `review` receives each invocation reported `uncertain`."""

    script: tuple[Intervention, ...] | None = None
    review: Callable[[dict[str, Any]], None] | None = None
    run: int = 1
    kill: Callable[[], None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    invocations: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # scripted steps that could not be honoured
    killed_at: str | None = None
    _next: int = 0
    _order: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)  # (run, id) -> (call, pos)

    # --- what the endpoint sees ---------------------------------------------------------------

    def event(self, event_type: str, /, **detail: Any) -> None:
        self.events.append({"seq": len(self.events) + 1, "run": self.run, "type": event_type, **detail})

    def _head(self) -> Intervention | None:
        if self.script is None or self._next >= len(self.script):
            return None
        return self.script[self._next]

    def disconnects(self, index: int) -> bool:
        """Whether model call `index` is to be dropped (the script's next step says so)."""
        head = self._head()
        if head is not None and head.kind == "disconnect" and head.call == index:
            self._next += 1
            self.event("disconnected", call=index)
            return True
        return False

    def model_call(self, index: int, status: str, tool_calls: list[dict[str, Any]] | None) -> None:
        for position, call in enumerate(tool_calls or []):
            self._order.setdefault((self.run, str(call.get("id"))), (index, position))
        names = [str(c.get("name")) for c in tool_calls or []]
        self.event("model_call", call=index, status=status, tool_calls=names)

    def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to an ask (`kind`: approval or question); raises ControlError."""
        kind = body.get("kind")
        if kind not in ("approval", "question"):
            raise ControlError(400, "invalid_request_error", "kind: expected approval or question")
        if kind == "approval" and not all(isinstance(body.get(k), str) for k in ("tool_call_id", "tool")):
            raise ControlError(400, "invalid_request_error", "an approval names tool_call_id and tool")
        if kind == "question" and not isinstance(body.get("text"), str):
            raise ControlError(400, "invalid_request_error", "a question has text")
        asked = {
            "kind": kind,
            **({"tool": body["tool"], "tool_call_id": body["tool_call_id"]} if kind == "approval" else {}),
        }
        self.event("asked", **asked)
        if self.script is None:
            told = {
                "decision": "denied",
                "principal": TRACK_PRINCIPAL,
                "reason": "no person answers during the capability track",
            }
            self.event("answered", decision="denied", principal=TRACK_PRINCIPAL)
            return told
        head = self._head()
        if head is None or head.kind not in RESPONSES:
            why = (
                "the script has no step left" if head is None else f"the next scripted step is {head.label()}"
            )
            self.problems.append(f"an unscripted {kind} ask ({why})")
            raise ControlError(409, "unscripted", f"nothing scripted answers this {kind}: {why}")
        if kind == "question" and head.kind in ("approve", "deny"):
            self.problems.append(f"a question was asked where the script {head.kind}s an approval")
            raise ControlError(409, "unscripted", f"the next scripted step ({head.kind}) answers an approval")
        if kind == "approval" and head.kind == "answer":
            self.problems.append("an approval was asked where the script answers a question")
            raise ControlError(409, "unscripted", "the next scripted step answers a question")
        self._next += 1
        decision = {"approve": "approved", "deny": "denied", "answer": "answer", "cancel": "cancel"}[
            head.kind
        ]
        answer: dict[str, Any] = {
            "decision": decision,
            "principal": APPROVER,
            "reason": head.reason,
            "text": head.text,
        }
        self.event("answered", decision=decision, principal=APPROVER)
        return answer

    def report(self, body: dict[str, Any]) -> bool:
        """Record a tool report; True when the script kills the worker here (before it is answered)."""
        event, call_id, tool = body.get("event"), body.get("tool_call_id"), body.get("tool")
        if event not in TOOL_EVENTS or not isinstance(call_id, str) or not isinstance(tool, str):
            raise ControlError(
                400,
                "invalid_request_error",
                "expected event (tool_started|effect_sent|tool_finished), tool_call_id, tool",
            )
        outcome = body.get("outcome")
        if event == "tool_finished" and outcome not in OUTCOMES:
            raise ControlError(
                400, "invalid_request_error", f"outcome: expected one of {', '.join(OUTCOMES)}"
            )
        if event == "effect_sent" and not isinstance(body.get("at"), str):
            raise ControlError(400, "invalid_request_error", "at: the effect's time (ISO 8601) is required")
        record = self.invocations.setdefault(
            (self.run, call_id),
            {
                "id": call_id,
                "tool": tool,
                "arguments": body.get("arguments"),
                "run": self.run,
                "started": False,
                "effect_sent_at": None,
                "outcome": None,
                "detail": None,
            },
        )
        if event == "tool_started":
            record["started"] = True
        elif event == "effect_sent":
            record["effect_sent_at"] = body["at"]
        else:
            record["outcome"], record["detail"] = outcome, body.get("detail")
        self.event(event, tool=tool, tool_call_id=call_id, **({"outcome": outcome} if outcome else {}))
        if event == "tool_finished" and outcome == "uncertain" and self.review is not None:
            self.review(dict(record))
            self.event("review_item", tool=tool, tool_call_id=call_id)
        head = self._head()
        if head is not None and head.kind == "kill_worker" and head.at == event and head.tool == tool:
            self._next += 1
            self.killed_at = f"{event} of {tool}"
            self.event("killed", at=event, tool=tool)
            if self.kill is None:
                self.problems.append(
                    f"kill_worker at {self.killed_at}: this agent has no worker process to kill"
                )
                return False
            return True
        return False

    def restart(self) -> None:
        """The attempt runs again after a scripted kill (the same script, events and invocations)."""
        self.run += 1
        self.killed_at = None

    def finished(self, output: str | None) -> None:
        if output is not None:
            self.event("output")

    def unreached(self) -> list[str]:
        """Scripted steps never reached."""
        if self.script is None:
            return []
        return [s.label() for s in self.script[self._next :]]

    def tool_invocations(self) -> list[dict[str, Any]]:
        """Every reported invocation, ordered by (run, model call, position in its batch, id): never by
        arrival, so a concurrent batch stores the same order on every run."""

        def key(item: tuple[tuple[int, str], dict[str, Any]]) -> tuple[int, int, int, str]:
            (run, call_id), _ = item
            call, position = self._order.get((run, call_id), (0, 0))
            return (run, call, position, call_id)

        return [dict(v) for _, v in sorted(self.invocations.items(), key=key)]

    def trajectory(self) -> dict[str, Any]:
        return {"tool_invocations": self.tool_invocations(), "events": list(self.events)}
