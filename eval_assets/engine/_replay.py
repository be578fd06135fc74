"""The replay loop: one attempt of a scenario with tools, answered from its recording, never executed.

The subject is offered the scenario's tools; each tool call is answered from the scenario's replay
fixture (`Replay`); a call not in the recording gets an error result and counts as a replay miss; at
most `max_turns` model calls. Each turn's call is made by the caller's `TurnCall` (the engine's goes
through the spend path, each turn under its own key; a gate case calls the gateway once).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from eval_assets.canonical import canonical_arguments
from eval_assets.config import Scenario
from eval_assets.providers.gateway import CallSpec

from ._results import CallResult

MISS_PREFIX = "ERROR (replay miss):"


@dataclass(frozen=True)
class ToolAnswer:
    """The tool result for one call: the recorded result (hit) or an error text (miss)."""

    content: str
    hit: bool


class Replay:
    """Answers one attempt's tool calls from a scenario's replay fixture. Executes nothing.

    Keyed by (tool name, canonical arguments). A key recorded with several results gives them in
    order, then repeats the last. A call whose tool is not offered, whose arguments are not a JSON
    object, or that is not in the recording gets an error text starting with MISS_PREFIX: a miss.
    Use one instance per attempt (it counts what it served).
    """

    def __init__(self, scenario: Scenario):
        self._offered = frozenset(t.function.name for t in scenario.tools)
        self._results: dict[tuple[str, str], list[str]] = {}
        for entry in scenario.replay:
            self._results.setdefault(entry.key, []).append(entry.result)
        self._served: Counter[tuple[str, str]] = Counter()
        self.misses = 0

    def recorded_calls(self) -> list[dict[str, str]]:
        """The distinct recorded calls, in recording order: [{"name", "arguments"}]."""
        return [{"name": tool, "arguments": arguments} for tool, arguments in self._results]

    def answer(self, name: str, arguments: str | dict[str, Any]) -> ToolAnswer:
        """The result for one tool call; a miss is counted in `misses`."""
        if name not in self._offered:
            return self._miss(f"no tool named {name!r} is offered")
        try:
            key = (name, canonical_arguments(arguments))
        except ValueError as exc:
            return self._miss(f"{name}: {exc}")
        results = self._results.get(key)
        if not results:
            return self._miss(
                f"no recorded result for {name}({key[1]}); tools are replayed from a recording, never executed"
            )
        served = self._served[key]
        self._served[key] += 1
        return ToolAnswer(results[min(served, len(results) - 1)], True)

    def _miss(self, why: str) -> ToolAnswer:
        self.misses += 1
        return ToolAnswer(f"{MISS_PREFIX} {why}", False)


@dataclass(frozen=True)
class ReplayRun:
    """One attempt of a scenario with tools: the attempt as one call, and what the loop did.

    `call` sums tries, cost, tokens and latency over every turn; its text is the last assistant
    text. `turns` counts turns whose model call was made (a turn refused by a ceiling is not).
    `messages` is the whole conversation (input, assistant turns, tool results). `last_tries` is the
    tries of the last turn's call (its retries), apart from the calls of the turns before it.
    """

    call: CallResult
    turns: int
    replay_misses: int
    messages: tuple[dict[str, Any], ...]
    last_tries: int = 0


def union_hits(parts: Iterable[frozenset[int] | None]) -> frozenset[int] | None:
    """The forbidden strings found in any part of an attempt; None when any part's check is unknown."""
    found: set[int] = set()
    for hits in parts:
        if hits is None:
            return None
        found |= hits
    return frozenset(found)


TurnCall = Callable[[int, CallSpec], Awaitable[CallResult]]
"""Makes the model call of one turn (1-based) of the replay loop; the engine's goes through the spend path."""


def _assistant_message(text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


async def replay_loop(scenario: Scenario, spec: CallSpec, call_turn: TurnCall) -> ReplayRun:
    """Run one attempt of a scenario with tools; tools are answered from its replay fixture.

    Promises: at most `scenario.max_turns` model calls; every turn offers the scenario's tools, and the
    last also sends `tool_choice="none"` (it must answer); no tool is ever executed; a tool call not in
    the recording gets an error result and counts as a replay miss; the metadata of every call carries
    `turn` and `replay_calls` (the recorded calls, for the sim subject). A turn that errors or is
    excluded ends the attempt with that status (no output), and so does a last turn that still calls
    tools (`error_kind` "turn_limit"). Otherwise the output is the last assistant text.
    """
    replay = Replay(scenario)
    tools = [t.model_dump(mode="json") for t in scenario.tools]
    messages: list[dict[str, Any]] = list(spec.messages)
    spent: list[CallResult] = []

    def done(
        status: Literal["ok", "error", "excluded"], text: str | None, last: CallResult, **why: Any
    ) -> ReplayRun:
        hits = union_hits(r.policy_hits for r in spent if r.status == "ok")  # every turn, not the last alone
        call = CallResult(
            status,
            text,
            sum(r.tries for r in spent),
            sum(r.cost_usd for r in spent),
            sum(r.prompt_tokens for r in spent),
            sum(r.completion_tokens for r in spent),
            sum(r.latency_s for r in spent),
            error_kind=why.get("error_kind", last.error_kind),
            error=why.get("error", last.error),
            excluded_reason=last.excluded_reason,
            reused=all(r.reused for r in spent),
            policy_failures=len(hits) if text is not None and hits is not None else None,
            policy_hits=hits if text is not None else None,
        )
        return ReplayRun(call, sum(1 for r in spent if r.tries), replay.misses, tuple(messages), last.tries)

    for turn in range(1, scenario.max_turns + 1):
        final = turn == scenario.max_turns
        turn_spec = replace(
            spec,
            messages=list(messages),
            tools=tools,
            params={**spec.params, "tool_choice": "none"} if final else spec.params,
            metadata={**spec.metadata, "turn": turn, "replay_calls": replay.recorded_calls()},
        )
        result = await call_turn(turn, turn_spec)
        spent.append(result)
        if result.status != "ok":
            return done(result.status, None, result)
        if not result.tool_calls:
            if result.reused and not result.text:
                # A settled tool-call turn read back from a journal that stores no tool calls: its
                # calls are lost, so the attempt cannot go on. Never pass an empty answer off as one.
                return done(
                    "error",
                    None,
                    result,
                    error_kind="journal_without_tool_calls",
                    error=f"turn {turn} was reused from the spend journal without its tool calls",
                )
            messages.append({"role": "assistant", "content": result.text})
            return done("ok", result.text, result)
        calls = [
            {
                "id": c.get("id") or f"call_t{turn}_{i}",
                "name": str(c.get("name")),
                "arguments": c.get("arguments") or "{}",
            }
            for i, c in enumerate(result.tool_calls)
        ]
        messages.append(_assistant_message(result.text, calls))
        for c in calls:
            answer = replay.answer(c["name"], c["arguments"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": answer.content})
        if final:
            return done(
                "error",
                None,
                result,
                error_kind="turn_limit",
                error=f"no final answer within max_turns={scenario.max_turns}: the last turn still called tools",
            )
    raise AssertionError("unreachable: the last turn always returns")  # pragma: no cover
