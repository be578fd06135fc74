"""Contract of the model gateway port (eval_assets/ports.py): every test runs on each implementation
that can show it.

Implementations (`IMPLEMENTATIONS`):

- `sim`: the in-process sim provider (`sim/agent`), registered with litellm as a custom provider;
  its behaviours come from its knobs (`error_rate`, `latency_ms`, an unknown param).
- `script`: an authored model script (`script/contract`) played back by the script provider; its
  behaviours are its turns (a text turn, failure turns such as `InternalServerError`, `Timeout`,
  `BadRequestError`), given to the gateway as its script source.
- `openai`: litellm's real OpenAI path (`openai/local-test`) against `tests/openai_stub.py`, a real
  HTTP server on 127.0.0.1 whose answers each test scripts (ok, 429, 500, 400, hang, malformed).

All are priced through `ModelGateway(prices=...)`. Retries and journaling are exercised through
`Engine.call` with a real `SpendPath` and a SQLite `SpendJournal`. Every test also checks that no
socket reaches anything but the stub (a Python audit hook sees every connect and name lookup).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import secrets
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# --- network guard: installed before litellm is imported by this module ---------------------------

_NET_EVENTS = frozenset(
    {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto", "socket.sendmsg"}
)
_recorded: list[tuple[str, tuple[Any, ...]]] | None = []  # None: not recording


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recorded is not None and event in _NET_EVENTS:
        _recorded.append((event, args[1:] if event == "socket.connect" else args))


sys.addaudithook(_audit)  # process-wide and permanent; inert while `_recorded` is None

_LITELLM_IMPORTED_HERE = "litellm" not in sys.modules

from invariants.security import LOGGERS  # noqa: E402  (the loggers the canary gate watches)

from eval_assets.capability.rows import judge_verdict_rows, scenario_run_rows  # noqa: E402
from eval_assets.config import (  # noqa: E402
    BuildManifest,
    EngineSettings,  # noqa: E402
    Judge,
    Message,
    Rubric,
    Scenario,
    Subject,
)
from eval_assets.engine import Engine, StoredAttempt  # noqa: E402
from eval_assets.providers import ModelScript, simmodel  # noqa: E402
from eval_assets.providers.gateway import CallOutcome, CallSpec, ModelGateway, UnpricedModel  # noqa: E402
from eval_assets.providers.sim import SimSubject  # noqa: E402
from eval_assets.spend import RETRYABLE_TAG, AttemptRef, SpendJournal, SpendPath  # noqa: E402

try:  # tests/ imported as a package (tests/__init__.py present) or as a rootdir on sys.path
    from tests.openai_stub import Behaviour, OpenAIStub
except ImportError:
    from openai_stub import Behaviour, OpenAIStub  # type: ignore[no-redef]

_IMPORT_EVENTS = list(_recorded)
_recorded = None

# --- constants ----------------------------------------------------------------------------------

PRICE_IN = 2e-6  # USD per input token
PRICE_OUT = 8e-6  # USD per output token
SIM_MODEL = "sim/agent"
SCRIPT_MODEL = "script/contract"
HTTP_MODEL = "openai/local-test"
IMPLEMENTATIONS = ("sim", "script", "openai")  # registered against the port (eval_assets/ports.py)
BUILD, SCENARIO, REPEAT = "b1", "s1", 1
METADATA = {"build": BUILD, "scenario_id": SCENARIO, "repeat": REPEAT, "role": "subject"}
MESSAGES = [{"role": "user", "content": "Summarise the release notes in one sentence."}]
SETTINGS = EngineSettings(backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=2, max_tries=3)
HANG_TIMEOUT_S = 1.0


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- implementations ------------------------------------------------------------------------------


class Provider:
    """One implementation of the port, plus the means to make it misbehave and to count its calls."""

    name: str
    model: str
    api_base: str | None = None

    def __init__(self) -> None:
        self.gateway = ModelGateway(prices={self.model: (PRICE_IN, PRICE_OUT)})

    def spec(
        self, params: dict[str, Any] | None = None, *, timeout_s: float = SETTINGS.timeout_s
    ) -> CallSpec:
        return CallSpec(
            model=self.model,
            messages=MESSAGES,
            max_tokens=64,
            timeout_s=timeout_s,
            params=params or {},
            api_base=self.api_base,
            metadata=METADATA,
        )

    def provider_calls(self) -> int:
        """How many requests reached the model behind litellm."""
        raise NotImplementedError

    # Each returns the params (sim knobs) that make the next calls behave so; http scripts the stub.
    def ok(self) -> dict[str, Any]:
        raise NotImplementedError

    def transient_then_ok(self, failure: str) -> dict[str, Any]:
        raise NotImplementedError

    def always_failing(self) -> dict[str, Any]:
        raise NotImplementedError

    def hanging(self) -> dict[str, Any]:
        raise NotImplementedError

    def non_retryable(self) -> dict[str, Any]:
        raise NotImplementedError


class SimProvider(Provider):
    name, model = "sim", SIM_MODEL

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        super().__init__()
        self._calls = calls

    def provider_calls(self) -> int:
        return len(self._calls)

    def ok(self) -> dict[str, Any]:
        return {"skill": 0.8, "seed": 7}

    def transient_then_ok(self, failure: str) -> dict[str, Any]:
        assert failure == "injected", failure
        return {"error_rate": 0.5, "seed": _sim_seed_failing_first_try_only()}

    def always_failing(self) -> dict[str, Any]:
        return {"error_rate": 1.0}

    def hanging(self) -> dict[str, Any]:
        return {"latency_ms": 30_000}

    def non_retryable(self) -> dict[str, Any]:
        return {"temprature": 0.2}  # not a sim knob: litellm.BadRequestError


class ScriptProvider(Provider):
    """The script provider; each behaviour is the script the gateway's source hands out next."""

    name, model = "script", SCRIPT_MODEL

    def __init__(self) -> None:
        self.script = ModelScript.model_validate({"turns": [{"text": "unset"}]})
        self.lookups = 0
        self.gateway = ModelGateway(prices={self.model: (PRICE_IN, PRICE_OUT)}, scripts=self._source)

    def _source(self, name: str) -> ModelScript:
        assert name == SCRIPT_MODEL.split("/", 1)[1], name
        self.lookups += 1  # one lookup per call the gateway makes to the script model
        return self.script

    def _play(self, *turns: dict[str, Any]) -> dict[str, Any]:
        self.script = ModelScript.model_validate({"turns": list(turns)})
        return {}  # the script model takes no knobs

    def provider_calls(self) -> int:
        return self.lookups

    def ok(self) -> dict[str, Any]:
        return self._play({"text": "The release fixes two bugs."})

    def transient_then_ok(self, failure: str) -> dict[str, Any]:
        assert failure == "injected", failure
        return self._play({"error": "InternalServerError", "message": "503 upstream"}, {"text": "second time lucky"})

    def always_failing(self) -> dict[str, Any]:
        failures = [{"error": "InternalServerError", "message": f"503 try {n}"} for n in range(1, SETTINGS.max_tries + 1)]
        return self._play(*failures)

    def hanging(self) -> dict[str, Any]:
        return self._play({"error": "Timeout", "message": "no answer in time"}, {"text": "late"})

    def non_retryable(self) -> dict[str, Any]:
        return self._play(
            {"error": "BadRequestError", "message": "Unrecognized request argument supplied: temprature"},
            {"text": "never played"},
        )


