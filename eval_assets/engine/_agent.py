"""Agent subjects (docs/agents.md): the build's own code runs once per attempt, and its model calls go
through the track's OpenAI-compatible endpoint (`AgentEndpoint`) on 127.0.0.1.

The endpoint answers `POST /v1/chat/completions` (tools and `stream` included) for a per-attempt bearer
token. Each call is made by the caller's `TurnCall` under its call index (the engine's goes through the
one spend path: keyed, reserved, priced, ceiling-checked, settled, reused after a crash); the endpoint
only translates between the OpenAI wire shape and `CallSpec`/`CallResult`. A call a ceiling refuses
answers 429 and the attempt is excluded, whatever the agent returns afterwards.

An agent's outcome is one of: its output (`ok`), `agent_raised` (one line naming the exception, no
traceback), `agent_timeout`, `agent_shape` (naming the field), `agent_http` (a non-200 answer),
excluded (a ceiling); none of them is a score. An HTTP agent that cannot be reached raises
`AgentUnreachable` naming the URL: the run refuses rather than recording an error per attempt. An
agent that could not connect to the endpoint failed for the track's reason: the attempt is tried
again, and raises `EndpointFailed` when it keeps failing (never an error of the agent's).

The endpoint is served from a thread of its own (`_endpoint_host`), and admits at most `capacity`
attempts at once: a further attempt waits to start, so a burst of starts never stalls the loop the
agents' clients run on past their connect timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from eval_assets.agent_protocol import (
    ENDPOINT_UNREACHABLE,
    AgentResult,
    AgentShapeError,
    AgentTask,
    endpoint_failure,
    parse_agent_result,
)
from eval_assets.agent_worker import load_entrypoint
from eval_assets.canonical import canonical_json
from eval_assets.config import Agent, Scenario
from eval_assets.judging import PolicyCheck, policy_texts
from eval_assets.providers.gateway import CallSpec, import_call_modules
from eval_assets.redact import redact
from eval_assets.spend import pid_alive

from ._control import AttemptControl, ControlError
from ._endpoint_host import EndpointHost, on_loop
from ._replay import union_hits
from ._results import CallResult

__all__ = [
    "AgentCall",
    "AgentEndpoint",
    "AgentResult",
    "AgentRun",
    "AgentShapeError",
    "AgentTask",
    "AgentUnreachable",
    "load_entrypoint",
    "parse_agent_result",
    "run_agent",
]

AgentCall = Callable[[int, CallSpec], Awaitable[CallResult]]
"""Makes the agent's call number `index` (1-based); the engine's goes through the spend path."""


class AgentUnreachable(Exception):
    """An HTTP agent did not accept a connection: the run refuses (no attempt of it can run)."""


class EndpointFailed(Exception):
    """An attempt's agent could not connect to the track's own endpoint, try after try: the track's
    failure (the run fails naming it), never recorded as the agent's."""


ENDPOINT_TRIES = 3
"""Times an attempt is run when its agent could not connect to the endpoint (settled calls are reused)."""


def request_hash(body: Mapping[str, Any]) -> str:
    """SHA-256 (hex, first 16) of a request's messages, tools and tool_choice in canonical JSON."""
    wanted = {k: body.get(k) for k in ("messages", "tools", "tool_choice")}
    return hashlib.sha256(canonical_json(wanted).encode()).hexdigest()[:16]


@dataclass
class AgentCallRecord:
    """One call of the agent's trajectory, as the endpoint saw it."""

    index: int
    request_hash: str
    sent: list[dict[str, Any]]  # messages new since the previous call (tool results, the next user turn)
    status: str
    text: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused: bool = False
    error: str | None = None
    tries: int = 0  # the engine's tries of this call (retries of transient errors included)
    latency_s: float = 0.0  # the model's answer time (0 when reused from the journal)
    error_kind: str | None = None  # a failed call's kind (the provider's, after the engine's retries)


