"""The adaptive limiter: its arithmetic (injected clock), its queue, the gateway's Retry-After, and the
engine against a rate-limited OpenAI-compatible server (tests/openai_stub.py, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import litellm
import pytest

from eval_assets.config import EngineSettings
from eval_assets.engine import MAX_PAUSE_S, AimdLimit, Engine, Limiters, ProviderLimiter, provider_key
from eval_assets.providers.gateway import CallSpec, ModelGateway, retry_after_s
from eval_assets.spend import AttemptRef, SpendPath, journal_url, open_journal

try:  # tests/ imported as a package (tests/__init__.py present) or as a rootdir on sys.path
    from tests.openai_stub import OpenAIStub
except ImportError:
    from openai_stub import OpenAIStub  # type: ignore[no-redef]

MODEL = "openai/local-test"
PRICES = {MODEL: (2e-6, 8e-6)}


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- the arithmetic ------------------------------------------------------------------------------


def test_starts_at_the_ceiling_and_successes_never_lift_it_above() -> None:
    limit = AimdLimit(8, clock=Clock())
    assert (limit.limit, limit.slots) == (8.0, 8)
    for _ in range(100):
        limit.finish(limit.start(), "ok")
    assert limit.limit == 8.0


def test_an_overload_halves_the_limit_once_for_the_calls_in_flight_together() -> None:
    limit = AimdLimit(64, clock=Clock())
    epochs = [limit.start() for _ in range(10)]  # ten calls in flight when the provider pushes back
    for epoch in epochs:
        limit.finish(epoch, "overload")
    assert (limit.limit, limit.decreases, limit.lowest) == (32.0, 1, 32.0)  # one congestion event, one decrease
    limit.finish(limit.start(), "overload")  # a call started after the decrease: new evidence
    assert (limit.limit, limit.decreases) == (16.0, 2)


def test_the_decrease_factor_applies_and_the_floor_holds() -> None:
    limit = AimdLimit(10, decrease=0.7, clock=Clock())
    limit.finish(limit.start(), "overload")
    assert limit.limit == pytest.approx(7.0)
    for _ in range(20):
        limit.finish(limit.start(), "overload")
    assert (limit.limit, limit.slots) == (1.0, 1)


def test_growth_is_additive_about_one_slot_per_window_of_successes() -> None:
    limit = AimdLimit(64, clock=Clock())
    for _ in range(3):
        limit.finish(limit.start(), "overload")
    assert limit.limit == 8.0
    for _ in range(8):  # one window of 8 successes
        limit.finish(limit.start(), "ok")
    assert 8.9 < limit.limit <= 9.0
    for _ in range(9):  # the next window
        limit.finish(limit.start(), "ok")
    assert 9.9 < limit.limit <= 10.0
    successes = 17
    while limit.limit < 64.0:
        limit.finish(limit.start(), "ok")
        successes += 1
    # +1/limit per success: dL/dn = 1/L, so from 8 to 64 takes about (64² - 8²) / 2 successes
    assert successes == pytest.approx((64**2 - 8**2) / 2, rel=0.01)


def test_neutral_outcomes_leave_the_limit_as_it_was() -> None:
    limit = AimdLimit(4, clock=Clock())
    limit.finish(limit.start(), "overload")
    limit.finish(limit.start(), "neutral")
    assert (limit.limit, limit.in_flight) == (2.0, 0)


def test_slots_bound_the_calls_in_flight() -> None:
    limit = AimdLimit(3, clock=Clock())
    epochs = [limit.start() for _ in range(3)]
    assert not limit.may_start()
    limit.finish(epochs[0], "ok")
    assert limit.may_start()


def test_retry_after_pauses_the_provider_until_it_passed_and_is_never_shortened() -> None:
    clock = Clock(100.0)
    limit = AimdLimit(4, clock=clock)
    limit.finish(limit.start(), "overload", retry_after_s=2.0)
    epoch = limit.start()  # a call that was in flight when the pause began
    clock.now = 101.0
    limit.finish(epoch, "overload", retry_after_s=0.5)  # a shorter pause: the longer one stands
    clock.now = 101.999
    assert limit.paused_until == 102.0
    assert not limit.may_start() and limit.pause_left() == pytest.approx(0.001)
    clock.now = 102.0
    assert limit.may_start()
    limit.finish(limit.start(), "overload", retry_after_s=10 * MAX_PAUSE_S)
    assert limit.paused_until == 102.0 + MAX_PAUSE_S


def test_bad_parameters_are_refused() -> None:
    for kwargs in ({"floor": 0}, {"floor": 5}, {"decrease": 1.0}, {"decrease": 0.0}, {"increase": 0.0}):
        with pytest.raises(ValueError):
            AimdLimit(4, **kwargs)  # type: ignore[arg-type]


def test_provider_key_is_the_provider_and_an_endpoint_keeps_its_own() -> None:
    assert provider_key("sim/agent") == provider_key("sim/other") == "sim"
    assert provider_key("openai/gpt-4o") == "openai"
    assert provider_key(MODEL, "http://127.0.0.1:9/v1") == "openai @ http://127.0.0.1:9/v1"
    limiters = Limiters(8)
    assert limiters.for_call("simjudge/a") is limiters.for_call("simjudge/b")
    assert limiters.for_call("simjudge/a") is not limiters.for_call("sim/a")


# --- the queue -----------------------------------------------------------------------------------


def test_waiters_are_let_in_first_come_first_served_as_slots_free() -> None:
    async def scenario() -> list[int]:
        limiter = ProviderLimiter(AimdLimit(2))
        order: list[int] = []
        held = [await limiter.acquire(), await limiter.acquire()]

        async def wait(i: int) -> None:
            await limiter.acquire()
            order.append(i)

        tasks = [asyncio.create_task(wait(i)) for i in range(4)]
        await asyncio.sleep(0)  # yield: every waiter queues
        assert order == [] and limiter.limit.in_flight == 2
        limiter.release(held[0], "ok")
        await asyncio.sleep(0)
        assert order == [0]
        limiter.release(held[1], "ok")
        for _ in range(3):
            limiter.release(0, "ok")
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3]


def test_a_cancelled_waiter_holds_no_slot() -> None:
    async def scenario() -> int:
        limiter = ProviderLimiter(AimdLimit(1))
        held = await limiter.acquire()
        waiter = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        limiter.release(held, "ok")
        return limiter.limit.in_flight

    assert asyncio.run(scenario()) == 0


def test_a_paused_provider_lets_waiters_in_when_the_pause_ends() -> None:
    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        limiter = ProviderLimiter(AimdLimit(4, clock=loop.time))
        epoch = await limiter.acquire()
        limiter.release(epoch, "overload", retry_after_s=0.2)
        asked = loop.time()
        await limiter.acquire()  # woken by the limiter's timer, not by a release
        return loop.time() - asked, limiter.limit.limit

    waited, limit = asyncio.run(scenario())
    assert waited >= 0.2 and limit == 2.0


# --- Retry-After from the provider's answer ------------------------------------------------------


def _rate_limit_error(headers: dict[str, str]) -> litellm.RateLimitError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    return litellm.RateLimitError(
        "rate limited", "openai", MODEL, response=httpx.Response(429, headers=headers, request=request)
    )


def test_retry_after_in_seconds_milliseconds_or_an_http_date() -> None:
    now = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s(_rate_limit_error({"Retry-After": "3"})) == 3.0
    assert retry_after_s(_rate_limit_error({"Retry-After": "1.5"})) == 1.5
    assert retry_after_s(_rate_limit_error({"retry-after-ms": "250", "Retry-After": "1"})) == 0.25
    date = "Wed, 02 Dec 2026 12:00:07 GMT"
    assert retry_after_s(_rate_limit_error({"Retry-After": date}), now) == 7.0
    assert retry_after_s(_rate_limit_error({"Retry-After": "Wed, 02 Dec 2026 11:59:00 GMT"}), now) == 0.0
    for junk in ("soon", "-4", "nan", "inf", ""):
        assert retry_after_s(_rate_limit_error({"Retry-After": junk})) is None, junk
    assert retry_after_s(_rate_limit_error({})) is None
    assert retry_after_s(ValueError("no response at all")) is None


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + secrets.token_urlsafe(24))  # a fresh, fake key
    server = OpenAIStub().start()
    try:
        yield server
    finally:
        server.stop()
    assert server.port_released and not server.alive_threads


def _spec(stub: OpenAIStub, timeout_s: float = 5.0) -> CallSpec:
    return CallSpec(
        model=MODEL,
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=16,
        timeout_s=timeout_s,
        api_base=stub.base_url,
        metadata={"role": "subject"},
    )


@pytest.mark.parametrize(("form", "expected"), [("seconds", 100.0), ("seconds+ms", 100.0), ("date", 100.0)])
# R = 0.01/s, burst 1: the second call waits about 100 s for its token. "seconds": the whole seconds
# the server rounded that up to; "seconds+ms": the exact wait (milliseconds); "date": whole seconds on
# the server's clock, up to a second less when read (never the fixed 1 s a fast machine would need)
def test_the_gateway_carries_the_servers_retry_after_and_nothing_else(
    stub: OpenAIStub, form: str, expected: float
) -> None:
    stub.rate_limit(0.01, burst=1.0, retry_after=form)  # type: ignore[arg-type]  # next token in 100 s
    gateway = ModelGateway(PRICES)

    async def two() -> list:
        return [await gateway.call(_spec(stub)) for _ in range(2)]

    first, second = asyncio.run(two())
    assert first.ok and not first.overloaded and first.retry_after_s is None
    assert (second.ok, second.overloaded, second.error_kind) == (False, True, "RateLimitError")
    assert second.retry_after_s is not None
    if form == "seconds":
        assert second.retry_after_s == expected
    else:
        assert expected - 10.0 <= second.retry_after_s <= expected


# --- end to end: the engine against a server limited to R requests a second ------------------------


def test_the_engine_backs_off_against_a_rate_limited_server_and_recovers_when_the_limit_lifts(
    stub: OpenAIStub, tmp_path: Path
) -> None:
    rate, ceiling = 40.0, 16
    stub.latency_s = 0.05  # at R=40/s a 50 ms call needs about 2 in flight: 16 is far too many
    stub.rate_limit(rate, burst=rate / 4, retry_after="seconds+ms")
    settings = EngineSettings(
        concurrency_per_model=ceiling, max_tries=10, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=5
    )
    journal = open_journal(journal_url(tmp_path))
    engine = Engine(SpendPath(journal, ModelGateway(PRICES), run_id="limiter"), settings, jitter=random.Random(0))
    spec = _spec(stub)

    async def calls(first: int, count: int) -> list:
        refs = [AttemptRef("b1", f"s{i:04d}", 1, "subject") for i in range(first, first + count)]
        return await asyncio.gather(*(engine.call(ref, spec) for ref in refs))

    try:
        limited = asyncio.run(calls(0, 120))
        assert engine.limiters is not None
        limit = engine.limiters.for_call(MODEL, stub.base_url).limit
        backed_off = (limit.lowest, limit.decreases)
        limited_429s = stub.rate_limited_count

        stub.rate_limit(None)
        free = asyncio.run(calls(1000, 300))
        recovered = limit.limit
    finally:
        journal.close()

    assert [r.status for r in limited] == ["ok"] * 120  # every call got through in the end
    assert limited_429s > 0  # the server did push back
    assert backed_off[1] >= 1 and backed_off[0] <= ceiling / 2, backed_off
    assert [r.status for r in free] == ["ok"] * 300
    assert stub.rate_limited_count == limited_429s  # nothing is refused once the limit is lifted
    assert recovered == float(ceiling)  # grown back, additively, to where it started
