"""Attempt identity: which call a journal row is for. A leaf shared by the journal, the spend path and
the engine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Role = Literal["subject", "judge"]
_KEY_PART = re.compile(r"[^/#\s]+")


@dataclass(frozen=True)
class AttemptKey:
    """The identity of one model call; `key` is the journal's primary key.

    `key` is `"{build}/{judge_version or '-'}/{scenario_id}/{repeat}/{role}/{try_no}"`, plus `#g{n}`
    for an explicit fresh run (generation n >= 1). Generation 0 (the default) has no suffix, so a
    normal re-run finds the settled attempts of the previous run and reuses them.
    Raises ValueError for a part that would make keys ambiguous ('/', '#', whitespace, empty), for a
    subject attempt with a judge version or a judge attempt without one, and for negative numbers.
    """

    build: str
    judge_version: str | None
    scenario_id: str
    repeat: int
    role: Role
    try_no: int
    generation: int = 0

    def __post_init__(self) -> None:
        for name in ("build", "scenario_id"):
            _check_key_part(name, getattr(self, name))
        if self.role not in ("subject", "judge"):
            raise ValueError(f"role must be 'subject' or 'judge', not {self.role!r}")
        if self.role == "subject" and self.judge_version is not None:
            raise ValueError("a subject attempt has no judge version")
        if self.role == "judge":
            if self.judge_version is None:
                raise ValueError("a judge attempt needs its judge version")
            _check_key_part("judge_version", self.judge_version)
            if self.judge_version == "-":
                raise ValueError("judge_version '-' is reserved for subject attempts in keys")
        for name in ("repeat", "try_no", "generation"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, not {value!r}")

    @property
    def key(self) -> str:
        base = (
            f"{self.build}/{self.judge_version or '-'}/{self.scenario_id}/"
            f"{self.repeat}/{self.role}/{self.try_no}"
        )
        return base if self.generation == 0 else f"{base}#g{self.generation}"

    def __str__(self) -> str:
        return self.key


def _check_key_part(name: str, value: object) -> None:
    if not isinstance(value, str) or not _KEY_PART.fullmatch(value):
        raise ValueError(f"{name} must be a non-empty string without '/', '#' or whitespace, not {value!r}")


def attempt_id(build: str, scenario_id: str, repeat: int) -> str:
    """The id of one subject attempt; stable across materializations."""
    return f"{build}/{scenario_id}/{repeat}"


TURN_STRIDE = 100
"""Replay loop: turn t's try n is journaled as try_no (t - 1) * TURN_STRIDE + n. Turn 1 keys
are the single-call keys, unchanged; Engine settings cap max_tries at 10, so keys never collide."""


@dataclass(frozen=True)
class AttemptRef:
    """What one call is for; with a try number it makes the deterministic attempt key."""

    build: str
    scenario_id: str
    repeat: int
    role: Role
    judge_version: str | None = None
    generation: int = 0
    turn: int = 1  # the replay loop's turn; 1 for every single-call attempt

    @property
    def fence_id(self) -> str:
        """What a judge prompt's fence nonce is derived from: every try of the attempt renders alike."""
        return f"{self.build}/{self.judge_version}/{self.scenario_id}/{self.repeat}/{self.turn}/g{self.generation}"

    def attempt(self, try_no: int) -> AttemptKey:
        return AttemptKey(
            self.build,
            self.judge_version,
            self.scenario_id,
            self.repeat,
            self.role,
            (self.turn - 1) * TURN_STRIDE + try_no,
            self.generation,
        )