class HttpProvider(Provider):
    name, model = "openai", HTTP_MODEL

    def __init__(self, stub: OpenAIStub, api_key: str) -> None:
        super().__init__()
        self.stub = stub
        self.api_key = api_key
        self.api_base = stub.base_url

    def provider_calls(self) -> int:
        return len(self.stub.completion_requests)

    def ok(self) -> dict[str, Any]:
        self.stub.script(Behaviour.ok("The release fixes two bugs.", prompt_tokens=23, completion_tokens=9))
        return {}

    def transient_then_ok(self, failure: str) -> dict[str, Any]:
        first = {"429": Behaviour.rate_limited(0), "500": Behaviour.server_error()}[failure]
        self.stub.script(first, Behaviour.ok("second time lucky"))
        return {}

    def always_failing(self) -> dict[str, Any]:
        self.stub.default = Behaviour.server_error()
        return {}

    def hanging(self) -> dict[str, Any]:
        self.stub.script(Behaviour.hang())
        return {}

    def non_retryable(self) -> dict[str, Any]:
        self.stub.script(Behaviour.status(400, "Unrecognized request argument supplied: temprature"))
        return {}


def _sim_seed_failing_first_try_only() -> int:
    """A sim seed whose injected error (rate 0.5) hits try 1 of the attempt and spares try 2."""

    def fails(seed: int, try_no: int) -> bool:
        return simmodel.subject_event(
            seed=seed,
            build=BUILD,
            scenario_id=SCENARIO,
            repeat=REPEAT * 1000 + try_no,
            kind="error",
            rate=0.5,
        )

    return next(s for s in range(10_000) if fails(s, 1) and not fails(s, 2))


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def only_the_stub_is_contacted(request: pytest.FixtureRequest) -> Iterator[set[tuple[str, int]]]:
    """Records every connect / name lookup while the test runs; only the stub's address is allowed."""
    global _recorded
    allowed: set[tuple[str, int]] = set()
    events: list[tuple[str, tuple[Any, ...]]] = []
    _recorded = events
    try:
        yield allowed
    finally:
        _recorded = None
    allowed_hosts = {host for host, _ in allowed}
    outbound = []
    for event, args in events:
        if event == "socket.connect":
            address = args[0]
            if isinstance(address, tuple) and tuple(address[:2]) in allowed:
                continue
        elif event == "socket.getaddrinfo" and args and args[0] in allowed_hosts:
            continue
        outbound.append((event, args))
    assert not outbound, f"network use other than the stub {sorted(allowed)}: {outbound}"


