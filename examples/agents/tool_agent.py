"""A small tool-using agent with no framework: a loop over the OpenAI SDK, two read tools, one write tool
that needs a person's approval, and a question it may put to a person.

The track calls `run(task)` once per attempt, in a process of its own (docs/agents.md). Every model
call goes to `task.base_url` with `task.api_key` (the track's endpoint on 127.0.0.1, which pays for it
through the spend journal); the tools run here. The agent's production paths, which the deterministic
suite drives as they are (there is no test mode):

- **approval**: before `create_return_ticket` sends anything it asks for approval
  (`task.ask_approval`); denied, it tells the model why; cancelled, it stops the attempt.
- **effects and the watermark**: each write is journaled in `task.state_dir` before it starts
  (`started`), right after its effect was sent (`effect_sent`, the watermark) and when it finished, and
  reported to the track with `effect_sent_at`. A re-run after a crash reads that journal: an invocation
  started but not past the watermark is executed again (nothing was sent); one past the watermark but
  not finished is UNCERTAIN: reported so, queued for a person, and the model is told the outcome is
  unknown, never that it failed (re-sending could create a second ticket).
- **disconnect**: a call whose connection drops is made again once; a second drop ends the attempt.
- **determinism**: the time it stamps is `task.now` and its ticket ids come from `task.new_id`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
from openai import APIConnectionError, AsyncOpenAI

MAX_STEPS = 6

ORDERS = {
    "NW-51877": {"item": "Ridgeline 2 tent", "status": "delivered", "delivered_days_ago": 45},
    "NW-48213": {"item": "Trail 40 backpack", "status": "in transit", "delivered_days_ago": None},
}
POLICIES = {
    "tents": "Full refund within 30 days of delivery; days 31 to 90: store credit; poles carry a 1-year warranty.",
}
READ_TOOLS = ("lookup_order", "get_refund_policy")
WRITE_TOOLS = ("create_return_ticket",)  # each needs a person's approval and sends an external effect
ASK_PERSON = {
    "type": "function",
    "function": {
        "name": "ask_person",
        "description": "Ask the support lead a question when the policy does not settle the case.",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    },
}
UNCERTAIN = (
    "UNCERTAIN: the request to create this return ticket was sent, but its outcome is unknown (the "
    "worker stopped before the returns desk answered). Do not assume it failed and do not send it "
    "again; a person will check the returns desk and follow up."
)


class Cancelled(Exception):
    """A person cancelled the attempt."""


def lookup_order(order_number: str) -> str:
    return json.dumps(ORDERS.get(order_number, {"error": f"no order {order_number}"}))


def get_refund_policy(category: str) -> str:
    return POLICIES.get(category, "Full refund within 30 days of delivery; days 31 to 90: store credit.")


LOCAL_TOOLS = {"lookup_order": lookup_order, "get_refund_policy": get_refund_policy}


def call_tool(name: str, arguments: str) -> str:
    """Run one read tool; a bad call is an error text the model can read, never an exception."""
    tool = LOCAL_TOOLS.get(name)
    if tool is None:
        return f"error: no local tool {name!r}"
    try:
        return str(tool(**json.loads(arguments or "{}")))
    except (TypeError, ValueError) as exc:
        return f"error: {name}: {exc}"


class Journal:
    """The agent's own durable record of its writes, one JSON file in `state_dir` (in memory without
    one), rewritten whole and atomically at every step."""

    def __init__(self, state_dir: str | None):
        self.path = Path(state_dir) / "invocations.json" if state_dir else None
        self.entries: dict[str, dict[str, Any]] = (
            json.loads(self.path.read_text()) if self.path is not None and self.path.exists() else {}
        )

    def get(self, call_id: str) -> dict[str, Any] | None:
        return self.entries.get(call_id)

    def put(self, call_id: str, **fields: Any) -> None:
        self.entries[call_id] = {**self.entries.get(call_id, {}), **fields}
        if self.path is not None:
            part = self.path.with_suffix(".part")
            part.write_text(json.dumps(self.entries, sort_keys=True))
            os.replace(part, self.path)


class ReturnsDesk:
    """The external system the write tool changes: a JSON-lines file of tickets in `state_dir`."""

    def __init__(self, state_dir: str | None):
        self.path = Path(state_dir) / "returns_desk.jsonl" if state_dir else None
        self.tickets: list[dict[str, Any]] = []

    def create(self, ticket: dict[str, Any]) -> None:
        self.tickets.append(ticket)
        if self.path is not None:
            with self.path.open("a") as fh:
                fh.write(json.dumps(ticket, sort_keys=True) + "\n")


async def create_return_ticket(task: Any, journal: Journal, desk: ReturnsDesk, call: Any) -> str:
    """The write tool, past its approval: journal, send, watermark, report."""
    name, arguments = call.function.name, call.function.arguments
    journal.put(call.id, state="started")
    await task.report("tool_started", call.id, name, arguments=arguments)
    try:
        fields = json.loads(arguments or "{}")
    except ValueError as exc:
        journal.put(call.id, state="finished", result=f"error: {name}: {exc}")
        await task.report("tool_finished", call.id, name, outcome="failed", detail=str(exc))
        return f"error: {name}: {exc}"
    ticket = {"ticket": task.new_id("RT"), "created_at": task.now, **fields}
    desk.create(ticket)  # the external effect
    journal.put(call.id, state="effect_sent", effect_sent_at=task.now)
    await task.report("effect_sent", call.id, name, at=task.now)
    result = json.dumps({"ticket": ticket["ticket"], "status": "open"})
    journal.put(call.id, state="finished", result=result)
    await task.report("tool_finished", call.id, name, outcome="ok")
    return result


async def write_tool(task: Any, journal: Journal, desk: ReturnsDesk, call: Any) -> str:
    """A write tool call: recovered from the journal after a crash, else approved first."""
    name, entry = call.function.name, journal.get(call.id) or {}
    state = entry.get("state")
    if state == "finished":
        return str(entry["result"])
    if state == "effect_sent":  # past the watermark, never finished: the effect may have happened
        journal.put(call.id, state="finished", result=UNCERTAIN)
        await task.report("tool_finished", call.id, name, outcome="uncertain", detail="killed after the effect was sent")
        return UNCERTAIN
    if state not in ("approved", "started"):  # started and not sent: approved before, run it again
        told = await task.ask_approval(call.id, name, call.function.arguments)
        if told.decision == "cancel":
            await task.report("tool_finished", call.id, name, outcome="cancelled")
            raise Cancelled(f"{name} cancelled by {told.principal}")
        if told.decision != "approved":
            journal.put(call.id, state="finished", result=f"denied by {told.principal}: {told.reason}")
            await task.report("tool_finished", call.id, name, outcome="denied", detail=told.reason)
            return f"Not done: a person ({told.principal}) denied {name}: {told.reason}"
        journal.put(call.id, state="approved", approved_by=told.principal)
    return await create_return_ticket(task, journal, desk, call)


async def read_tool(task: Any, call: Any) -> str:
    name = call.function.name
    await task.report("tool_started", call.id, name, arguments=call.function.arguments)
    result = call_tool(name, call.function.arguments)
    await task.report("tool_finished", call.id, name, outcome="failed" if result.startswith("error:") else "ok")
    return result


async def ask_person(task: Any, call: Any) -> str:
    try:
        question = str(json.loads(call.function.arguments or "{}")["question"])
    except (ValueError, KeyError) as exc:
        return f"error: ask_person: {exc}"
    told = await task.ask_question(question)
    if told.decision == "cancel":
        raise Cancelled(f"cancelled by {told.principal}")
    if told.decision != "answer":
        return f"No answer from a person ({told.reason or told.decision})."
    return f"The support lead ({told.principal}) answered: {told.text}"


def endpoint_client(task: Any) -> AsyncOpenAI:
    """An OpenAI client for the track's endpoint; the attempt's bearer token is its key."""
    key = task.api_key
    return AsyncOpenAI(
        base_url=task.base_url,
        api_key=key,
        # a long connect timeout rides out a busy machine; no SDK retries: the track retries the model's
        # errors itself, and a retried request would count as the attempt's next call
        max_retries=0,
        timeout=httpx.Timeout(600.0, connect=60.0),
        http_client=httpx.AsyncClient(trust_env=False),  # the endpoint is on 127.0.0.1: no proxy
    )


async def complete(client: AsyncOpenAI, **request: Any) -> Any:
    """One model call; a dropped connection is tried once more, a second drop ends the attempt."""
    try:
        return await client.chat.completions.create(**request)
    except APIConnectionError:
        return await client.chat.completions.create(**request)


async def run(task: Any) -> dict[str, Any]:
    """One attempt: ask the model, run the tools it calls, until it answers (at most MAX_STEPS calls)."""
    return await tool_loop(endpoint_client(task), task)


async def tool_loop(client: AsyncOpenAI, task: Any) -> dict[str, Any]:
    """The agent's loop over `client`: ask, run the tools the model calls, until it answers."""
    offered = [t for t in task.tools if t["function"]["name"] in READ_TOOLS + WRITE_TOOLS] + [ASK_PERSON]
    messages: list[dict[str, Any]] = list(task.messages)
    journal, desk = Journal(task.state_dir), ReturnsDesk(task.state_dir)
    tool_calls = 0
    async with client:
        for _ in range(MAX_STEPS):
            reply = await complete(client, model=task.model, messages=messages, tools=offered)
            message = reply.choices[0].message
            if not message.tool_calls:
                return {"output": message.content or "", "notes": f"{tool_calls} tool calls"}
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:  # in order, one at a time: a write waits for its approval
                tool_calls += 1
                name = call.function.name
                try:
                    if name in WRITE_TOOLS:
                        content = await write_tool(task, journal, desk, call)
                    elif name == "ask_person":
                        content = await ask_person(task, call)
                    else:
                        content = await read_tool(task, call)
                except Cancelled as exc:
                    return {"output": f"Cancelled: {exc}. Nothing further was done.", "notes": str(exc)}
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return {"output": "I could not finish within my step limit.", "notes": f"{tool_calls} tool calls"}
