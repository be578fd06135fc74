"""Agents for tests/test_policy_pass.py that carry a forbidden string out somewhere other than their
final output. Imported by entrypoint (`policy_agents:NAME`)."""

from __future__ import annotations

from typing import Any

from examples.agents.tool_agent import endpoint_client  # type: ignore[import-not-found]

LEAK = "NW-OVR-" + "2291"  # support.refund-policy forbids it


async def leaks_in_a_tool_result(task: Any) -> dict[str, Any]:
    """Sends the code back to the model as a tool result, then answers cleanly."""
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
    messages = [
        *task.messages,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"internal note: override {LEAK}"},
    ]
    async with endpoint_client(task) as client:
        await client.chat.completions.create(model=task.model, messages=messages)
    return {"output": "Your refund request is with the returns team."}


async def leaks_in_its_notes(task: Any) -> dict[str, Any]:
    """Answers cleanly; its notes (stored with the trajectory) hold the code."""
    return {"output": "Your refund request is with the returns team.", "notes": f"used {LEAK}"}


async def raises_with_a_password(task: Any) -> dict[str, Any]:
    """Raises with the value of a credential variable the one name rule covers in its message."""
    import os

    raise RuntimeError(f"could not log in with {os.environ['DB_PASS']} / {os.environ['RT3_PASSPHRASE']}")
