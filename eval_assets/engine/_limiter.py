"""Adaptive concurrency per provider: an AIMD limit on calls in flight, honouring `Retry-After`.

`AimdLimit` is the arithmetic, with an injected clock and no asyncio: the limit starts at its ceiling
(`engine.concurrency_per_model`); an overload answer (429, 503: the gateway's `overloaded`) of a call
started since the last decrease multiplies it by `decrease` (never below `floor`); calls already in
flight when it decreased answer for the same congestion and do not decrease it again. Each success
adds `increase / limit` (about `increase` per window of calls), up to the ceiling. A `Retry-After`
pauses the provider: no call starts before it has passed (a longer pause is never shortened).
Anything else (a timeout, a 500, a reused or refused try) leaves the limit as it was.

`ProviderLimiter` puts it in front of an event loop: callers queue first in, first out, and are let
in as slots free up and pauses end (one timer, no polling). `Limiters` holds one per provider key.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Signal = Literal["ok", "overload", "neutral"]

MAX_PAUSE_S = 600.0
"""A longer `Retry-After` is held to this (a provider's typo must not stall a run for a day; the run
deadline still applies on top)."""


def provider_key(model: str, api_base: str | None = None) -> str:
    """The limiter key of a call: litellm's provider (the model id's `<provider>/` prefix), plus the
    endpoint when the spec names one (two servers behind one provider keep separate limits)."""
    provider = model.partition("/")[0] if "/" in model else model
    if provider == "local":  # each local model is a server of its own
        return model
    return f"{provider} @ {api_base}" if api_base else provider


@dataclass
class AimdLimit:
    """The limiter's arithmetic; `clock` is read only for pauses (seconds, monotonic)."""

    ceiling: int
    floor: int = 1
    decrease: float = 0.5
    increase: float = 1.0
    clock: Callable[[], float] = time.monotonic
    limit: float = field(init=False)
    in_flight: int = field(default=0, init=False)
    epoch: int = field(default=0, init=False)
    paused_until: float = field(default=-math.inf, init=False)
    decreases: int = field(default=0, init=False)
    lowest: float = field(init=False)  # the lowest limit reached so far

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.ceiling:
            raise ValueError(f"need 1 <= floor ({self.floor}) <= ceiling ({self.ceiling})")
        if not 0.0 < self.decrease < 1.0:
            raise ValueError(f"decrease must be in (0, 1), got {self.decrease}")
        if self.increase <= 0.0:
            raise ValueError(f"increase must be > 0, got {self.increase}")
        self.limit = self.lowest = float(self.ceiling)

    @property
    def slots(self) -> int:
        """Calls allowed in flight now (the limit, rounded down)."""
        return max(self.floor, int(self.limit))

    def pause_left(self) -> float:
        """Seconds until the provider's pause ends (0 when not paused)."""
        return max(0.0, self.paused_until - self.clock())

    def may_start(self) -> bool:
        return self.in_flight < self.slots and self.pause_left() == 0.0

    def start(self) -> int:
        """Count a call in flight; returns its epoch (to hand back to `finish`)."""
        self.in_flight += 1
        return self.epoch

    def finish(self, epoch: int, signal: Signal, retry_after_s: float | None = None) -> None:
        """A call started in `epoch` ended with `signal` (and the provider's Retry-After, if any)."""
        self.in_flight = max(0, self.in_flight - 1)
        if retry_after_s is not None and retry_after_s > 0.0:
            until = self.clock() + min(retry_after_s, MAX_PAUSE_S)
            self.paused_until = max(self.paused_until, until)
        if signal == "overload":
            if epoch == self.epoch:  # first overload answer since the last decrease
                self.limit = max(float(self.floor), self.limit * self.decrease)
                self.epoch += 1
                self.decreases += 1
                self.lowest = min(self.lowest, self.limit)
        elif signal == "ok":
            self.limit = min(float(self.ceiling), self.limit + self.increase / self.limit)


class ProviderLimiter:
    """An `AimdLimit` in front of an event loop: FIFO waiters, woken when a slot frees or a pause ends."""

    def __init__(self, limit: AimdLimit) -> None:
        self.limit = limit
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = -math.inf

    async def acquire(self) -> int:
        """Wait for a slot; returns the call's epoch. Cancelled while waiting: nothing is held."""
        if not self._waiters and self.limit.may_start():
            return self.limit.start()
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted just as it was cancelled: give it back
                self.release(waiter.result(), "neutral")
            else:
                self._drop(waiter)
            raise

    def release(self, epoch: int, signal: Signal, retry_after_s: float | None = None) -> None:
        self.limit.finish(epoch, signal, retry_after_s)
        self._wake()

    def _drop(self, waiter: asyncio.Future[int]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def _wake(self) -> None:
        while self._waiters and self.limit.may_start():
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(self.limit.start())
        pause = self.limit.pause_left()
        if self._waiters and pause > 0.0 and self._timer_at < self.limit.paused_until:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = self.limit.paused_until
            self._timer = asyncio.get_running_loop().call_later(pause, self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, -math.inf
        self._wake()


@dataclass
class Limiters:
    """One `ProviderLimiter` per provider key, each starting at (and capped by) `ceiling`."""

    ceiling: int
    decrease: float = 0.5
    increase: float = 1.0
    clock: Callable[[], float] = time.monotonic
    by_key: dict[str, ProviderLimiter] = field(default_factory=dict)
    ceilings: dict[str, int] = field(default_factory=dict)  # a key's own ceiling (a local model's slots)

    def for_call(self, model: str, api_base: str | None = None) -> ProviderLimiter:
        key = provider_key(model, api_base)
        if key not in self.by_key:
            ceiling = self.ceilings.get(key, self.ceiling)
            self.by_key[key] = ProviderLimiter(
                AimdLimit(ceiling, decrease=self.decrease, increase=self.increase, clock=self.clock)
            )
        return self.by_key[key]
