"""The run engine: plain asyncio, no Dagster.

Runs every (scenario, repeat) attempt of a build with bounded concurrency per model, a per-call
timeout, bounded retries with jittered backoff on retryable errors only, and deterministic attempt
keys. Every try goes through the one spend path (reserve → call → settle). A provider error is an
attempt with status `error` and a reason, never a score. `run_and_judge` pipelines: each attempt is
judged as soon as it finishes.

A scenario with tools runs the replay loop (`replay_loop`, issue 7): the subject is offered the tools;
each tool call is answered from the scenario's replay fixture, never executed; a call not in the
recording gets an error result and counts as a replay miss; at most `max_turns` model calls, each one
journaled through the spend path under its own key (turn t, try n: try_no = (t - 1) * TURN_STRIDE + n).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from eval_assets.config import Bounds, BuildManifest, Judge, Rubric, Scenario
from eval_assets.config import Engine as EngineSettings
from eval_assets.journal import AttemptKey
from eval_assets.judging import Verdict, fence_nonce, parse_verdict, policy_failures, render_judge_prompt
from eval_assets.providers.gateway import CallOutcome, CallSpec
from eval_assets.spend import Refused, Reused, SpendPath, cut_reason
from eval_assets.trajectory import Replay

Role = Literal["subject", "judge"]


def attempt_id(build: str, scenario_id: str, repeat: int) -> str:
    """The id of one subject attempt; stable across materializations."""
    return f"{build}/{scenario_id}/{repeat}"


TURN_STRIDE = 100
"""Replay loop (issue 7): turn t's try n is journaled as try_no (t - 1) * TURN_STRIDE + n. Turn 1 keys
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
    turn: int = 1  # the replay loop's turn (issue 7); 1 for every single-call attempt

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
    turns: int = 1  # turns with a model call made (replay loop, issue 7); a single call: 1 (0 if excluded)
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


@dataclass(frozen=True)
class ReplayRun:
    """One attempt of a scenario with tools: the attempt as one call, and what the loop did.

    `call` sums tries, cost, tokens and latency over every turn; its text is the last assistant
    text. `turns` counts turns whose model call was made (a turn refused by a ceiling is not).
    `messages` is the whole conversation (input, assistant turns, tool results).
    """

    call: CallResult
    turns: int
    replay_misses: int
    messages: tuple[dict[str, Any], ...]


TurnCall = Callable[[int, CallSpec], Awaitable[CallResult]]
"""Makes the model call of one turn (1-based) of the replay loop; the engine's goes through the spend path."""


