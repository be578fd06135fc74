"""How far a long materialization has got: attempts done of planned, errors, spend, rate, time left.

`ProgressMeter` is fed each block of results as it comes back and hands a `Progress` to its sink at
most once every `every_s` seconds (and always for the last block), so a 10,000 × 5 run says where it
is without flooding the log. Pure: no terminal, no Dagster; the CLI draws it, the asset logs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

PROGRESS_LOGGER = logging.getLogger("evaltrack.progress")
"""Where a materialization's progress lines go besides its Dagster log: `evaltrack run` draws them."""


@dataclass(frozen=True)
class Progress:
    what: str  # e.g. "scenario_runs agent-2026-11-30-cand"
    done: int
    planned: int
    errors: int
    spend_usd: float
    elapsed_s: float

    @property
    def rate(self) -> float | None:
        """Attempts per second so far; None before any attempt finished or any time passed."""
        return self.done / self.elapsed_s if self.done and self.elapsed_s > 0 else None

    @property
    def left_s(self) -> float | None:
        """Seconds left at the rate so far; None when no rate is known yet."""
        rate = self.rate
        return None if rate is None else max(self.planned - self.done, 0) / rate

    def line(self) -> str:
        """One plain line: `what: 400/5000 attempts (8%) · 3 errors · $0.120 · 45.2/s · 1m42s left`."""
        share = f"{self.done / self.planned:.0%}" if self.planned else "–"
        rate = f"{self.rate:.1f}/s" if self.rate is not None else "–/s"
        left = _duration(self.left_s) + " left" if self.left_s is not None else "time left unknown"
        return (
            f"{self.what}: {self.done}/{self.planned} attempts ({share}) · {self.errors} errors · "
            f"${self.spend_usd:.3f} · {rate} · {left}"
        )


def _duration(seconds: float | None) -> str:
    total = round(seconds or 0.0)
    minutes, secs = divmod(total, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


@dataclass
class ProgressMeter:
    """Counts results as they come back and reports to `sink` at most every `every_s` seconds."""

    what: str
    planned: int
    sink: Callable[[Progress], None]
    every_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    errors: int = 0
    spend_usd: float = 0.0
    _started: float = field(default=0.0, init=False)
    _last: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._started = self.clock()

    def add(self, outcomes: Iterable[tuple[str, float]]) -> None:
        """Count a block's results, each as (status, cost in USD); report when it is time."""
        for status, cost in outcomes:
            self.done += 1
            self.errors += status == "error"
            self.spend_usd += cost
        now = self.clock()
        if self.done >= self.planned or self._last is None or now - self._last >= self.every_s:
            self._last = now
            self.sink(self.now(now))

    def now(self, at: float | None = None) -> Progress:
        moment = self.clock() if at is None else at
        return Progress(
            self.what, self.done, self.planned, self.errors, self.spend_usd, moment - self._started
        )
