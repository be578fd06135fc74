"""The run engine: plain asyncio, no Dagster.

Runs every (scenario, repeat) attempt of a build with adaptive concurrency per provider, a per-call
timeout, bounded retries with jittered backoff on retryable errors only, and deterministic attempt
keys (`eval_assets.spend.AttemptRef`). Every try goes through the one spend path (reserve -> call ->
settle). A provider error is an attempt with status `error` and a reason, never a score.

`_calls`: the one subject/judge `CallSpec` builder; `_replay`: the replay loop for a scenario with
tools, and `Replay`, which answers its tool calls from the recording; `_results`: what a run returns;
`_agent`: agent subjects and the
track's OpenAI-compatible endpoint their model calls go through (`_endpoint_host`: served from a
thread of its own); `_limiter`: the adaptive in-flight limit per provider; `_engine`: the retry engine.
"""

from ._agent import (
    AgentCallRecord,
    AgentEndpoint,
    AgentResult,
    AgentRun,
    AgentShapeError,
    AgentTask,
    AgentUnreachable,
    EndpointFailed,
    load_entrypoint,
    parse_agent_result,
    request_hash,
    run_agent,
)
from ._calls import judge_spec, subject_spec
from ._control import AttemptControl, ControlError
from ._engine import Engine
from ._limiter import MAX_PAUSE_S, AimdLimit, Limiters, ProviderLimiter, provider_key
from ._replay import MISS_PREFIX, Replay, ReplayRun, ToolAnswer, TurnCall, replay_loop
from ._results import CallResult, JudgeResult, Progress, StoredAttempt, SubjectResult, stored_trajectory

__all__ = [
    "load_entrypoint",
    "AttemptControl",
    "ControlError",
    "AgentCallRecord",
    "AgentEndpoint",
    "AgentResult",
    "AgentRun",
    "AgentShapeError",
    "AgentTask",
    "AgentUnreachable",
    "EndpointFailed",
    "parse_agent_result",
    "request_hash",
    "run_agent",
    "MAX_PAUSE_S",
    "MISS_PREFIX",
    "AimdLimit",
    "Limiters",
    "ProviderLimiter",
    "provider_key",
    "CallResult",
    "Engine",
    "JudgeResult",
    "Progress",
    "Replay",
    "ReplayRun",
    "StoredAttempt",
    "SubjectResult",
    "ToolAnswer",
    "TurnCall",
    "judge_spec",
    "replay_loop",
    "stored_trajectory",
    "subject_spec",
]
