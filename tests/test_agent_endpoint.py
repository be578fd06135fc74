"""The agent endpoint (`engine/_agent.py`) on its own: the real aiohttp server on 127.0.0.1 and real
HTTP, with the call it makes per model request given by the test (the engine's goes through the spend
path; `tests/test_agents.py` runs that end to end). Each test reads what the endpoint did: the calls it
made with which bounds, what it answered the agent, and the attempt it returned."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from shared import http_agent

from eval_assets.config import Agent, Scenario, parse_intervention
from eval_assets.engine import (
    AgentEndpoint,
    AgentResult,
    AgentShapeError,
    AgentUnreachable,
    AttemptControl,
    CallResult,
    ControlError,
    load_entrypoint,
    parse_agent_result,
    request_hash,
    run_agent,
)
from eval_assets.judging import PolicyCheck
from eval_assets.providers.gateway import CallSpec

TESTS = str(Path(__file__).resolve().parent)
USER = {"role": "user", "content": "hi"}
PINNED = {"now": "2026-01-01T00:00:00+00:00", "seed": "5eed"}  # the pinned sources every task carries
AUTH = "Author" + "ization"  # the header's name, assembled: no line of this file reads as a credential


def scenario(max_turns: int = 3, content: str = "hi", forbidden: tuple[str, ...] = ()) -> Scenario:
    return Scenario.model_validate(
        {
            "id": "probe",
            "suite": "probe",
            "description": "probe",
            "judge": "helpfulness",
            "input": [{"role": "user", "content": content}],
            "max_turns": max_turns,
            "policy": {"forbidden_strings": list(forbidden)},
        }
    )


SPEC = CallSpec(
    model="sim/agent",
    messages=[USER],
    max_tokens=200,
    timeout_s=5,
    params={"temperature": 0.0},
    metadata={"attempt": "a1"},
)


class Calls:
    """The call the endpoint makes per model request: records (index, spec), answers `answers` in turn
    (the last one again when they run out)."""

    def __init__(self, *answers: CallResult):
        self.answers = list(answers) or [ok("answer")]
        self.made: list[tuple[int, CallSpec]] = []

    async def __call__(self, index: int, spec: CallSpec) -> CallResult:
        self.made.append((index, spec))
        return self.answers[min(len(self.made), len(self.answers)) - 1]


def ok(text: str | None, **kw: Any) -> CallResult:
    """An answered call, checked by the policy in force and clean (as the spend path answers one)."""
    kw.setdefault("policy_hits", frozenset())
    return CallResult("ok", text, kw.pop("tries", 1), kw.pop("cost_usd", 0.01), **kw)


def with_session(
    calls: Calls,
    use: Callable[[httpx.AsyncClient, str, dict[str, str]], Awaitable[Any]],
    sc: Scenario | None = None,
) -> Any:
    """`use(client, base_url, headers)` inside one attempt's session of a fresh endpoint."""

    async def go() -> Any:
        endpoint = AgentEndpoint()
        async with endpoint.session(sc or scenario(), SPEC, calls) as session:
            headers = {AUTH: f"Bearer {session.token}"}
            async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                return await use(client, endpoint.base_url, headers), session

    return asyncio.run(go())


