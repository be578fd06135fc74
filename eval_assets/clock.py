"""The wall clock, in UTC: the one default for every injected clock (tests pass their own)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time as a timezone-aware datetime (UTC). Injected so tests control time."""


def utc_now() -> datetime:
    """The default clock: the wall clock, in UTC."""
    return datetime.now(UTC)
