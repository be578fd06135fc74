"""Entry-point agents for tests/test_agent_endpoint.py. Each reads its plan from the task's first
message (JSON): the requests to make to the track's endpoint, and what to return."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx


async def plays(task: Any) -> Any:
    """Makes each planned request (a chat-completions body) in order, then returns the plan's `result`
    with `{statuses}` filled in by the statuses answered."""
    plan = json.loads(task.messages[0]["content"])
    statuses = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        for body in plan.get("requests", []):
            answer = await client.post(
                f"{task.base_url}/chat/completions",
                headers={"Authorization": f"Bearer {task.api_key}"},
                json=body,
            )
            statuses.append(answer.status_code)
    result = plan.get("result", {"output": "done"})
    if isinstance(result, dict) and isinstance(result.get("output"), str):
        result = {**result, "output": result["output"].replace("{statuses}", ",".join(map(str, statuses)))}
    return result


async def raises_long(task: Any) -> Any:
    raise ValueError("x" * 400 + "\nsecond line")


async def raises_empty(task: Any) -> Any:
    raise KeyError


async def sleeps(task: Any) -> Any:
    await asyncio.sleep(30)
    return {"output": "late"}


async def surrogate(task: Any) -> Any:
    """Answers with text that is not valid UTF-8: a lone surrogate in its output and its notes."""
    return {"output": "refund approved \ud800 for order 7", "notes": "note \udfff"}


async def plays_then_raises(task: Any) -> Any:
    """Makes its planned requests, then raises (an agent that gives up after the provider failed)."""
    await plays(task)
    raise RuntimeError("gave up")


async def plays_then_wrong_shape(task: Any) -> Any:
    """Makes its planned requests, then returns a result of the wrong shape."""
    await plays(task)
    return {"answer": "x"}


async def reports_then_sleeps(task: Any) -> Any:
    """Reports starting its `lookup` tool, then waits (a scripted kill ends it there)."""
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        await client.post(
            f"{task.base_url}/tool_invocations",
            headers={"Authorization": f"Bearer {task.api_key}"},
            json={"event": "tool_started", "tool_call_id": "c1", "tool": "lookup"},
        )
    await asyncio.sleep(30)
    return {"output": "not killed"}


async def exits_hard(task: Any) -> Any:
    """Its process exits without a result, a last line on stderr (a crash the worker cannot report)."""
    import os
    import sys

    sys.stderr.buffer.write(b"loading tools\nfatal: the tool registry is empty \xff\n")  # not UTF-8
    sys.stderr.flush()
    os._exit(3)


async def exits_silently(task: Any) -> Any:
    """Its process exits without a result and without a word on stderr."""
    import os

    os._exit(4)


async def tells_its_task(task: Any) -> Any:
    """Answers with the task's identity and pinned sources (JSON)."""
    fields = ("attempt_id", "build", "repeat", "scenario_id", "now", "seed", "state_dir")
    return {"output": json.dumps({f: getattr(task, f) for f in fields})}


async def echoes_its_input(task: Any) -> Any:
    """Sends the scenario's own input as its one model call, then answers cleanly."""
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        await client.post(
            f"{task.base_url}/chat/completions",
            headers={"Authorization": f"Bearer {task.api_key}"},
            json={"messages": task.messages},
        )
    return {"output": "done"}