def chat(body: dict[str, Any]) -> Callable[[httpx.AsyncClient, str, dict[str, str]], Awaitable[Any]]:
    async def use(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> Any:
        return await client.post(f"{base}/chat/completions", headers=headers, json=body)

    return use


def several(*bodies: dict[str, Any]) -> Callable[[httpx.AsyncClient, str, dict[str, str]], Awaitable[Any]]:
    async def use(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> Any:
        return [await client.post(f"{base}/chat/completions", headers=headers, json=b) for b in bodies]

    return use


# --- the two hand mutants of issue 45 ------------------------------------------------------------------


@pytest.mark.parametrize("max_turns", [1, 2, 3])
def test_exactly_max_turns_calls_are_answered_and_the_next_is_refused_naming_the_limit(
    max_turns: int,
) -> None:
    calls = Calls()
    answers, session = with_session(
        calls, several(*[{"messages": [USER]}] * (max_turns + 2)), scenario(max_turns=max_turns)
    )
    assert [r.status_code for r in answers] == [200] * max_turns + [400, 400]
    assert [i for i, _ in calls.made] == list(range(1, max_turns + 1))
    assert len(session.records) == max_turns
    error = answers[max_turns].json()["error"]
    assert error["type"] == error["code"] == "call_limit"
    assert error["message"] == (
        f"this attempt made {max_turns} model calls: scenario probe allows max_turns={max_turns}"
    )


@pytest.mark.parametrize(
    ("body", "bound"),
    [
        ({"max_tokens": 10_000}, 200),  # asks for more than the scenario's cap: the cap
        ({"max_completion_tokens": 10_000}, 200),
        ({"max_tokens": 200}, 200),
        ({"max_tokens": 201}, 200),
        ({"max_tokens": 50}, 50),  # a lower cap is kept
        ({"max_completion_tokens": 7}, 7),
        ({"max_tokens": 1}, 1),
        ({"max_tokens": 0}, 200),
        ({"max_tokens": -5}, 200),
        ({"max_tokens": True}, 200),
        ({"max_tokens": "50"}, 200),
        ({"max_tokens": 5.0}, 200),
        ({}, 200),
    ],
)
def test_an_agent_never_gets_more_than_the_scenarios_max_tokens(body: dict[str, Any], bound: int) -> None:
    calls = Calls()
    answer, _ = with_session(calls, chat({"messages": [USER], **body}))
    assert answer.status_code == 200
    [(_, spec)] = calls.made
    assert spec.max_tokens == bound


# --- what the call is made of --------------------------------------------------------------------------


def test_the_call_carries_the_attempts_spec_the_agents_messages_tools_and_tool_choice() -> None:
    calls = Calls()
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    body = {"messages": [USER, "not a message", {"role": "user", "content": "more"}], "tools": tools}
    body["tool_choice"] = "required"
    answer, _ = with_session(calls, chat(body))
    assert answer.status_code == 200
    [(index, spec)] = calls.made
    assert index == 1
    assert spec.messages == [USER, {"role": "user", "content": "more"}]  # only the objects
    assert spec.tools == tools
    assert dict(spec.params) == {"temperature": 0.0, "tool_choice": "required"}
    assert spec.model == "sim/agent" and spec.timeout_s == 5
    assert dict(spec.metadata) == {"attempt": "a1", "turn": 1, "request_hash": request_hash(body)}
    assert dict(SPEC.params) == {"temperature": 0.0}  # the attempt's own spec is never changed


def test_no_tools_and_no_tool_choice_leave_the_call_without_them() -> None:
    calls = Calls()
    with_session(calls, chat({"messages": [USER], "tools": [], "tool_choice": None}))
    [(_, spec)] = calls.made
    assert spec.tools is None and "tool_choice" not in spec.params


def test_each_record_holds_only_the_messages_new_since_the_previous_call() -> None:
    calls = Calls(ok("one", prompt_tokens=3, completion_tokens=4, reused=True, tries=2, cost_usd=0.5))
    second = [USER, {"role": "assistant", "content": "one"}, {"role": "user", "content": "two"}]
    _, session = with_session(calls, several({"messages": [USER]}, {"messages": second}))
    first, then = session.records
    assert (first.index, first.sent, then.index, then.sent) == (1, [USER], 2, second[1:])
    assert first.request_hash == request_hash({"messages": [USER]})
    assert then.request_hash == request_hash({"messages": second}) != first.request_hash
    assert (first.status, first.text, first.cost_usd, first.prompt_tokens, first.completion_tokens) == (
        "ok",
        "one",
        0.5,
        3,
        4,
    )
    assert (first.reused, first.tries, first.error) == (True, 2, None)
    assert [dict(s.metadata)["turn"] for _, s in calls.made] == [1, 2]


def test_request_hash_reads_messages_tools_and_tool_choice_only() -> None:
    base = {"messages": [USER], "tools": [{"t": 1}], "tool_choice": "auto"}
    assert request_hash(base) == request_hash({**base, "max_tokens": 5, "stream": True})
    for key, other in (("messages", [USER, USER]), ("tools", [{"t": 2}]), ("tool_choice", "none")):
        assert request_hash({**base, key: other}) != request_hash(base)
    assert len(request_hash(base)) == 16


# --- what the agent is answered ------------------------------------------------------------------------


def test_a_completion_has_the_openai_shape_with_the_text_and_usage() -> None:
    calls = Calls(ok("hello", prompt_tokens=3, completion_tokens=4))
    answer, _ = with_session(calls, chat({"messages": [USER]}))
    data = answer.json()
    assert answer.status_code == 200
    assert data["id"] == "chatcmpl-evaltrack-1" and data["object"] == "chat.completion"
    assert data["model"] == "sim/agent" and isinstance(data["created"], int)
    assert data["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    ]
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_tool_calls_are_answered_in_the_wire_shape_with_ids_and_default_arguments() -> None:
    calls = Calls(
        ok(None, tool_calls=[{"id": "c1", "name": "lookup", "arguments": '{"a": 1}'}, {"name": "other"}]),
    )
    answer, _ = with_session(calls, chat({"messages": [USER]}))
    [choice] = answer.json()["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"a": 1}'}},
            {"id": "call_1_1", "type": "function", "function": {"name": "other", "arguments": "{}"}},
        ],
    }


def test_a_streamed_answer_is_one_delta_then_the_finish_then_done() -> None:
    calls = Calls(ok("streamed", prompt_tokens=1, completion_tokens=2, tool_calls=[{"name": "t"}]))
    answer, _ = with_session(calls, chat({"messages": [USER], "stream": True}))
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["cache-control"] == "no-cache"
    frames = [line.removeprefix("data: ") for line in answer.text.split("\n\n") if line]
    assert frames[-1] == "[DONE]"
    first, last = (json.loads(f) for f in frames[:-1])
    assert first["object"] == last["object"] == "chat.completion.chunk"
    assert first["id"] == "chatcmpl-evaltrack-1" and first["model"] == "sim/agent"
    assert isinstance(first["created"], int) and last["created"] == first["created"]
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {
                "role": "assistant",
                "content": "streamed",
                "tool_calls": [
                    {
                        "id": "call_1_0",
                        "type": "function",
                        "function": {"name": "t", "arguments": "{}"},
                        "index": 0,
                    }
                ],
            },
            "finish_reason": None,
        }
    ]
    assert last["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert last["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_a_streamed_answer_without_text_has_empty_content() -> None:
    answer, _ = with_session(Calls(ok(None)), chat({"messages": [USER], "stream": True}))
    first = json.loads(answer.text.split("\n\n")[0].removeprefix("data: "))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert (
        json.loads(answer.text.split("\n\n")[1].removeprefix("data: "))["choices"][0]["finish_reason"]
        == "stop"
    )


def test_a_failed_call_answers_502_naming_its_kind() -> None:
    failed = CallResult("error", None, 2, 0.0, error_kind="timeout", error="no answer in 5 s")
    answer, session = with_session(Calls(failed), chat({"messages": [USER]}))
    assert answer.status_code == 502
    assert answer.json()["error"] == {
        "type": "timeout",
        "code": "timeout",
        "message": "timeout: no answer in 5 s",
    }
    assert session.records[0].error == "no answer in 5 s" and session.excluded_reason is None
    plain = CallResult("error", None, 1, 0.0)
    answer, _ = with_session(Calls(plain), chat({"messages": [USER]}))
    assert answer.json()["error"]["type"] == "upstream_error"


def test_a_ceiling_answers_429_and_every_later_call_too_without_calling() -> None:
    refused = CallResult("excluded", None, 0, 0.0, excluded_reason="scenario ceiling $0.00")
    calls = Calls(refused, ok("never"))
    answers, session = with_session(calls, several({"messages": [USER]}, {"messages": [USER]}))
    assert [a.status_code for a in answers] == [429, 429]
    assert answers[0].json()["error"]["message"] == "spend ceiling: scenario ceiling $0.00"
    assert answers[1].json()["error"]["message"] == "scenario stopped: scenario ceiling $0.00"
    assert answers[0].json()["error"]["type"] == answers[1].json()["error"]["type"] == "ceiling"
    assert len(calls.made) == 1 and session.excluded_reason == "scenario ceiling $0.00"
    assert session.records[0].error == "scenario ceiling $0.00"
    unnamed = CallResult("excluded", None, 0, 0.0)
    _, session = with_session(Calls(unnamed), chat({"messages": [USER]}))
    assert session.excluded_reason == "a spend ceiling"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not json", "body: not JSON"),
        (b"[1, 2]", "messages: expected a non-empty list"),
        (b'{"messages": []}', "messages: expected a non-empty list"),
        (b'{"messages": "hi"}', "messages: expected a non-empty list"),
        (b'{"model": "x"}', "messages: expected a non-empty list"),
    ],
)
def test_a_malformed_request_is_400_naming_what_and_makes_no_call(content: bytes, says: str) -> None:
    async def use(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> Any:
        return await client.post(
            f"{base}/chat/completions",
            headers={**headers, "Content-Type": "application/json"},
            content=content,
        )

    calls = Calls()
    answer, session = with_session(calls, use)
    assert answer.status_code == 400 and answer.json()["error"]["message"] == says
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert calls.made == [] and session.records == []


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer wrong", "Basic TOKEN", "TOKEN"])
def test_only_the_attempts_bearer_token_is_answered(header: str | None) -> None:
    async def use(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> Any:
        name, token = AUTH, headers[AUTH].removeprefix("Bearer ")
        sent = {} if header is None else {name: header.replace("TOKEN", token)}
        return (
            await client.post(f"{base}/chat/completions", headers=sent, json={"messages": [USER]}),
            await client.get(f"{base}/models", headers=sent),
            await client.get(f"{base}/models", headers=headers),
        )

    calls = Calls()
    (chat_answer, models, own), _ = with_session(calls, use)
    assert chat_answer.status_code == models.status_code == 401
    assert chat_answer.json()["error"] == {
        "type": "invalid_api_key",
        "code": "invalid_api_key",
        "message": "unknown or missing bearer token",
    }
    assert calls.made == []
    assert own.status_code == 200
    assert own.json() == {"object": "list", "data": [{"id": "sim/agent", "object": "model"}]}


def test_the_endpoint_listens_on_loopback_only_while_an_attempt_uses_it() -> None:
    async def go() -> tuple[str, str, str]:
        endpoint = AgentEndpoint()
        async with endpoint.session(scenario(), SPEC, Calls()):
            first = endpoint.base_url
            async with endpoint.session(scenario(), SPEC, Calls()):
                assert endpoint.base_url == first  # one server for the attempts of a loop
            async with httpx.AsyncClient(trust_env=False) as client:
                alive = (await client.get(f"{first}/models")).status_code
        async with httpx.AsyncClient(trust_env=False) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{first}/models")
        async with endpoint.session(scenario(), SPEC, Calls()):  # started again for the next attempt
            again = endpoint.base_url
        return first, str(alive), again

    first, alive, again = asyncio.run(go())
    assert first.startswith("http://127.0.0.1:") and first.endswith("/v1") and alive == "401"
    assert again.startswith("http://127.0.0.1:")


# --- the attempt (run_agent) ---------------------------------------------------------------------------


def attempt(
    agent: dict[str, Any],
    plan: dict[str, Any] | None = None,
    calls: Calls | None = None,
    control: AttemptControl | None = None,
    fields: dict[str, Any] | None = None,
    **sc: Any,
) -> Any:
    calls = calls or Calls()
    content = json.dumps(plan or {})
    spec = CallSpec(**{**SPEC.__dict__, "messages": [{"role": "user", "content": content}]})

    attempted = scenario(content=content, **sc)

    async def go() -> Any:
        return await run_agent(
            Agent.model_validate(agent),
            {"attempt_id": "att-1", "build": "b1", "repeat": 2, **PINNED, **(fields or {})},
            attempted,
            spec,
            AgentEndpoint(),
            calls,
            search=(TESTS,),
            control=control,
            policy=PolicyCheck(attempted),
        )

    return asyncio.run(go()), calls


def test_an_attempt_sums_its_calls_and_keeps_the_output_and_notes() -> None:
    plan = {"requests": [{"messages": [USER]}] * 2, "result": {"output": "said {statuses}", "notes": "n"}}
    calls = Calls(
        ok("a", tries=1, cost_usd=0.25, prompt_tokens=1, completion_tokens=2, reused=True),
        ok("b", tries=2, cost_usd=0.5, prompt_tokens=10, completion_tokens=20, reused=True),
    )
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, calls)
    call = run.call
    assert (call.status, call.text, call.tries, call.cost_usd) == ("ok", "said 200,200", 3, 0.75)
    assert (call.prompt_tokens, call.completion_tokens, call.reused, call.policy_failures) == (
        11,
        22,
        True,
        0,
    )
    assert run.notes == "n" and [r.index for r in run.calls] == [1, 2]
    trajectory = run.trajectory()
    assert {k: trajectory[k] for k in ("calls", "output", "notes")} == {
        "calls": [{**r.__dict__} for r in run.calls],
        "output": "said 200,200",
        "notes": "n",
    }
    assert [e["type"] for e in trajectory["events"]] == ["model_call", "model_call", "output"]


def test_an_attempt_is_reused_only_when_every_call_was() -> None:
    plan = {"requests": [{"messages": [USER]}] * 2}
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, Calls(ok("a", reused=True), ok("b")))
    assert run.call.reused is False
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, {"requests": []})
    assert run.call.reused is False and run.call.tries == 0 and run.calls == ()


