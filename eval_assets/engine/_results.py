"""What the engine returns: one call's result, a subject attempt, a stored attempt, a judge result,
and the progress counters. The warehouse row of each result is shaped here (`row`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from eval_assets.config import BuildManifest, Judge, Rubric, Scenario
from eval_assets.judging import Verdict
from eval_assets.spend import attempt_id


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


@dataclass(frozen=True)
class SubjectResult:
    scenario: Scenario
    repeat: int
    attempt_id: str
    call: CallResult
    policy_failures: int
    turns: int = 1  # turns with a model call made (replay loop); a single call: 1 (0 if excluded)
    replay_misses: int = 0  # tool calls the recording did not hold

    def row(self, build: BuildManifest) -> dict[str, Any]:
        c = self.call
        return {
            "build": build.id,
            "scenario_id": self.scenario.id,
            "repeat": self.repeat,
            "suite": self.scenario.suite,
            "source": self.scenario.source,
            "attempt_id": self.attempt_id,
            "model": build.subject.model,
            "status": c.status,
            "output": c.text,
            "policy_failures": self.policy_failures,
            "cost_usd": c.cost_usd,
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "tries": c.tries,
            "latency_s": c.latency_s,
            "error_kind": c.error_kind,
            "error": c.error,
            "excluded_reason": c.excluded_reason,
            "turns": self.turns,
            "replay_misses": self.replay_misses,
        }

    def stored(self) -> StoredAttempt:
        """The attempt as `scenario_runs` stores it, before the stopped-scenario rule: what a judge scores."""
        c = self.call
        return StoredAttempt(
            self.scenario.id, self.repeat, c.status, c.text, self.policy_failures, c.excluded_reason, c.error
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

    def row(self, build_id: str, judge: Judge, rubric: Rubric) -> dict[str, Any]:
        v = self.verdict
        return {
            "build": build_id,
            "judge_version": judge.version_id,
            "scenario_id": self.scenario_id,
            "repeat": self.repeat,
            "attempt_id": attempt_id(build_id, self.scenario_id, self.repeat),
            "rubric": rubric.key,
            "status": self.status,
            "score": v.score if v is not None and v.status == "scored" else None,
            "criteria": json.dumps(v.criteria, sort_keys=True) if v is not None and v.criteria else None,
            "source": "model",
            "failure_reason": self.failure_reason,
            "policy_failures": self.policy_failures,
            "cost_usd": self.cost_usd,
            "tries": self.tries,
            "author": None,
        }


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