def _assistant_message(text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


async def replay_loop(scenario: Scenario, spec: CallSpec, call_turn: TurnCall) -> ReplayRun:
    """Run one attempt of a scenario with tools; tools are answered from its replay fixture.

    Promises: at most `scenario.max_turns` model calls; every turn offers the scenario's tools, and the
    last also sends `tool_choice="none"` (it must answer); no tool is ever executed; a tool call not in
    the recording gets an error result and counts as a replay miss; the metadata of every call carries
    `turn` and `replay_calls` (the recorded calls, for the sim subject). A turn that errors or is
    excluded ends the attempt with that status (no output), and so does a last turn that still calls
    tools (`error_kind` "turn_limit"). Otherwise the output is the last assistant text.
    """
    replay = Replay(scenario)
    tools = [t.model_dump(mode="json") for t in scenario.tools]
    messages: list[dict[str, Any]] = list(spec.messages)
    spent: list[CallResult] = []

    def done(
        status: Literal["ok", "error", "excluded"], text: str | None, last: CallResult, **why: Any
    ) -> ReplayRun:
        call = CallResult(
            status,
            text,
            sum(r.tries for r in spent),
            sum(r.cost_usd for r in spent),
            sum(r.prompt_tokens for r in spent),
            sum(r.completion_tokens for r in spent),
            sum(r.latency_s for r in spent),
            error_kind=why.get("error_kind", last.error_kind),
            error=why.get("error", last.error),
            excluded_reason=last.excluded_reason,
            reused=all(r.reused for r in spent),
        )
        return ReplayRun(call, sum(1 for r in spent if r.tries), replay.misses, tuple(messages))

    for turn in range(1, scenario.max_turns + 1):
        final = turn == scenario.max_turns
        turn_spec = replace(
            spec,
            messages=list(messages),
            tools=tools,
            params={**spec.params, "tool_choice": "none"} if final else spec.params,
            metadata={**spec.metadata, "turn": turn, "replay_calls": replay.recorded_calls()},
        )
        result = await call_turn(turn, turn_spec)
        spent.append(result)
        if result.status != "ok":
            return done(result.status, None, result)
        if not result.tool_calls:
            if result.reused and not result.text:
                # A settled tool-call turn read back from a journal that stores no tool calls: its
                # calls are lost, so the attempt cannot go on. Never pass an empty answer off as one.
                return done(
                    "error",
                    None,
                    result,
                    error_kind="journal_without_tool_calls",
                    error=f"turn {turn} was reused from the spend journal without its tool calls",
                )
            messages.append({"role": "assistant", "content": result.text})
            return done("ok", result.text, result)
        calls = [
            {
                "id": c.get("id") or f"call_t{turn}_{i}",
                "name": str(c.get("name")),
                "arguments": c.get("arguments") or "{}",
            }
            for i, c in enumerate(result.tool_calls)
        ]
        messages.append(_assistant_message(result.text, calls))
        for c in calls:
            answer = replay.answer(c["name"], c["arguments"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": answer.content})
        if final:
            return done(
                "error",
                None,
                result,
                error_kind="turn_limit",
                error=f"no final answer within max_turns={scenario.max_turns}: the last turn still called tools",
            )
    raise AssertionError("unreachable: the last turn always returns")  # pragma: no cover


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
        import json

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


@dataclass
class Engine:
    """Runs attempts through the spend path. One instance per event loop run."""

    spend: SpendPath
    settings: EngineSettings
    jitter: random.Random = field(default_factory=random.Random)
    progress: Progress = field(default_factory=Progress)
    fence_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """Keys the judge prompts' fence nonces (judging.fence_nonce); the track passes its home's secret."""
    bounds: Bounds = field(default_factory=Bounds)
    clock: Callable[[], float] = time.monotonic  # the run deadline's clock (seconds)
    _limits: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    _stopped: dict[tuple[str, str | None], str] = field(default_factory=dict)  # (scenario, judge) -> reason
    _deadline: float | None = None
    deadline_passed: bool = False  # a try was not started because bounds.run_deadline_s had passed

    def start_clock(self) -> None:
        """Start the run's wall-clock deadline (bounds.run_deadline_s) now; the Track calls it."""
        self._deadline = self.clock() + self.bounds.run_deadline_s

    def _past_deadline(self) -> bool:
        if self._deadline is not None and self.clock() >= self._deadline:
            self.deadline_passed = True
        return self.deadline_passed

    def _limit(self, model: str) -> asyncio.Semaphore:
        if model not in self._limits:
            self._limits[model] = asyncio.Semaphore(self.settings.concurrency_per_model)
        return self._limits[model]

    async def call(self, ref: AttemptRef, spec: CallSpec) -> CallResult:
        """Up to `max_tries` tries; retries only retryable errors; a refused reservation excludes."""
        stop_key = (ref.scenario_id, ref.judge_version)
        cost = 0.0
        last: CallOutcome | Reused | None = None
        for try_no in range(1, self.settings.max_tries + 1):
            if stop_key in self._stopped:
                return CallResult("excluded", None, try_no - 1, cost, excluded_reason=self._stopped[stop_key])
            tried = replace(spec, metadata={**spec.metadata, "try_no": try_no})
            async with self._limit(spec.model):
                if self._past_deadline():  # no new try once the run's deadline passed; none is half made
                    return CallResult(
                        "error",
                        None,
                        try_no - 1,
                        cost,
                        error_kind="run_deadline",
                        error=f"bounds.run_deadline_s={self.bounds.run_deadline_s:g} passed before try {try_no}",
                    )
                outcome = await self.spend.call(ref, try_no, tried)
            if (
                not isinstance(outcome, Refused)
                and outcome.ok
                and (cut := cut_reason(outcome.text)) is not None
            ):
                # bounds.max_output_bytes: kept (cut, marked) as the attempt's output, an error, never judged
                return CallResult(
                    "error",
                    outcome.text,
                    try_no,
                    cost + outcome.cost_usd,
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    getattr(outcome, "latency_s", 0.0),
                    error_kind="output_cap",
                    error=cut,
                    reused=isinstance(outcome, Reused),
                )
            if isinstance(outcome, Reused):
                if outcome.ok:
                    return CallResult(
                        "ok",
                        outcome.text,
                        try_no,
                        cost + outcome.cost_usd,
                        outcome.prompt_tokens,
                        outcome.completion_tokens,
                        reused=True,
                        # issue 7: a reused tool-call turn needs its calls back (Reused.tool_calls,
                        # once the spend path journals them; until then the replay loop refuses it)
                        tool_calls=outcome.tool_calls,
                    )
                cost += outcome.cost_usd
                last = outcome
                if not outcome.retryable:
                    return CallResult(
                        "error",
                        None,
                        try_no,
                        cost,
                        error_kind=outcome.error_kind,
                        error=outcome.error,
                        reused=True,
                    )
                continue  # a settled failure from an earlier run: go on to the next try
            if isinstance(outcome, Refused):
                if outcome.stops_scenario:
                    self._stopped.setdefault(stop_key, outcome.reason)
                return CallResult("excluded", None, try_no - 1, cost, excluded_reason=outcome.reason)
            cost += outcome.cost_usd
            if outcome.ok:
                return CallResult(
                    "ok",
                    outcome.text,
                    try_no,
                    cost,
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    outcome.latency_s,
                    tool_calls=outcome.tool_calls,
                )
            last = outcome
            if not outcome.retryable or try_no == self.settings.max_tries:
                break
            await asyncio.sleep(self._backoff(try_no))
        assert last is not None
        return CallResult(
            "error",
            None,
            self.settings.max_tries if last.retryable else try_no,
            cost,
            error_kind=last.error_kind,
            error=last.error,
        )

    def _backoff(self, try_no: int) -> float:
        """Exponential backoff with full jitter in [base/2, cap]: bounded, not pinned."""
        cap = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2 ** (try_no - 1))
        return cap * (0.5 + 0.5 * self.jitter.random())

    # --- subject -------------------------------------------------------------------------------

    def subject_spec(
        self, build: BuildManifest, scenario: Scenario, repeat: int, try_meta: bool = True
    ) -> CallSpec:
        messages = [m.model_dump() for m in scenario.input]
        if build.subject.system_prompt:
            messages = [{"role": "system", "content": build.subject.system_prompt}, *messages]
        return CallSpec(
            model=build.subject.model,
            messages=messages,
            max_tokens=scenario.max_output_tokens,
            timeout_s=self.settings.timeout_s,
            params=build.subject.params,
            api_base=build.subject.api_base,
            metadata={"build": build.id, "scenario_id": scenario.id, "repeat": repeat, "role": "subject"},
        )

    async def run_subject(
        self, build: BuildManifest, scenario: Scenario, repeat: int, generation: int = 0
    ) -> SubjectResult:
        """One attempt: a single call, or the replay loop for a scenario with tools (issue 7)."""
        ref = AttemptRef(build.id, scenario.id, repeat, "subject", None, generation)
        spec = self.subject_spec(build, scenario, repeat)
        if scenario.tools:
            run = await replay_loop(scenario, spec, lambda turn, s: self.call(replace(ref, turn=turn), s))
            result, turns, misses = run.call, run.turns, run.replay_misses
        else:
            result = await self.call(ref, spec)
            turns, misses = (1 if result.tries else 0), 0
        self.progress.tick(result)
        return SubjectResult(
            scenario,
            repeat,
            attempt_id(build.id, scenario.id, repeat),
            result,
            policy_failures(result.text, scenario),
            turns,
            misses,
        )

    async def run_subjects(
        self, build: BuildManifest, scenarios: Sequence[Scenario], generation: int = 0
    ) -> list[SubjectResult]:
        """Every (scenario, repeat) attempt of `build`, ordered by (scenario_id, repeat)."""
        jobs = [(s, r) for s in scenarios for r in range(1, s.repeats + 1)]
        self.progress.planned += len(jobs)
        results = await asyncio.gather(*(self.run_subject(build, s, r, generation) for s, r in jobs))
        return sorted(results, key=lambda x: (x.scenario.id, x.repeat))

    # --- judge ---------------------------------------------------------------------------------

    async def judge_one(
        self,
        *,
        build: BuildManifest,
        judge: Judge,
        rubric: Rubric,
        scenario: Scenario,
        attempt: StoredAttempt,
        generation: int = 0,
    ) -> JudgeResult:
        """Score one stored subject attempt. Fails closed; never calls for an attempt with no output."""

        def unscored(status: Literal["failed", "excluded"], reason: str) -> JudgeResult:
            return JudgeResult(
                attempt.scenario_id, attempt.repeat, status, None, reason, attempt.policy_failures, 0.0, 0
            )

        if attempt.status == "excluded":
            return unscored("excluded", attempt.excluded_reason or "subject attempt excluded")
        if attempt.status != "ok" or attempt.output is None:
            return unscored("failed", f"subject attempt errored: {attempt.error or attempt.status}")
        if judge.family == build.subject.family and not scenario.family_exemption:
            return unscored(
                "failed",
                f"judge family {judge.family!r} equals the subject's; scenario {scenario.id} records no exemption",
            )
        ref = AttemptRef(build.id, scenario.id, attempt.repeat, "judge", judge.version_id, generation)
        messages = render_judge_prompt(
            judge, rubric, scenario, attempt.output, nonce=fence_nonce(self.fence_secret, ref.fence_id)
        )
        prompt_bytes = sum(
            len(str(m.get("content") or "").encode("utf-8", "surrogatepass")) for m in messages
        )
        if prompt_bytes > self.bounds.max_judge_prompt_bytes:
            return unscored(
                "failed",
                f"judge prompt of {prompt_bytes} bytes exceeds bounds.max_judge_prompt_bytes="
                f"{self.bounds.max_judge_prompt_bytes}; no call made",
            )
        spec = CallSpec(
            model=judge.model,
            messages=messages,
            max_tokens=judge.max_output_tokens,
            timeout_s=self.settings.timeout_s,
            params=judge.params,
            api_base=judge.api_base,
            metadata={
                "build": build.id,
                "scenario_id": scenario.id,
                "repeat": attempt.repeat,
                "role": "judge",
                "judge_version": judge.version_id,
            },
        )
        result = await self.call(ref, spec)
        self.progress.tick(result)
        if result.status == "excluded":
            return JudgeResult(
                attempt.scenario_id,
                attempt.repeat,
                "excluded",
                None,
                result.excluded_reason,
                attempt.policy_failures,
                result.cost_usd,
                result.tries,
            )
        if result.status == "error":
            return JudgeResult(
                attempt.scenario_id,
                attempt.repeat,
                "failed",
                None,
                f"judge call failed: {result.error_kind}: {result.error}",
                attempt.policy_failures,
                result.cost_usd,
                result.tries,
            )
        verdict = parse_verdict(result.text, rubric)
        return JudgeResult(
            attempt.scenario_id,
            attempt.repeat,
            verdict.status,
            verdict,
            verdict.failure_reason,
            attempt.policy_failures,
            result.cost_usd,
            result.tries,
        )

    async def judge_attempts(
        self,
        build: BuildManifest,
        judge: Judge,
        rubric: Rubric,
        scenarios: dict[str, Scenario],
        attempts: Sequence[StoredAttempt],
        generation: int = 0,
    ) -> list[JudgeResult]:
        """Score stored attempts (those whose scenario uses this judge), ordered by (scenario, repeat)."""
        todo = [a for a in attempts if a.scenario_id in scenarios]
        self.progress.planned += len(todo)
        results = await asyncio.gather(
            *(
                self.judge_one(
                    build=build,
                    judge=judge,
                    rubric=rubric,
                    scenario=scenarios[a.scenario_id],
                    attempt=a,
                    generation=generation,
                )
                for a in todo
            )
        )
        return sorted(results, key=lambda x: (x.scenario_id, x.repeat))

    async def run_and_judge(
        self,
        build: BuildManifest,
        scenarios: Sequence[Scenario],
        judges: Sequence[tuple[Judge, Rubric]],
    ) -> tuple[list[SubjectResult], dict[str, list[JudgeResult]]]:
        """Pipelined: each attempt is judged by every applicable judge as soon as it finishes."""
        verdicts: dict[str, list[JudgeResult]] = {j.version_id: [] for j, _ in judges}

        async def one(scenario: Scenario, repeat: int) -> SubjectResult:
            subject = await self.run_subject(build, scenario, repeat)
            stored = StoredAttempt(
                scenario.id,
                repeat,
                subject.call.status,
                subject.call.text,
                subject.policy_failures,
                subject.call.excluded_reason,
                subject.call.error,
            )
            for judge, rubric in judges:
                if scenario.judge == judge.name:
                    verdicts[judge.version_id].append(
                        await self.judge_one(
                            build=build, judge=judge, rubric=rubric, scenario=scenario, attempt=stored
                        )
                    )
            return subject

        jobs = [(s, r) for s in scenarios for r in range(1, s.repeats + 1)]
        self.progress.planned += len(jobs) * (1 + 0)
        subjects = await asyncio.gather(*(one(s, r) for s, r in jobs))
        for rows in verdicts.values():
            rows.sort(key=lambda x: (x.scenario_id, x.repeat))
        return sorted(subjects, key=lambda x: (x.scenario.id, x.repeat)), verdicts