def test_the_policy_is_checked_on_the_raw_output_and_the_output_and_notes_are_stored_redacted() -> None:
    key = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    plan = {"result": {"output": f"code NW-1 and {key}", "notes": f"note {key}"}}
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, forbidden=("NW-1",))
    assert run.call.policy_failures == 1
    assert key not in (run.call.text or "") and "NW-1" in (run.call.text or "")
    assert key not in (run.notes or "") and (run.notes or "").startswith("note ")


def test_a_call_limit_refusal_is_what_the_agent_sees_and_its_output_still_counts() -> None:
    plan = {"requests": [{"messages": [USER]}] * 3, "result": {"output": "{statuses}"}}
    run, calls = attempt({"entrypoint": "endpoint_agents:plays"}, plan, max_turns=2)
    assert run.call.status == "ok" and run.call.text == "200,200,400" and len(calls.made) == 2


def test_a_ceiling_excludes_the_attempt_whatever_the_agent_returns() -> None:
    refused = CallResult("excluded", None, 0, 0.0, excluded_reason="day ceiling")
    plan = {"requests": [{"messages": [USER]}], "result": {"output": "fine {statuses}", "notes": "n"}}
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, Calls(refused))
    assert (run.call.status, run.call.excluded_reason, run.call.text) == ("excluded", "day ceiling", None)
    assert run.notes == "n"


