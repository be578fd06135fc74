"""Agents for tests/test_agents.py, named by what they do wrong (or right). Imported by entrypoint."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from examples.agents.tool_agent import endpoint_client  # type: ignore[import-not-found]


async def raises(task: Any) -> dict[str, Any]:
    raise RuntimeError("tool registry is empty\nTraceback (most recent call last): secret details")


async def hangs(task: Any) -> dict[str, Any]:
    await asyncio.Event().wait()  # never set
    raise AssertionError("unreachable")


async def wrong_shape(task: Any) -> dict[str, Any]:
    return {"answer": "the field is called output"}


async def output_not_text(task: Any) -> dict[str, Any]:
    return {"output": 42}


def not_async(task: Any) -> dict[str, Any]:
    return {"output": "sync"}


async def streams(task: Any) -> dict[str, Any]:
    """One streamed call without tools: the text arrives as chunks."""
    async with endpoint_client(task) as client:
        stream = await client.chat.completions.create(model=task.model, messages=task.messages, stream=True)
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    return {"output": "".join(parts)}


async def keeps_calling(task: Any) -> dict[str, Any]:
    """Calls until the endpoint refuses, then answers with the refusal's status."""
    async with endpoint_client(task) as client:
        for _ in range(50):
            try:
                await client.chat.completions.create(model=task.model, messages=task.messages)
            except Exception as exc:  # the refusal the test looks for
                why = f"stopped: {getattr(exc, 'status_code', type(exc).__name__)}"
                return {"output": why, "notes": why}
    return {"output": "never refused"}


async def wrong_token(task: Any) -> dict[str, Any]:
    """Calls the endpoint with a bearer token that is not the attempt's; answers with the status."""
    async with httpx.AsyncClient(trust_env=False) as client:
        bad = await client.post(
            f"{task.base_url}/chat/completions",
            headers={"Authorization": " ".join(("Bearer", "0" * 32))},
            json={"model": task.model, "messages": task.messages},
        )
    return {"output": str(bad.status_code)}


async def no_retries(task: Any) -> dict[str, Any]:
    """The example's tool loop over an OpenAI client with the SDK's default timeouts (a 5 s connect)
    and no retries: the track must serve even it on a busy machine."""
    from openai import AsyncOpenAI

    from examples.agents.tool_agent import tool_loop  # type: ignore[import-not-found]

    key = task.api_key
    client = AsyncOpenAI(
        base_url=task.base_url,
        api_key=key,
        max_retries=0,
        http_client=httpx.AsyncClient(trust_env=False),
    )
    return await tool_loop(client, task)


def _endpoint_refused(task: Any) -> httpx.ConnectError:
    """What httpx raises when the track's endpoint does not accept the agent's connection."""
    return httpx.ConnectError(
        "[Errno 111] Connection refused", request=httpx.Request("POST", f"{task.base_url}/chat/completions")
    )


async def endpoint_refused_once(task: Any) -> dict[str, Any]:
    """The endpoint refuses this attempt's first connection; its next try runs the example's loop.
    Each try is a process of its own: the first is marked by a file the track's process outlives."""
    import hashlib
    import os
    import tempfile

    key = hashlib.sha256(task.attempt_id.encode()).hexdigest()[:16]
    mark = os.path.join(tempfile.gettempdir(), f"evaltrack-refused-{os.getppid()}-{key}")
    if not os.path.exists(mark):
        open(mark, "w").close()
        raise _endpoint_refused(task)
    from examples.agents.tool_agent import run  # type: ignore[import-not-found]

    return await run(task)  # type: ignore[no-any-return]


async def endpoint_always_refused(task: Any) -> dict[str, Any]:
    """One call answered, then the endpoint refuses every connection of the attempt."""
    async with endpoint_client(task) as client:
        await client.chat.completions.create(model=task.model, messages=task.messages)
    raise _endpoint_refused(task)


async def other_host_refused(task: Any) -> dict[str, Any]:
    """The agent's own service (not the track's endpoint) refuses it: the agent's failure."""
    raise httpx.ConnectError(
        "[Errno 111] Connection refused", request=httpx.Request("GET", "http://127.0.0.1:9/tool")
    )
