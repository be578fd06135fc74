"""Agents that try to escape their attempt's bounds (tests/test_agent_cases.py). Each writes the pids
of what it started to the file named by EVALTRACK_TEST_PIDS, so the test can look for survivors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from typing import Any


def _started(*pids: int) -> None:
    with open(os.environ["EVALTRACK_TEST_PIDS"], "a") as fh:
        fh.write("".join(f"{p}\n" for p in pids))


async def swallows_cancel_then_spins(task: Any) -> dict[str, Any]:
    """Ignores cancellation, then blocks its own event loop for good."""
    _started(os.getpid())
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        pass
    while True:
        time.sleep(0.05)


async def forks_and_returns(task: Any) -> dict[str, Any]:
    """Starts a long-lived child (and a grandchild through a shell) and returns at once."""
    child = subprocess.Popen(["sleep", "300"])
    shell = subprocess.Popen(["sh", "-c", 'sleep 300 & echo $! >> "$EVALTRACK_TEST_PIDS"; wait'])
    _started(os.getpid(), child.pid, shell.pid)
    return {"output": "done"}


async def forks_and_hangs(task: Any) -> dict[str, Any]:
    child = subprocess.Popen(["sleep", "300"])
    _started(os.getpid(), child.pid)
    await asyncio.Event().wait()
    return {"output": "unreachable"}