@pytest.mark.parametrize(
    ("agent", "kind", "error"),
    [
        ("endpoint_agents:raises_long", "agent_raised", "ValueError: " + "x" * 300),
        ("endpoint_agents:raises_empty", "agent_raised", "KeyError"),
        (
            "endpoint_agents:no_such_function",
            "agent_raised",
            "AttributeError: module 'endpoint_agents' has no attribute 'no_such_function'",
        ),
    ],
)
def test_an_agent_that_raises_is_one_line_naming_the_exception(agent: str, kind: str, error: str) -> None:
    run, _ = attempt({"entrypoint": agent})
    assert (run.call.status, run.call.error_kind, run.call.error, run.call.text) == (
        "error",
        kind,
        error,
        None,
    )
    assert run.notes is None


def test_a_result_of_the_wrong_shape_is_agent_shape_naming_the_field() -> None:
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, {"result": {"output": 3}})
    assert (run.call.error_kind, run.call.error) == (
        "agent_shape",
        "result.output: expected a string, got int",
    )


def test_an_agent_past_its_timeout_is_agent_timeout() -> None:
    run, _ = attempt({"entrypoint": "endpoint_agents:sleeps", "timeout_s": 0.2})
    assert (run.call.status, run.call.error_kind) == ("error", "agent_timeout")
    assert run.call.error == "no result within subject.agent.timeout_s=0.2"


