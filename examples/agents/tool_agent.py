"""A small tool-using agent with no framework: a loop over the OpenAI SDK and two local tools.

The track calls `run(task)` once per attempt (docs/agents.md). Every model call goes to
`task.base_url` with `task.api_key` (the track's endpoint on 127.0.0.1, which pays for it through the
spend journal); the tools run here, in the agent's own process.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import AsyncOpenAI

MAX_STEPS = 6

ORDERS = {
    "NW-51877": {"item": "Ridgeline 2 tent", "status": "delivered", "delivered_days_ago": 45},
    "NW-48213": {"item": "Trail 40 backpack", "status": "in transit", "delivered_days_ago": None},
}
POLICIES = {
    "tents": "Full refund within 30 days of delivery; days 31 to 90: store credit; poles carry a 1-year warranty.",
}


def lookup_order(order_number: str) -> str:
    return json.dumps(ORDERS.get(order_number, {"error": f"no order {order_number}"}))


def get_refund_policy(category: str) -> str:
    return POLICIES.get(category, "Full refund within 30 days of delivery; days 31 to 90: store credit.")


LOCAL_TOOLS = {"lookup_order": lookup_order, "get_refund_policy": get_refund_policy}


def call_tool(name: str, arguments: str) -> str:
    """Run one local tool; a bad call is an error text the model can read, never an exception."""
    tool = LOCAL_TOOLS.get(name)
    if tool is None:
        return f"error: no local tool {name!r}"
    try:
        return str(tool(**json.loads(arguments or "{}")))
    except (TypeError, ValueError) as exc:
        return f"error: {name}: {exc}"


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


async def run(task: Any) -> dict[str, Any]:
    """One attempt: ask the model, run the tools it calls, until it answers (at most MAX_STEPS calls)."""
    return await tool_loop(endpoint_client(task), task)


async def tool_loop(client: AsyncOpenAI, task: Any) -> dict[str, Any]:
    """The agent's loop over `client`: ask, run the tools the model calls, until it answers."""
    offered = [t for t in task.tools if t["function"]["name"] in LOCAL_TOOLS]
    messages: list[dict[str, Any]] = list(task.messages)
    tool_calls = 0
    async with client:
        for _ in range(MAX_STEPS):
            reply = await client.chat.completions.create(
                model=task.model, messages=messages, **({"tools": offered} if offered else {})
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return {"output": message.content or "", "notes": f"{tool_calls} local tool calls"}
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                tool_calls += 1
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": call_tool(call.function.name, call.function.arguments),
                    }
                )
    return {"output": "I could not finish within my step limit.", "notes": f"{tool_calls} local tool calls"}
