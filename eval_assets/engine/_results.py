"""What the engine returns: one call's result, a subject attempt, a stored attempt, a judge result,
and the progress counters. Plain results: their warehouse rows are shaped by the track
(`eval_assets.capability.rows`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eval_assets.config import Scenario
from eval_assets.judging import Verdict
from eval_assets.redact import redact_any


@dataclass(frozen=True)
class CallResult:
    status: Literal["ok", "error", "excluded"]
    text: str | None
    tries: int
    cost_usd: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error_kind: str | None = None
    error: str | None = None
    excluded_reason: str | None = None
    reused: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    policy_failures: int | None = None  # the policy checks on the raw text (None: no text, or not kept)
    policy_hits: frozenset[int] | None = None  # which forbidden strings, under the policy in force (None: unknown)


@dataclass(frozen=True)
class SubjectResult:
    scenario: Scenario
    repeat: int
    attempt_id: str
    call: CallResult
    policy_failures: int
    turns: int = 1  # turns with a model call made (replay loop); a single call: 1 (0 if excluded)
    replay_misses: int = 0  # tool calls the recording did not hold
    trajectory: dict[str, Any] | None = None  # an agent subject's calls as the endpoint saw them (raw)
    policy_digest: str | None = None  # the policy its output was checked under (None: not under the one in force)

    def stored(self) -> StoredAttempt:
        """The attempt as `scenario_runs` stores it, before the stopped-scenario rule: what a judge scores."""
        c = self.call
        return StoredAttempt(
            self.scenario.id,
            self.repeat,
            c.status,
            c.text,
            self.policy_failures,
            c.excluded_reason,
            c.error,
            stored_trajectory(self.trajectory),
        )


@dataclass(frozen=True)
class StoredAttempt:
    """A subject attempt as stored in `scenario_runs`: what a judge scores."""

    scenario_id: str
    repeat: int
    status: str
    output: str | None
    policy_failures: int
    excluded_reason: str | None = None
    error: str | None = None
    trajectory: str | None = None  # an agent attempt's trajectory as stored (redacted JSON text)


def stored_trajectory(trajectory: Mapping[str, Any] | None) -> str | None:
    """An agent attempt's trajectory as `scenario_runs.trajectory` stores it (and a judge reads it):
    JSON text with sorted keys, every string through the one redaction; None for a model subject."""
    if trajectory is None:
        return None
    return json.dumps(redact_any(dict(trajectory)), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class JudgeResult:
    scenario_id: str
    repeat: int
    status: Literal["scored", "failed", "excluded"]
    verdict: Verdict | None
    failure_reason: str | None
    policy_failures: int
    cost_usd: float
    tries: int
    reused: bool = False  # its call was read back from the journal (judged ahead, or an earlier run)


@dataclass
class Progress:
    """Counters the caller can log while a run is in flight."""

    planned: int = 0
    done: int = 0
    errors: int = 0
    excluded: int = 0
    reused: int = 0
    spend_usd: float = 0.0
    log: Callable[[str], None] | None = None
    every: int = 100

    def tick(self, result: CallResult) -> None:
        self.done += 1
        self.errors += result.status == "error"
        self.excluded += result.status == "excluded"
        self.reused += result.reused
        self.spend_usd += result.cost_usd
        if self.log and (self.done % self.every == 0 or self.done == self.planned):
            self.log(
                f"{self.done}/{self.planned} calls done, {self.errors} errors, {self.excluded} excluded, "
                f"{self.reused} reused, ${self.spend_usd:.4f} spent"
            )