def test_an_http_agent_gets_the_task_and_its_answer_and_status_are_read() -> None:
    from aiohttp import web

    seen: list[dict[str, Any]] = []
    replies: list[Any] = [
        web.json_response({"output": "over http"}),
        web.json_response({"output": "x"}, status=503),
        web.Response(text="not json"),
        web.json_response({"nope": 1}),
    ]

    async def handle(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return replies[len(seen) - 1]  # type: ignore[no-any-return]

    async def go() -> list[Any]:
        async with http_agent(handle) as url:
            out = []
            for _ in replies:
                out.append(
                    await run_agent(
                        Agent.model_validate({"http": url}),
                        {"attempt_id": "att-1", "build": "b1", "repeat": 2, **PINNED},
                        scenario(),
                        SPEC,
                        AgentEndpoint(),
                        Calls(),
                        policy=PolicyCheck(scenario()),
                    )
                )
            return [url, *out]

    url, good, status, not_json, shape = asyncio.run(go())
    assert good.call.text == "over http"
    assert (status.call.error_kind, status.call.error) == ("agent_http", f"agent at {url} answered HTTP 503")
    assert (not_json.call.error_kind, not_json.call.error) == (
        "agent_shape",
        "result: the HTTP agent's body is not JSON",
    )
    assert shape.call.error_kind == "agent_shape"
    task = seen[0]
    assert {
        k: task[k] for k in ("attempt_id", "build", "scenario_id", "repeat", "model", "messages", "tools")
    } == {
        "attempt_id": "att-1",
        "build": "b1",
        "scenario_id": "probe",
        "repeat": 2,
        "model": "sim/agent",
        "messages": [USER],
        "tools": [],
    }
    assert task["base_url"].startswith("http://127.0.0.1:") and len(task["api_key"]) >= 24


def test_an_http_agent_that_refuses_the_connection_raises_naming_its_url() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/attempt"
    with pytest.raises(AgentUnreachable, match=f"agent at {url} refused the connection: ConnectError"):
        attempt({"http": url})


# --- the result shape and the entry point ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"output": "o"}, AgentResult("o", None)),
        ({"output": "o", "notes": None}, AgentResult("o", None)),
        ({"output": "o", "notes": "n"}, AgentResult("o", "n")),
        (AgentResult("o", "n"), AgentResult("o", "n")),
    ],
)
def test_a_result_of_the_documented_shape_is_read(value: object, expected: AgentResult) -> None:
    assert parse_agent_result(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("text", "result: expected an object with `output`, got str"),
        ({"output": "o", "extra": 1, "another": 2}, "result.another: unknown field (allowed: output, notes)"),
        ({"notes": "n"}, "result.output: missing"),
        ({"output": None}, "result.output: expected a string, got NoneType"),
        ({"output": "o", "notes": 3}, "result.notes: expected a string or null, got int"),
        (AgentResult(3, None), "result.output: expected a string, got int"),  # type: ignore[arg-type]
    ],
)
def test_a_result_of_another_shape_is_refused_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(AgentShapeError) as raised:
        parse_agent_result(value)
    assert str(raised.value) == message


def test_an_entry_point_is_loaded_from_the_search_path_and_must_be_async() -> None:
    fn = load_entrypoint("endpoint_agents:plays", (TESTS,))
    assert fn.__name__ == "plays"
    with pytest.raises(
        TypeError, match=r"^json:dumps is not an async function \(async def dumps\(task\): ...\)$"
    ):
        load_entrypoint("json:dumps")
    with pytest.raises(ModuleNotFoundError):
        load_entrypoint("no_such_module_anywhere:run", (TESTS,))