@pytest.fixture
def stub(only_the_stub_is_contacted: set[tuple[str, int]]) -> Iterator[OpenAIStub]:
    server = OpenAIStub().start()
    only_the_stub_is_contacted.add((server.host, server.port))
    try:
        yield server
    finally:
        server.stop()
        assert server.port_released, "the stub's port was not closed"
        assert not server.alive_threads, f"stub threads outlived the test: {server.alive_threads}"


@pytest.fixture
def sim_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Counts the requests litellm hands to the sim subject (it still answers them)."""
    calls: list[dict[str, Any]] = []
    original = SimSubject.acompletion

    async def counting(self: SimSubject, *args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, "kwargs": kwargs})
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SimSubject, "acompletion", counting)
    return calls


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh fake API key in OPENAI_API_KEY: the openai implementation sends it, nothing else may hold it."""
    key = f"sk-canary-{secrets.token_hex(16)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


@pytest.fixture(params=IMPLEMENTATIONS)
def provider(request: pytest.FixtureRequest) -> Provider:
    if request.param == "sim":
        return SimProvider(request.getfixturevalue("sim_calls"))
    if request.param == "script":
        return ScriptProvider()
    return HttpProvider(request.getfixturevalue("stub"), request.getfixturevalue("canary"))


@pytest.fixture
def engine(provider: Provider, journal: SpendJournal) -> Engine:
    spend = SpendPath(journal, provider.gateway, run_id="run-contract")
    return Engine(spend, SETTINGS, jitter=random.Random(0))


REF = AttemptRef(BUILD, SCENARIO, REPEAT, "subject")


# --- the contract -------------------------------------------------------------------------------


