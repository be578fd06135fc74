"""Runs one entry-point agent attempt in a process of its own: `python -m eval_assets.agent_worker`.

The track starts it in a new process group (killed whole at `timeout_s`, at a case's `kill_worker`,
and when the attempt ends, so nothing the agent started outlives it), writes
`{"entrypoint", "search", "sys_path", "task"}` as JSON to its stdin, and reads the JSON the worker
writes to the file named by `EVALTRACK_RESULT_FILE` when the agent is done: `{"result": ...}` (the
agent's return value) or `{"error": {"kind", "message"}}`. Nothing the agent prints can be mistaken
for its result. Imports nothing of the track but the protocol module.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import os
import sys
from typing import Any

_WIRING = ("eval_assets.defs", "eval_assets.cli", "eval_assets.definitions")


def load_entrypoint(entrypoint: str, search: tuple[str, ...] = ()) -> Any:
    """The async callable `package.module:function` names; `search`: directories tried after sys.path
    (the project root). Raises ImportError/AttributeError/TypeError with a one-line message."""
    module_name, _, attr = entrypoint.partition(":")
    if module_name.split(".")[0].startswith("dagster") or module_name.startswith(_WIRING):
        raise ImportError(
            f"{entrypoint}: an agent entry point is never Dagster or the track's Dagster wiring"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        missing = [d for d in search if d not in sys.path]
        sys.path.extend(missing)  # the project's own modules, as the documented search path
        module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{entrypoint} is not an async function (async def {attr}(task): ...)")
    return fn


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def main() -> int:
    spec = json.loads(sys.stdin.read())
    sys.path[:0] = [p for p in spec["sys_path"] if p not in sys.path]
    from eval_assets.agent_protocol import ENDPOINT_UNREACHABLE, AgentResult, AgentTask, endpoint_failure

    task = AgentTask.from_json(spec["task"])
    try:
        fn = load_entrypoint(spec["entrypoint"], tuple(spec["search"]))
        result = asyncio.run(fn(task))
    except BaseException as exc:  # the agent's own failure, one line (a SystemExit or a cancel too)
        ours = endpoint_failure(exc, task.base_url)  # the track's endpoint unreachable: the track's failure
        error = {"kind": ENDPOINT_UNREACHABLE, "message": ours} if ours else {"kind": "agent_raised", "message": _one_line(exc)}
        text = json.dumps({"error": error})
    else:
        if isinstance(result, AgentResult):
            result = dataclasses.asdict(result)
        try:
            text = json.dumps({"result": result})
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": {"kind": "agent_shape", "message": f"result: not JSON data ({exc})"}})
    target = os.environ["EVALTRACK_RESULT_FILE"]
    with open(target + ".part", "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(target + ".part", target)  # whole or absent: a kill mid-write leaves no result
    return 0


if __name__ == "__main__":
    sys.exit(main())