@pytest.mark.parametrize(
    "entrypoint",
    [
        "dagster:asset",
        "dagster_shared:x",
        "eval_assets.defs.x:y",
        "eval_assets.cli:main",
        "eval_assets.definitions:defs",
    ],
)
def test_an_entry_point_in_dagster_or_the_wiring_is_refused(entrypoint: str) -> None:
    with pytest.raises(ImportError) as raised:
        load_entrypoint(entrypoint)
    assert (
        str(raised.value)
        == f"{entrypoint}: an agent entry point is never Dagster or the track's Dagster wiring"
    )


def write_agent_module(directory: Path, name: str) -> None:
    """A module on no import path yet: only the search directories can find it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(
        "async def run(task):\n    return {'output': 'found in ' + task.scenario_id}\n", encoding="utf-8"
    )


def test_an_entry_point_module_is_found_in_the_search_directories_off_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))  # the search directory added is undone after
    name = f"agent_off_path_{uuid.uuid4().hex}"  # never imported before, whatever ran in this process
    write_agent_module(tmp_path / "project", name)
    assert str(tmp_path / "project") not in sys.path
    fn = load_entrypoint(f"{name}:run", (str(tmp_path / "project"),))
    assert fn.__name__ == "run" and str(tmp_path / "project") in sys.path


def test_an_attempt_imports_its_agent_from_the_search_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"agent_off_path_{uuid.uuid4().hex}"
    write_agent_module(tmp_path / "project", name)

    async def go() -> Any:
        return await run_agent(
            Agent.model_validate({"entrypoint": f"{name}:run"}),
            {"attempt_id": "att-1", "build": "b1", "repeat": 1, **PINNED},
            scenario(),
            SPEC,
            AgentEndpoint(),
            Calls(),
            search=(str(tmp_path / "project"),),
            policy=PolicyCheck(scenario()),
        )

    run = asyncio.run(go())
    assert (run.call.status, run.call.text) == ("ok", "found in probe")


def test_an_entry_point_names_one_function_after_the_first_colon() -> None:
    with pytest.raises(AttributeError):  # module endpoint_agents, attribute "plays:extra"
        load_entrypoint("endpoint_agents:plays:extra", (TESTS,))


def test_the_model_list_refuses_a_wrong_token_with_the_openai_error_shape() -> None:
    async def use(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> Any:
        return await client.get(f"{base}/models", headers={AUTH: " ".join(("Bearer", "wrong"))})

    answer, _ = with_session(Calls(), use)
    assert answer.status_code == 401
    assert answer.json() == {
        "error": {
            "type": "invalid_api_key",
            "code": "invalid_api_key",
            "message": "unknown or missing bearer token",
        }
    }


def test_an_http_agent_is_reached_directly_whatever_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent is the build's own service, on this host: a proxy named in the environment (here one
    nothing listens on) is never used for it."""
    import socket

    from aiohttp import web

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def handle(request: web.Request) -> web.Response:
        return web.json_response({"output": "direct"})

    async def go() -> Any:
        async with http_agent(handle) as url:
            return await run_agent(
                Agent.model_validate({"http": url}),
                {"attempt_id": "att-1", "build": "b1", "repeat": 1, **PINNED},
                scenario(),
                SPEC,
                AgentEndpoint(),
                Calls(),
                policy=PolicyCheck(scenario()),
            )

    assert asyncio.run(go()).call.text == "direct"


def test_an_empty_answer_without_tool_calls_is_empty_content_not_null() -> None:
    answer, _ = with_session(Calls(ok("")), chat({"messages": [USER]}))
    assert answer.json()["choices"][0]["message"] == {"role": "assistant", "content": ""}
    answer, _ = with_session(Calls(ok("", tool_calls=[{"name": "t"}])), chat({"messages": [USER]}))
    assert answer.json()["choices"][0]["message"]["content"] is None  # beside tool calls: null


# --- the control routes: asks and tool reports -----------------------------------------------------------


class Refusing(AttemptControl):
    """A control whose asks and reports fail as `error` says (ControlError or anything else)."""

    def __init__(self, error: Exception):
        super().__init__()
        self.error = error

    def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self.error

    def report(self, body: dict[str, Any]) -> bool:
        raise self.error


class Killing(AttemptControl):
    """A control whose script kills the worker at every tool report."""

    def report(self, body: dict[str, Any]) -> bool:
        super().report(body)
        return True


def control_session(
    control: AttemptControl, route: str, content: bytes, header: str | None = "token"
) -> tuple[httpx.Response, Any]:
    """One POST of `content` to `route` in an attempt whose control is `control`; `header` "token":
    the attempt's bearer token, else that Authorization value (None: no header)."""

    async def go() -> Any:
        endpoint = AgentEndpoint()
        async with endpoint.session(scenario(), SPEC, Calls(), control) as session:
            value = f"Bearer {session.token}" if header == "token" else header
            headers = {"Content-Type": "application/json", **({AUTH: value} if value is not None else {})}
            async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                return await client.post(
                    f"{endpoint.base_url}/{route}", headers=headers, content=content
                ), session

    return asyncio.run(go())