def test_ok_call_returns_text_usage_and_the_registered_price(provider: Provider) -> None:
    outcome = run(provider.gateway.call(provider.spec(provider.ok())))

    assert outcome.ok, outcome
    assert outcome.text and outcome.error is None and outcome.error_kind is None
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0
    assert outcome.cost_usd == pytest.approx(
        outcome.prompt_tokens * PRICE_IN + outcome.completion_tokens * PRICE_OUT
    )
    assert outcome.cost_usd > 0
    assert provider.provider_calls() == 1
    if isinstance(provider, HttpProvider):  # what the real HTTP path sent and read back
        assert (outcome.text, outcome.prompt_tokens, outcome.completion_tokens) == (
            "The release fixes two bugs.",
            23,
            9,
        )
        (request,) = provider.stub.completion_requests
        assert request.method == "POST" and request.path == "/v1/chat/completions"
        assert request.body["model"] == "local-test"
        assert request.body["messages"] == MESSAGES
        assert request.body["max_tokens"] == 64
        assert request.headers["authorization"] == f"Bearer {provider.api_key}"


@pytest.mark.parametrize(("cap", "sent"), [(16, 16), (10_000, 64)])
def test_a_max_tokens_param_lowers_the_reply_cap_and_never_raises_it(
    stub: OpenAIStub, canary: str, cap: int, sent: int
) -> None:
    """The request's max_tokens is the scenario's (or judge's) max_output_tokens, 64 here; a manifest's
    `max_tokens` param can only lower it, and is sent once (litellm refuses an argument given twice)."""
    provider = HttpProvider(stub, canary)
    outcome = run(provider.gateway.call(provider.spec({**provider.ok(), "max_tokens": cap})))
    assert outcome.ok, outcome
    (request,) = stub.completion_requests
    assert request.body["max_tokens"] == sent


@pytest.mark.parametrize(
    ("provider", "failure"),
    [("openai", "429"), ("openai", "500"), ("sim", "injected"), ("script", "injected")],
    indirect=["provider"],
)
def test_a_transient_error_is_retried_and_each_try_is_journaled(
    provider: Provider, failure: str, engine: Engine, journal: SpendJournal
) -> None:
    result = run(engine.call(REF, provider.spec(provider.transient_then_ok(failure))))

    assert result.status == "ok" and result.tries == 2, result
    assert result.text
    assert provider.provider_calls() == 2
    rows = journal.rows(build=BUILD)
    assert [(r.try_no, r.status) for r in rows] == [(1, "failed"), (2, "settled")]
    assert len({r.attempt_key for r in rows}) == 2
    assert [r.attempt_key for r in rows] == [f"{BUILD}/-/{SCENARIO}/{REPEAT}/subject/{n}" for n in (1, 2)]
    failed, settled = rows
    expected_kind = {"429": "RateLimitError", "500": "InternalServerError", "injected": "InternalServerError"}
    assert failed.error is not None and failed.error.startswith(RETRYABLE_TAG + expected_kind[failure])
    assert failed.cost_usd == 0.0 and failed.payload is None
    assert settled.payload == result.text and settled.error is None
    assert settled.cost_usd == pytest.approx(result.cost_usd) and result.cost_usd > 0
    assert (settled.prompt_tokens, settled.completion_tokens) == (
        result.prompt_tokens,
        result.completion_tokens,
    )


def test_a_hang_past_the_timeout_is_a_retryable_timeout(provider: Provider) -> None:
    outcome = run(provider.gateway.call(provider.spec(provider.hanging(), timeout_s=HANG_TIMEOUT_S)))

    assert not outcome.ok and outcome.text is None, outcome
    assert outcome.error_kind in ("timeout", "Timeout"), outcome
    assert outcome.retryable
    assert outcome.cost_usd == 0.0
    assert provider.provider_calls() == 1