@dataclass
class AgentSession:
    """One attempt's use of the endpoint: its token, its calls, and whether a ceiling stopped it."""

    token: str
    scenario: Scenario
    spec: CallSpec  # the attempt's base call (model, params, metadata, output bound)
    call: AgentCall
    control: AttemptControl = field(default_factory=AttemptControl)
    records: list[AgentCallRecord] = field(default_factory=list)
    excluded_reason: str | None = None
    policy_hits: list[frozenset[int] | None] = field(default_factory=list)  # each answered call's, raw
    _seen: int = 0  # messages of the previous request (what `sent` is counted from)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class AgentEndpoint:
    """The track's OpenAI-compatible endpoint on 127.0.0.1, shared by the attempts of one event loop.

    Started when the first attempt enters `session()`, stopped when the last leaves; at most
    `capacity` attempts hold a session at once (the others wait for one to end)."""

    def __init__(self, capacity: int = 8) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._users = 0
        self._lock = asyncio.Lock()
        self._admission = asyncio.Semaphore(capacity)
        self._host = EndpointHost()
        self.base_url = ""

    @contextlib.asynccontextmanager
    async def session(
        self, scenario: Scenario, spec: CallSpec, call: AgentCall, control: AttemptControl | None = None
    ) -> AsyncIterator[AgentSession]:
        async with self._admission:
            async with self._lock:
                if self._users == 0:
                    await self._start()
                self._users += 1
            # the server's loop hands each call to this (the engine's) loop
            session = AgentSession(
                secrets.token_urlsafe(24),
                scenario,
                spec,
                on_loop(asyncio.get_running_loop(), call),
                control if control is not None else AttemptControl(),
            )
            self._sessions[session.token] = session
            try:
                yield session
            finally:
                del self._sessions[session.token]
                async with self._lock:
                    self._users -= 1
                    if self._users == 0:
                        await self._host.stop()

    async def _start(self) -> None:
        import_call_modules()  # before any agent waits on a call, not during its first
        self.base_url = await self._host.start(self._app)

    def _app(self) -> Any:
        from aiohttp import web  # litellm's own HTTP stack; only agent runs start a server

        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/interventions", self._interventions)
        app.router.add_post("/v1/tool_invocations", self._tool_invocations)
        return app

    def _authorized(self, request: Any) -> AgentSession | None:
        header = str(request.headers.get("Authorization", ""))
        return (
            self._sessions.get(header.removeprefix("Bearer ").strip())
            if header.startswith("Bearer ")
            else None
        )

    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        session = self._authorized(request)
        if session is None:
            return _error(401, "invalid_api_key", "unknown or missing bearer token")
        return web.json_response({"object": "list", "data": [{"id": session.spec.model, "object": "model"}]})

    async def _control_body(self, request: Any) -> tuple[AgentSession | None, Any]:
        session = self._authorized(request)
        if session is None:
            return None, _error(401, "invalid_api_key", "unknown or missing bearer token")
        try:
            body = await request.json()
        except ValueError:
            return None, _error(400, "invalid_request_error", "body: not JSON")
        if not isinstance(body, dict):
            return None, _error(400, "invalid_request_error", "body: expected a JSON object")
        return session, body

    async def _interventions(self, request: Any) -> Any:
        """An ask (approval or question); answered by the attempt's control (a case's script)."""
        from aiohttp import web

        session, body = await self._control_body(request)
        if session is None:
            return body
        try:
            return web.json_response(session.control.ask(body))
        except ControlError as exc:
            return _error(exc.status, exc.kind, str(exc))
        except Exception as exc:  # one line to the agent, never a traceback in a log
            return _error(500, "internal_error", redact(f"{type(exc).__name__}: {exc}"))

    async def _tool_invocations(self, request: Any) -> Any:
        """A tool report; a scripted kill_worker at this point kills the agent before it is answered."""
        from aiohttp import web

        session, body = await self._control_body(request)
        if session is None:
            return body
        try:
            kill = session.control.report(body)
        except ControlError as exc:
            return _error(exc.status, exc.kind, str(exc))
        except Exception as exc:  # e.g. the review queue refused: one line, never a traceback in a log
            return _error(500, "internal_error", redact(f"{type(exc).__name__}: {exc}"))
        if kill and session.control.kill is not None:
            session.control.kill()
        return web.json_response({"recorded": True})

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        session = self._authorized(request)
        if session is None:
            return _error(401, "invalid_api_key", "unknown or missing bearer token")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "body: not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "invalid_request_error", "messages: expected a non-empty list")
        async with session._lock:  # one call at a time per attempt: call indexes follow the agent's order
            if session.control.disconnects(len(session.records) + 1):
                request.transport.close()  # a dropped connection mid-call: no answer, nothing paid
                return web.Response(status=499)
            return await self._answer(request, session, body)

    async def _answer(self, request: Any, session: AgentSession, body: dict[str, Any]) -> Any:
        if session.excluded_reason is not None:
            return _error(429, "ceiling", f"scenario stopped: {session.excluded_reason}")
        index = len(session.records) + 1
        if index > session.scenario.max_turns:
            return _error(
                400,
                "call_limit",
                f"this attempt made {index - 1} model calls: scenario {session.scenario.id} allows "
                f"max_turns={session.scenario.max_turns}",
            )
        messages = [dict(m) for m in body["messages"] if isinstance(m, dict)]
        sent, session._seen = messages[session._seen :], len(messages)
        tools = body.get("tools") or None
        params = dict(session.spec.params)
        if body.get("tool_choice") is not None:
            params["tool_choice"] = body["tool_choice"]
        asked = body.get("max_tokens") or body.get("max_completion_tokens")
        max_tokens = session.spec.max_tokens
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
            max_tokens = min(asked, max_tokens)
        spec = replace(
            session.spec,
            messages=messages,
            tools=tools,
            params=params,
            max_tokens=max_tokens,
            metadata={**session.spec.metadata, "turn": index, "request_hash": request_hash(body)},
        )
        result = await session.call(index, spec)
        record = AgentCallRecord(
            index,
            request_hash(body),
            sent,
            result.status,
            result.text,
            result.tool_calls,
            result.cost_usd,
            result.prompt_tokens,
            result.completion_tokens,
            result.reused,
            result.error or result.excluded_reason,
            result.tries,
            round(result.latency_s, 3),  # milliseconds: a long digit run reads as a number to redact
            result.error_kind,
        )
        session.records.append(record)
        session.control.model_call(index, result.status, result.tool_calls)
        if result.status == "ok":
            session.policy_hits.append(result.policy_hits)
        if result.status == "excluded":
            session.excluded_reason = result.excluded_reason or "a spend ceiling"
            return _error(429, "ceiling", f"spend ceiling: {session.excluded_reason}")
        if result.status != "ok":
            return _error(502, result.error_kind or "upstream_error", f"{result.error_kind}: {result.error}")
        return await _completion(request, session.spec.model, index, result, bool(body.get("stream")))