ASK = json.dumps({"kind": "question", "text": "which order?"}).encode()
REPORT = json.dumps({"event": "tool_started", "tool_call_id": "c1", "tool": "lookup"}).encode()


@pytest.mark.parametrize("route", ["interventions", "tool_invocations"])
@pytest.mark.parametrize(
    ("content", "header", "status", "kind", "says"),
    [
        (b"{}", None, 401, "invalid_api_key", "unknown or missing bearer token"),
        (b"{}", "Bearer wrong", 401, "invalid_api_key", "unknown or missing bearer token"),
        (b"not json", "token", 400, "invalid_request_error", "body: not JSON"),
        (b"[1, 2]", "token", 400, "invalid_request_error", "body: expected a JSON object"),
        (b'"text"', "token", 400, "invalid_request_error", "body: expected a JSON object"),
    ],
)
def test_a_control_request_needs_the_attempts_token_and_a_json_object_and_records_nothing_otherwise(
    route: str, content: bytes, header: str | None, status: int, kind: str, says: str
) -> None:
    control = AttemptControl()
    answer, _ = control_session(control, route, content, header)
    assert answer.status_code == status
    assert answer.json() == {"error": {"type": kind, "code": kind, "message": says}}
    assert control.events == [] and control.invocations == {}


def test_an_ask_nobody_answers_is_denied_and_recorded() -> None:
    control = AttemptControl()
    answer, _ = control_session(control, "interventions", ASK)
    assert answer.status_code == 200 and answer.json()["decision"] == "denied"
    assert [e["type"] for e in control.events] == ["asked", "answered"]


def test_a_tool_report_is_recorded_and_answered() -> None:
    control = AttemptControl()
    answer, _ = control_session(control, "tool_invocations", REPORT)
    assert answer.status_code == 200 and answer.json() == {"recorded": True}
    assert control.invocations[(1, "c1")]["started"] is True


@pytest.mark.parametrize("route", ["interventions", "tool_invocations"])
def test_a_refused_control_request_answers_the_controls_status_and_kind(route: str) -> None:
    control = Refusing(ControlError(409, "unscripted", "nothing scripted answers this question"))
    answer, _ = control_session(control, route, ASK if route == "interventions" else REPORT)
    assert answer.status_code == 409
    assert answer.json()["error"] == {
        "type": "unscripted",
        "code": "unscripted",
        "message": "nothing scripted answers this question",
    }


@pytest.mark.parametrize("route", ["interventions", "tool_invocations"])
def test_a_control_that_fails_answers_500_with_one_redacted_line(route: str) -> None:
    key = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    control = Refusing(RuntimeError(f"the review queue refused {key}"))
    answer, _ = control_session(control, route, ASK if route == "interventions" else REPORT)
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("internal_error", "internal_error")
    assert error["message"].startswith("RuntimeError: the review queue refused ")
    assert key not in error["message"] and "\n" not in error["message"]


def test_a_scripted_kill_at_a_tool_report_kills_the_worker_before_it_is_answered() -> None:
    killed: list[bool] = []
    control = Killing(kill=lambda: killed.append(True))
    answer, _ = control_session(control, "tool_invocations", REPORT)
    assert killed == [True] and answer.json() == {"recorded": True}
    # no worker process to kill (an HTTP agent): answered, nothing called
    answer, _ = control_session(Killing(), "tool_invocations", REPORT)
    assert answer.status_code == 200 and answer.json() == {"recorded": True}


# --- an agent that fails right after the provider failed its call -----------------------------------------


@pytest.mark.parametrize(
    ("agent", "answer", "kind", "error"),
    [
        (
            "plays_then_raises",
            CallResult("error", None, 2, 0.0, error_kind="timeout", error="no answer in 5 s"),
            "timeout",
            "no answer in 5 s (then the agent raised RuntimeError: gave up)",
        ),
        (
            "plays_then_raises",
            CallResult("error", None, 1, 0.0, error="upstream 503"),
            "provider_error",
            "upstream 503 (then the agent raised RuntimeError: gave up)",
        ),
        ("plays_then_raises", ok("fine"), "agent_raised", "RuntimeError: gave up"),
        (
            "plays_then_wrong_shape",
            CallResult("error", None, 1, 0.0, error_kind="timeout", error="no answer in 5 s"),
            "agent_shape",
            "result.answer: unknown field (allowed: output, notes)",
        ),
    ],
)
def test_an_agent_that_fails_right_after_a_failed_call_fails_for_the_providers_reason(
    agent: str, answer: CallResult, kind: str, error: str
) -> None:
    plan = {"requests": [{"messages": [USER]}]}
    run, _ = attempt({"entrypoint": f"endpoint_agents:{agent}"}, plan, Calls(answer))
    assert (run.call.status, run.call.error_kind, run.call.error) == ("error", kind, error)