def test_a_non_retryable_error_is_tried_once(
    provider: Provider, engine: Engine, journal: SpendJournal
) -> None:
    params = provider.non_retryable()
    outcome = run(provider.gateway.call(provider.spec(params)))
    assert not outcome.ok and not outcome.retryable and outcome.error_kind == "BadRequestError", outcome
    assert outcome.error and "temprature" in outcome.error

    calls_before = provider.provider_calls()
    params = provider.non_retryable()
    result = run(engine.call(REF, provider.spec(params)))

    assert result.status == "error" and result.tries == 1, result
    assert result.error_kind == "BadRequestError" and result.text is None
    assert provider.provider_calls() - calls_before == 1
    (row,) = journal.rows(build=BUILD)
    assert row.status == "failed" and row.try_no == 1
    assert row.error is not None and row.error.startswith("BadRequestError: ")  # no retryable tag


def test_a_rerun_reads_a_settled_non_retryable_failure_back_and_pays_for_no_second_try(
    provider: Provider, engine: Engine, journal: SpendJournal
) -> None:
    first = run(engine.call(REF, provider.spec(provider.non_retryable())))
    assert (first.status, first.tries) == ("error", 1), first
    (row,) = journal.rows(build=BUILD)
    assert row.status == "failed"

    # a later run of the same attempt reads the settled failure back: the same error, cost and
    # non-retryability, and the provider is not paid for a second try (issue 30: reusing only
    # settled successes made it an unsettled, retryable try and the engine paid for try 2)
    again = Engine(
        SpendPath(journal, provider.gateway, run_id="run-again"), SETTINGS, jitter=random.Random(0)
    )
    calls_before = provider.provider_calls()
    reread = run(again.call(REF, provider.spec(provider.non_retryable())))
    assert (reread.status, reread.tries, reread.error_kind, reread.reused) == (
        "error",
        1,
        "BadRequestError",
        True,
    ), reread
    assert reread.cost_usd == pytest.approx(row.cost_usd or 0.0)
    assert provider.provider_calls() == calls_before
    assert [(r.try_no, r.run_id) for r in journal.rows(build=BUILD)] == [(1, "run-contract")]


def test_retries_are_bounded_and_a_failed_attempt_is_never_scored(
    provider: Provider, engine: Engine, journal: SpendJournal
) -> None:
    build = BuildManifest(
        id=BUILD,
        milestone=1,
        subject=Subject(
            model=provider.model,
            family=provider.name,
            api_base=provider.api_base,
            params=provider.always_failing(),
        ),
    )
    scenario = Scenario(
        id=SCENARIO, suite="contract", description="d", judge="grader", input=[Message(**MESSAGES[0])]
    )

    subject = run(engine.run_subject(build, scenario, REPEAT))

    call = subject.call
    assert call.status == "error" and call.tries == SETTINGS.max_tries, call
    assert call.error_kind == "InternalServerError" and call.error, call
    assert call.text is None and call.cost_usd == 0.0
    assert provider.provider_calls() == SETTINGS.max_tries
    (row,) = scenario_run_rows(build, [subject])
    assert row["status"] == "error" and row["output"] is None and row["error"]
    rows = journal.rows(build=BUILD)
    assert [(r.try_no, r.status) for r in rows] == [(n, "failed") for n in range(1, SETTINGS.max_tries + 1)]
    assert len({r.attempt_key for r in rows}) == SETTINGS.max_tries
    assert all(r.error and r.error.startswith(RETRYABLE_TAG + "InternalServerError") for r in rows)

    rubric = Rubric(
        id="quality",
        version=1,
        floor=0.5,
        criteria=[{"name": "correct", "description": "d", "weight": 1.0, "scale": {"type": "bool"}}],
    )
    judge = Judge(
        name="grader",
        version=1,
        status="active",
        model="simjudge/grader",
        family="simjudge",
        rubric={"id": "quality", "version": 1},
        prompt="Grade it.",
    )
    stored = StoredAttempt(
        SCENARIO, REPEAT, call.status, call.text, subject.policy_failures, error=call.error
    )
    verdict = run(
        engine.judge_one(build=build, judge=judge, rubric=rubric, scenario=scenario, attempt=stored)
    )
    assert verdict.status == "failed" and verdict.verdict is None, verdict
    (judged,) = judge_verdict_rows(BUILD, judge, rubric, [verdict], {(SCENARIO, REPEAT): False})
    assert judged["score"] is None and "subject attempt errored" in judged["failure_reason"]
    assert verdict.tries == 0 and len(journal.rows(build=BUILD)) == SETTINGS.max_tries  # no judge call