def _error(status: int, kind: str, message: str) -> Any:
    from aiohttp import web

    return web.json_response({"error": {"type": kind, "code": kind, "message": message}}, status=status)


def _wire_tool_calls(result: CallResult, index: int) -> list[dict[str, Any]]:
    return [
        {
            "id": c.get("id") or f"call_{index}_{i}",
            "type": "function",
            "function": {"name": str(c.get("name")), "arguments": c.get("arguments") or "{}"},
        }
        for i, c in enumerate(result.tool_calls or [])
    ]


async def _completion(request: Any, model: str, index: int, result: CallResult, stream: bool) -> Any:
    """The OpenAI chat.completion (or its SSE stream: the whole answer in one delta) for one call."""
    from aiohttp import web

    calls = _wire_tool_calls(result, index)
    finish = "tool_calls" if calls else "stop"
    ident, created = f"chatcmpl-evaltrack-{index}", int(time.time())
    usage = {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
    }
    if not stream:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": result.text if not calls else (result.text or None),
        }
        if calls:
            message["tool_calls"] = calls
        return web.json_response(
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    delta: dict[str, Any] = {"role": "assistant", "content": result.text or ""}
    if calls:
        delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(calls)]
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    ]
    for chunk in chunks:
        frame = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model, **chunk}
        await response.write(f"data: {json.dumps(frame)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


@dataclass(frozen=True)
class AgentRun:
    """One agent attempt: the attempt as one call (tries, cost and tokens summed over its calls),
    its calls, its notes, and its control (tool invocations, events, interventions)."""

    call: CallResult
    calls: tuple[AgentCallRecord, ...]
    notes: str | None
    control: AttemptControl = field(default_factory=AttemptControl)

    def trajectory(self) -> dict[str, Any]:
        """The trajectory as plain data (stored redacted by the row builder)."""
        return {
            "calls": [asdict(c) for c in self.calls],
            "output": self.call.text,
            "notes": self.notes,
            **self.control.trajectory(),
        }


class _Killed(Exception):
    """The attempt's worker process was killed by the case's `kill_worker` step."""


async def run_agent(
    agent: Agent,
    task_fields: Mapping[str, Any],
    scenario: Scenario,
    spec: CallSpec,
    endpoint: AgentEndpoint,
    call: AgentCall,
    *,
    search: tuple[str, ...] = (),
    scratch: str | None = None,
    policy: PolicyCheck,
    control: AttemptControl | None = None,
) -> AgentRun:
    """One attempt of an agent subject. Never raises for the agent's own failures (they are outcomes);
    raises `AgentUnreachable` when an HTTP agent cannot be connected to, and `EndpointFailed` when
    the agent could not connect to the track's endpoint in `ENDPOINT_TRIES` tries of the attempt
    (each try reuses the calls the previous ones settled).

    `task_fields`: attempt_id, build, repeat, and the pinned sources `now`, `seed`, `state_dir`;
    `scratch`: where an entry point's worker writes its result (None: the system's temporary directory)."""
    why = ""
    for _ in range(ENDPOINT_TRIES):
        run = await _run_once(
            agent, task_fields, scenario, spec, endpoint, call, (search, scratch), control, policy
        )
        if isinstance(run, AgentRun):
            return run
        why = run
    raise EndpointFailed(
        f"attempt {task_fields['attempt_id']}: the agent could not reach the track's own endpoint in "
        f"{ENDPOINT_TRIES} tries ({why}); a failure of the track, not of the agent"
    )


async def _run_once(
    agent: Agent,
    task_fields: Mapping[str, Any],
    scenario: Scenario,
    spec: CallSpec,
    endpoint: AgentEndpoint,
    call: AgentCall,
    places: tuple[tuple[str, ...], str | None],
    control: AttemptControl | None,
    policy: PolicyCheck,
) -> AgentRun | str:
    """The attempt, or one line naming why its agent could not connect to the endpoint."""
    async with endpoint.session(scenario, spec, call, control) as session:
        started = time.monotonic()
        bearer = session.token  # the attempt's key to the endpoint, nothing else
        task = AgentTask(
            attempt_id=str(task_fields["attempt_id"]),
            build=str(task_fields["build"]),
            scenario_id=scenario.id,
            repeat=int(task_fields["repeat"]),
            messages=list(spec.messages),
            tools=[t.model_dump(mode="json") for t in scenario.tools],
            base_url=endpoint.base_url,
            api_key=bearer,
            model=spec.model,
            now=str(task_fields["now"]),
            seed=str(task_fields["seed"]),
            state_dir=task_fields.get("state_dir"),
        )
        result: AgentResult | None = None
        failure: tuple[str, str] | None = None
        try:
            result = await asyncio.wait_for(
                _invoke(agent, task, places, session.control), timeout=agent.timeout_s
            )
        except AgentUnreachable:
            raise
        except TimeoutError:
            failure = ("agent_timeout", f"no result within subject.agent.timeout_s={agent.timeout_s:g}")
        except AgentShapeError as exc:
            failure = ("agent_shape", str(exc))
        except _HttpStatus as exc:
            failure = ("agent_http", str(exc))
        except _Killed as exc:
            failure = ("agent_killed", str(exc))
        except _Raised as exc:
            if exc.kind == ENDPOINT_UNREACHABLE and session.excluded_reason is None:
                return str(exc)  # the worker's agent could not reach the endpoint: the track's failure
            failure = _after_provider_error(session.records, (exc.kind, redact(str(exc))))
        except Exception as exc:  # the agent's own failure: one line, no traceback
            ours = endpoint_failure(exc, endpoint.base_url)
            if ours is not None and session.excluded_reason is None:
                return ours
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raised = redact(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
            failure = _after_provider_error(session.records, ("agent_raised", raised))
        records = tuple(session.records)
        summed = CallResult(
            "ok",
            None,
            sum(r.tries for r in records),
            sum(r.cost_usd for r in records),
            sum(r.prompt_tokens for r in records),
            sum(r.completion_tokens for r in records),
            round(time.monotonic() - started, 3),  # the attempt's wall-clock time, its agent's work included
            reused=bool(records) and all(r.reused for r in records),
        )
        if session.excluded_reason is not None:
            call_result = replace(summed, status="excluded", excluded_reason=session.excluded_reason)
        elif failure is not None:
            call_result = replace(summed, status="error", error_kind=failure[0], error=failure[1])
        else:
            assert result is not None
            # the policy over everything the attempt produced, raw: each model answer (checked as it
            # was paid), and every text of the trajectory the agent made (what it sent back, output, notes)
            raw = {"calls": [asdict(r) for r in records], "output": result.output, "notes": result.notes}
            hits = union_hits([*session.policy_hits, policy.hits(policy_texts(raw, spec.messages))])
            call_result = replace(  # stored redacted, as the gateway's answers are
                summed,
                text=redact(result.output),
                policy_failures=None if hits is None else len(hits),
                policy_hits=hits,
            )
        session.control.finished(result.output if result is not None and failure is None else None)
        notes = redact(result.notes) if result is not None and result.notes is not None else None
        return AgentRun(call_result, records, notes, session.control)


def _after_provider_error(records: list[AgentCallRecord], failure: tuple[str, str]) -> tuple[str, str]:
    """An agent that raised right after the provider failed its call failed for the provider's reason."""
    last = records[-1] if records else None
    if failure[0] != "agent_raised" or last is None or last.status != "error":
        return failure
    return (last.error_kind or "provider_error", f"{last.error} (then the agent raised {failure[1]})")


class _HttpStatus(Exception):
    """An HTTP agent answered with a status other than 200."""


class _Raised(Exception):
    """An entry-point agent's own failure, as its worker reported it (`kind`, one line)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (the agent and every process it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


_swept: set[str] = set()


def _worker_scratch(root: str | None) -> str:
    """A fresh directory for one worker's result, named after this process (`agent-<pid>-…`): the first
    attempt of a process in `root` removes what processes no longer alive left there (a killed run)."""
    if root is not None and root not in _swept:
        os.makedirs(root, exist_ok=True)
        for entry in os.scandir(root):
            owner = entry.name.split("-")[1] if entry.name.startswith("agent-") else ""
            if owner.isdigit() and not pid_alive(int(owner)):
                shutil.rmtree(entry.path, ignore_errors=True)
        _swept.add(root)
    return tempfile.mkdtemp(prefix=f"agent-{os.getpid()}-", dir=root)


async def _run_worker(
    agent: Agent, task: AgentTask, places: tuple[tuple[str, ...], str | None], control: AttemptControl
) -> Any:
    """Run the entry point in its own process group (`eval_assets.agent_worker`); the whole group is
    killed when the attempt ends, however it ends: a timeout or a cancel, a scripted kill, or its result."""
    search, root = places
    scratch = _worker_scratch(root)
    result_file = os.path.join(scratch, "result.json")
    spec = {
        "entrypoint": agent.entrypoint,
        "search": list(search),
        "sys_path": [p or os.getcwd() for p in sys.path],
        "task": task.to_json(),
    }
    stderr_path = os.path.join(scratch, "stderr")
    with open(stderr_path, "wb") as stderr_file:  # a file, not a pipe: a child that keeps it open cannot hold us
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "eval_assets.agent_worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr_file,
            env={**os.environ, "EVALTRACK_RESULT_FILE": result_file},
            start_new_session=True,  # its own process group: killed whole, children included
        )
    control.kill = functools.partial(_kill_group, process.pid)
    try:
        assert process.stdin is not None
        process.stdin.write(json.dumps(spec).encode())
        with contextlib.suppress(ConnectionError):
            await process.stdin.drain()
        process.stdin.close()
        await process.wait()  # its exit, not its pipes' EOF: what it started may hold those
        if control.killed_at is not None:
            raise _Killed(f"killed by the case's kill_worker at {control.killed_at}")
        try:
            with open(result_file, encoding="utf-8") as fh:
                answer = json.load(fh)
        except FileNotFoundError:
            with open(stderr_path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(stderr_path) - 4096))
                last = (fh.read().decode(errors="replace").strip().splitlines() or [""])[-1][:300]
            raise _Raised(
                "agent_raised", f"the agent's process exited with code {process.returncode}: {last}".rstrip(": ")
            ) from None
        if "error" in answer:
            raise _Raised(str(answer["error"]["kind"]), str(answer["error"]["message"]))
        return answer["result"]
    finally:
        control.kill = None
        _kill_group(process.pid)  # a timeout's cancel lands here too: nothing it started outlives it
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(process.wait())
        shutil.rmtree(scratch, ignore_errors=True)


async def _invoke(
    agent: Agent, task: AgentTask, places: tuple[tuple[str, ...], str | None], control: AttemptControl
) -> AgentResult:
    if agent.entrypoint is not None:
        return parse_agent_result(await _run_worker(agent, task, places, control))
    import httpx  # litellm's and the OpenAI SDK's HTTP client

    assert agent.http is not None
    try:
        async with httpx.AsyncClient(timeout=agent.timeout_s, trust_env=False) as client:
            response = await client.post(agent.http, json=task.to_json())
    except httpx.ConnectError as exc:
        raise AgentUnreachable(
            f"attempt {task.attempt_id}: agent at {agent.http} refused the connection: {type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        raise _HttpStatus(f"agent at {agent.http} answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise AgentShapeError("result: the HTTP agent's body is not JSON") from None
    return parse_agent_result(body)