def test_an_agent_that_raises_before_any_call_is_agent_raised() -> None:
    run, _ = attempt({"entrypoint": "endpoint_agents:plays_then_raises"}, {"requests": []})
    assert (run.call.error_kind, run.call.error) == ("agent_raised", "RuntimeError: gave up")


def test_a_scripted_kill_at_a_tool_report_kills_the_entry_points_process_group() -> None:
    control = AttemptControl(
        script=(parse_intervention({"kill_worker": {"at": "tool_started", "tool": "lookup"}}),)
    )
    run, _ = attempt({"entrypoint": "endpoint_agents:reports_then_sleeps", "timeout_s": 20}, control=control)
    assert (run.call.status, run.call.error_kind) == ("error", "agent_killed")
    assert run.call.error == "killed by the case's kill_worker at tool_started of lookup"
    assert control.kill is None and control.problems == []


@pytest.mark.parametrize(
    ("agent", "error"),
    [
        ("exits_hard", "the agent's process exited with code 3: fatal: the tool registry is empty \ufffd"),
        ("exits_silently", "the agent's process exited with code 4"),
    ],
)
def test_an_entry_point_whose_process_exits_without_a_result_is_named_by_its_code_and_last_line(
    agent: str, error: str
) -> None:
    run, _ = attempt({"entrypoint": f"endpoint_agents:{agent}"})
    assert (run.call.status, run.call.error_kind, run.call.error) == ("error", "agent_raised", error)


def test_the_task_carries_the_attempts_identity_and_pinned_sources(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    run, _ = attempt({"entrypoint": "endpoint_agents:tells_its_task"}, fields={"state_dir": state})
    assert json.loads(run.call.text or "") == {
        "attempt_id": "att-1",
        "build": "b1",
        "repeat": 2,
        "scenario_id": "probe",
        **PINNED,
        "state_dir": state,
    }


def _dropping_server(server: socket.socket) -> None:
    """Reads one whole HTTP request, then closes the connection without answering."""
    conn, _ = server.accept()
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += conn.recv(65536)


def test_an_http_agent_whose_service_fails_in_flight_is_agent_raised_naming_the_exception() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        serving = threading.Thread(target=_dropping_server, args=(server,), daemon=True)
        serving.start()
        run, _ = attempt({"http": f"http://127.0.0.1:{server.getsockname()[1]}/attempt", "timeout_s": 20})
        serving.join(10)
    assert (run.call.status, run.call.error_kind, run.call.error) == (
        "error",
        "agent_raised",
        "RemoteProtocolError: Server disconnected without sending a response.",
    )


def test_an_attempts_latency_is_its_own_wall_clock_time() -> None:
    started = time.monotonic()
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, {"requests": [{"messages": [USER]}]})
    took = time.monotonic() - started
    assert 0 < run.call.latency_s <= took


def test_a_leak_only_in_the_agents_notes_is_a_policy_failure() -> None:
    plan = {"result": {"output": "Your refund is with the returns team.", "notes": "used code NW-1"}}
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, forbidden=("NW-1",))
    assert run.call.policy_failures == 1


def test_the_scenarios_own_input_sent_back_by_the_agent_is_not_a_leak() -> None:
    run, _ = attempt(
        {"entrypoint": "endpoint_agents:echoes_its_input"}, {"note": "never say NW-1"}, forbidden=("NW-1",)
    )
    assert (run.call.status, run.call.policy_failures) == ("ok", 0)


def test_an_attempt_with_a_call_whose_check_cannot_be_made_has_no_policy_count() -> None:
    plan = {"requests": [{"messages": [USER]}], "result": {"output": "fine"}}
    run, _ = attempt({"entrypoint": "endpoint_agents:plays"}, plan, Calls(ok("a", policy_hits=None)))
    assert run.call.status == "ok" and run.call.policy_failures is None and run.call.policy_hits is None


def test_a_calls_record_keeps_its_latency_to_the_millisecond() -> None:
    _, session = with_session(Calls(ok("a", latency_s=0.123456)), chat({"messages": [USER]}))
    assert session.records[0].latency_s == 0.123


def test_a_scripted_disconnect_drops_that_call_unanswered_and_unpaid() -> None:
    control = AttemptControl(script=(parse_intervention({"disconnect": {"call": 1}}),))

    async def go() -> Any:
        endpoint, calls = AgentEndpoint(), Calls()
        async with endpoint.session(scenario(), SPEC, calls, control) as session:
            headers = {AUTH: f"Bearer {session.token}"}
            async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                with pytest.raises(httpx.HTTPError):
                    await client.post(
                        f"{endpoint.base_url}/chat/completions", headers=headers, json={"messages": [USER]}
                    )
                again = await client.post(
                    f"{endpoint.base_url}/chat/completions", headers=headers, json={"messages": [USER]}
                )
        return again, calls

    again, calls = asyncio.run(go())
    assert again.status_code == 200 and len(calls.made) == 1  # the next call is answered
    assert [e["type"] for e in control.events][:1] == ["disconnected"]