@pytest.mark.parametrize("provider", ["openai"], indirect=True)
def test_a_malformed_response_is_an_outcome_not_an_exception(provider: Provider) -> None:
    assert isinstance(provider, HttpProvider)
    provider.stub.script(Behaviour.malformed())

    outcome = run(provider.gateway.call(provider.spec()))

    assert not outcome.ok and outcome.text is None and outcome.error_kind and outcome.error, outcome
    assert outcome.cost_usd == 0.0


@pytest.mark.parametrize("provider", ["openai"], indirect=True)
def test_the_api_key_never_leaks(
    provider: Provider,
    engine: Engine,
    journal: SpendJournal,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert isinstance(provider, HttpProvider)
    key, secret_part = provider.api_key, provider.api_key.removeprefix("sk-canary-")
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    stub = provider.stub
    # A careless provider echoes the request headers (Authorization included) in its error bodies.
    echo = {"echo_request_headers": True}
    stub.script(
        Behaviour.ok(),
        Behaviour.status(401, "Incorrect API key provided", **echo),
        Behaviour.status(500, "upstream failed", **echo),
        Behaviour.status(429, "slow down", **echo),
        Behaviour.malformed(),
        Behaviour.hang(),
    )
    outcomes: list[CallOutcome] = [run(provider.gateway.call(provider.spec())) for _ in range(5)]
    outcomes.append(run(provider.gateway.call(provider.spec(timeout_s=0.5))))
    # Through the engine and the journal: a failure whose error echoes the key, then success.
    stub.script(Behaviour.status(500, "upstream failed", **echo), Behaviour.ok())
    result = run(engine.call(REF, provider.spec()))
    stub.script(Behaviour.status(403, "forbidden", **echo))
    refused = run(engine.call(AttemptRef(BUILD, SCENARIO, 2, "subject"), provider.spec()))

    # The key really went over the wire, on every request: the test exercised the real path.
    requests = stub.completion_requests
    assert len(requests) == 9
    assert all(r.headers.get("authorization") == f"Bearer {key}" for r in requests)
    assert [o.ok for o in outcomes] == [True, False, False, False, False, False]
    assert result.status == "ok" and refused.status == "error"

    def leaks(text: str) -> bool:
        return key in text or secret_part in text

    for outcome in outcomes:
        for f in dataclasses.fields(outcome):
            assert not leaks(repr(getattr(outcome, f.name))), f"CallOutcome.{f.name} holds the API key"
    for call in (result, refused):
        assert not leaks(repr(call)), "CallResult holds the API key"

    con = sqlite3.connect(tmp_path / "journal.sqlite")
    try:
        cursor = con.execute("SELECT * FROM spend_journal")
        columns = [d[0] for d in cursor.description]
        dumped = cursor.fetchall()
    finally:
        con.close()
    assert len(dumped) == 3  # 500 then ok; 403
    for values in dumped:
        for column, value in zip(columns, values, strict=True):
            assert not leaks(repr(value)), f"journal column {column} holds the API key"

    assert caplog.records, "nothing was logged at DEBUG: the log check would prove nothing"
    assert not leaks(caplog.text)
    for record in caplog.records:
        assert not leaks(repr(record.__dict__)), f"log record from {record.name} holds the API key"
    captured = capsys.readouterr()
    assert not leaks(captured.out) and not leaks(captured.err)


def test_an_unpriced_model_is_refused_with_how_to_price_it() -> None:
    model = "openai/never-heard-of-this"

    with pytest.raises(UnpricedModel) as raised:
        ModelGateway().price(model)

    assert raised.value.model == model
    message = str(raised.value)
    assert model in message
    assert "prices:" in message and "evaltrack.yaml" in message
    assert "input_per_mtok" in message and "output_per_mtok" in message
    with pytest.raises(UnpricedModel):
        ModelGateway().worst_case_cost(CallSpec(model, MESSAGES, 64, 1.0))
    assert ModelGateway(prices={model: (PRICE_IN, PRICE_OUT)}).price(model) == (PRICE_IN, PRICE_OUT)


def test_litellm_loads_no_remote_price_map() -> None:
    """Offline at import: litellm's price map is its bundled copy, forced, never fetched."""
    from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info

    info = get_model_cost_map_source_info()
    assert info["source"] == "local" and info["is_env_forced"] and info["fallback_reason"] is None, info
    if _LITELLM_IMPORTED_HERE:  # this module imported litellm under the audit hook
        assert not _IMPORT_EVENTS, _IMPORT_EVENTS


@pytest.mark.parametrize("model", ["sim/agent", "simjudge/judge-a"])
def test_the_sim_providers_stamp_the_cost_litellm_computes(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sim providers stamp each response's cost (so litellm skips its calculator): the same
    figure litellm's calculator finds for the response, from the price the gateway registered."""
    import litellm

    from eval_assets.providers import sim

    ModelGateway(prices={model: (PRICE_IN, PRICE_OUT)}).ready()  # the sim providers and the price registered
    meta = {"build": "b", "scenario_id": "s", "repeat": 1, "try_no": 1}

    def cost() -> tuple[float, int, int]:
        response = asyncio.run(
            litellm.acompletion(model=model, messages=MESSAGES, max_tokens=64, metadata=meta)
        )
        usage = response.usage
        return response._hidden_params["response_cost"], usage.prompt_tokens, usage.completion_tokens

    bare = litellm.ModelResponse()
    bare.usage = litellm.Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    assert sim._priced(bare, model)._hidden_params["response_cost"] == pytest.approx(
        10 * PRICE_IN + 5 * PRICE_OUT
    )
    stamped = cost()
    monkeypatch.setattr(sim, "_priced", lambda response, _model: response)
    computed = cost()
    assert stamped[1:] == computed[1:] and stamped[1] > 0
    assert stamped[0] == pytest.approx(computed[0], rel=1e-12) and stamped[0] > 0
    assert stamped[0] == pytest.approx(stamped[1] * PRICE_IN + stamped[2] * PRICE_OUT, rel=1e-12)


_FIRST_CALL = """
import asyncio, importlib, json, sys
from eval_assets.providers.gateway import CALL_MODULES, CallSpec, ModelGateway
for name in CALL_MODULES:
    importlib.import_module(name)
before = set(sys.modules)
spec = CallSpec("sim/agent", [{"role": "user", "content": "hello"}], 64, 30.0)
outcome = asyncio.run(ModelGateway(prices={"sim/agent": (1e-6, 2e-6)}).call(spec))
loaded = sorted(set(sys.modules) - before)
print(json.dumps([outcome.ok, [m for m in loaded if m.startswith(("tiktoken", "litellm.proxy._types"))]]))
"""


def test_a_worker_s_first_call_finds_what_litellm_imports_lazily_already_imported(tmp_path: Path) -> None:
    """A fork server imports `CALL_MODULES`; a worker forked from it then makes its first call without
    importing litellm's token encoding or the proxy's types (0.2 s of the 0.24 s that first call took,
    litellm 1.110.2: providers/_first_call.py). A fresh interpreter: nothing else imported them."""
    from shared import fresh_python

    ok, loaded_by_the_call = fresh_python(_FIRST_CALL, cwd=tmp_path)
    assert ok is True
    assert loaded_by_the_call == []
