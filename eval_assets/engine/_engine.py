"""The retry engine: runs attempts through the one spend path, with adaptive concurrency per provider
(`_limiter`: backs off on 429/overload, honours Retry-After, grows back), a per-call timeout, bounded retries with jittered backoff on retryable errors only, and a run deadline."""

from __future__ import annotations

import asyncio
import hashlib
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from eval_assets import tracing
from eval_assets.config import Agent, Bounds, BuildManifest, EngineSettings, Judge, Rubric, Scenario
from eval_assets.fence import fence_nonce
from eval_assets.judging import PolicyCheck, parse_verdict, policy_failures_stored
from eval_assets.providers.gateway import CallOutcome, CallSpec
from eval_assets.spend import (
    AttemptRef,
    Policy,
    Refused,
    Reused,
    SpendPath,
    attempt_id,
    cut_output,
    cut_reason,
)
from eval_assets.tracing import traced

from ._agent import AgentEndpoint, AgentRun, run_agent
from ._calls import judge_spec, subject_spec
from ._control import AttemptControl
from ._limiter import Limiters, Signal
from ._replay import Replay, replay_loop
from ._results import CallResult, JudgeResult, Progress, StoredAttempt, SubjectResult
from ._spans import (
    attempt_ended,
    attempt_error,
    attempt_started,
    call_ended,
    call_error,
    call_started,
    judge_ended,
    judge_error,
    judge_started,
)


@dataclass
class Engine:
    """Runs attempts through the spend path. One instance per event loop run."""

    spend: SpendPath
    settings: EngineSettings
    jitter: random.Random = field(default_factory=random.Random)
    progress: Progress = field(default_factory=Progress)
    ahead_progress: Progress = field(default_factory=Progress)  # judge calls made ahead (run_subjects)
    fence_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """Keys the judge prompts' fence nonces (fence.fence_nonce); the track passes its home's secret."""
    bounds: Bounds = field(default_factory=Bounds)
    clock: Callable[[], float] = time.monotonic  # the run deadline's clock (seconds)
    limiters: Limiters | None = None  # per provider; None: one set starting at concurrency_per_model
    _stopped: dict[tuple[str, str | None], str] = field(default_factory=dict)  # (scenario, judge) -> reason
    _deadline: float | None = None
    deadline_passed: bool = False  # a try was not started because bounds.run_deadline_s had passed
    agent_search: tuple[str, ...] = ()  # where an agent entrypoint's module is looked for after sys.path
    agent_scratch: str | None = None  # where its worker writes the result (EvalHome.agent_scratch in a run)
    _agents: AgentEndpoint | None = None  # the agent endpoint of this engine's event loop (agent subjects)

    def start_clock(self, seconds: float | None = None) -> None:
        """Start the run's wall-clock deadline now: bounds.run_deadline_s, or the `seconds` left of a
        deadline started elsewhere (a worker process of the run); the Track calls it."""
        self._deadline = self.clock() + (self.bounds.run_deadline_s if seconds is None else seconds)

    def seconds_left(self) -> float:
        """Seconds until the run's deadline (the full bound if the clock was not started)."""
        if self._deadline is None:
            return self.bounds.run_deadline_s
        return self._deadline - self.clock()

    def _past_deadline(self, ahead: bool = False) -> bool:
        """Whether the run's deadline passed; a judge-ahead try (`ahead`) is only told so: the run's
        own attempts decide whether the run failed (a judge call not made ahead is made later)."""
        passed = self._deadline is not None and self.clock() >= self._deadline
        if ahead:
            return passed or self.deadline_passed
        if passed:
            self.deadline_passed = True
        return self.deadline_passed

    def __post_init__(self) -> None:
        if self.limiters is None:
            self.limiters = Limiters(self.settings.concurrency_per_model)

    async def call(
        self, ref: AttemptRef, spec: CallSpec, *, ahead: bool = False, policy: Policy | None = None
    ) -> CallResult:
        """Up to `max_tries` tries; retries only retryable errors; a refused reservation excludes.

        `ahead`: a judge call made ahead of its materialization (`run_subjects(judge_ahead=...)`).
        `policy`: the attempt's policy checks, run on each answer's raw text (`SpendPath.call`)."""
        stop_key = (ref.scenario_id, ref.judge_version)
        cost = 0.0
        last: CallOutcome | Reused | None = None
        for try_no in range(1, self.settings.max_tries + 1):
            if stop_key in self._stopped:
                return CallResult("excluded", None, try_no - 1, cost, excluded_reason=self._stopped[stop_key])
            tried = replace(spec, metadata={**spec.metadata, "try_no": try_no})
            assert self.limiters is not None
            limiter = self.limiters.for_call(spec.model, spec.api_base)
            epoch = await limiter.acquire()
            signal: Signal = "neutral"
            retry_after: float | None = None
            try:
                if self._past_deadline(ahead):  # no new try once the run's deadline passed; none is half made
                    return CallResult(
                        "error",
                        None,
                        try_no - 1,
                        cost,
                        error_kind="run_deadline",
                        error=f"bounds.run_deadline_s={self.bounds.run_deadline_s:g} passed before try {try_no}",
                    )
                started = partial(call_started, self.spend.run_id, ref, try_no, spec)
                with tracing.model_call("chat", spec.model, started) as span:
                    outcome = await self.spend.call(ref, try_no, tried, policy)
                    span.end(partial(call_ended, outcome), call_error(outcome))
                if isinstance(outcome, CallOutcome):  # a call made now (a reused or refused try is neutral)
                    signal = "ok" if outcome.ok else "overload" if outcome.overloaded else "neutral"
                    retry_after = outcome.retry_after_s
            finally:
                limiter.release(epoch, signal, retry_after)
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
                    policy_failures=outcome.policy_failures,
                    policy_hits=outcome.policy_hits,
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
                        # a reused tool-call turn needs its calls back to go on (the replay loop
                        # refuses a reused turn whose calls the journal did not keep)
                        tool_calls=outcome.tool_calls,
                        policy_failures=outcome.policy_failures,
                        policy_hits=outcome.policy_hits,
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
                    policy_failures=outcome.policy_failures,
                    policy_hits=outcome.policy_hits,
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

    @traced("eval.attempt", attempt_started, attempt_ended, attempt_error)
    async def run_subject(
        self, build: BuildManifest, scenario: Scenario, repeat: int, generation: int = 0
    ) -> SubjectResult:
        """One attempt: a single call, or the replay loop for a scenario with tools."""
        ref = AttemptRef(build.id, scenario.id, repeat, "subject", None, generation)
        spec = subject_spec(
            build.subject, scenario, build=build.id, repeat=repeat, timeout_s=self.settings.timeout_s
        )
        policy = PolicyCheck(scenario)  # on the raw texts, before redaction
        trajectory = None
        if build.subject.agent is not None:  # the agent's own code; its calls come back through self.call
            attempt = attempt_id(build.id, scenario.id, repeat)
            agent_run = await self.agent_attempt(
                build.subject.agent,
                ref,
                scenario,
                spec,
                {
                    "attempt_id": attempt,
                    "build": build.id,
                    "repeat": repeat,
                    "now": datetime.now(UTC).isoformat(timespec="seconds"),
                    "seed": hashlib.sha256(f"{attempt}/{generation}".encode()).hexdigest()[:16],
                },
                policy=policy,
            )
            result, turns, misses = _bounded(agent_run.call, self.bounds), len(agent_run.calls), 0
            trajectory = agent_run.trajectory()
        elif scenario.tools:
            run = await replay_loop(
                scenario, spec, lambda turn, s: self.call(replace(ref, turn=turn), s, policy=policy)
            )
            result, turns, misses = run.call, run.turns, run.replay_misses
        else:
            result = await self.call(ref, spec, policy=policy)
            turns, misses = (1 if result.tries else 0), 0
        self.progress.tick(result)
        digest: str | None = policy.digest
        if result.text is None:
            failures = 0
        elif result.policy_hits is not None:
            failures = len(result.policy_hits)
        else:  # reused, checked under another policy, and the raw text is gone: never a silent reuse
            failures, digest = policy_failures_stored(result.text, scenario), None
        return SubjectResult(
            scenario,
            repeat,
            attempt_id(build.id, scenario.id, repeat),
            result,
            failures,
            turns,
            misses,
            trajectory,
            digest,
        )

    async def agent_attempt(
        self,
        agent: Agent,
        ref: AttemptRef,
        scenario: Scenario,
        spec: CallSpec,
        task_fields: dict[str, Any],
        control: AttemptControl | None = None,
        policy: PolicyCheck | None = None,
    ) -> AgentRun:
        """One run of an agent under `ref`: its model calls through this engine's endpoint, each call
        `i` under `ref` with turn `i` (the one spend path). The capability track and the cases both
        run agents through here; `control` answers its asks (a case's script; None: nobody does)."""
        if self._agents is None:
            self._agents = AgentEndpoint()
        checks = policy or PolicyCheck(scenario)  # on the raw texts of every call and the result
        return await run_agent(
            agent,
            task_fields,
            scenario,
            replace(spec, metadata={**spec.metadata, "replay_calls": _recorded_calls(scenario)}),
            self._agents,
            lambda index, s: self.call(replace(ref, turn=index), s, policy=checks),
            search=self.agent_search,
            scratch=self.agent_scratch,
            control=control,
            policy=checks,
        )

    async def run_subjects(
        self,
        build: BuildManifest,
        scenarios: Sequence[Scenario],
        generation: int = 0,
        judge_ahead: Sequence[tuple[Judge, Rubric]] = (),
    ) -> list[SubjectResult]:
        """Every (scenario, repeat) attempt of `build`, ordered by (scenario_id, repeat).

        `judge_ahead`: judge versions (with their rubrics) that score a scenario's attempts as soon as
        all its repeats finished, each version its own scenarios' attempts, through `judge_one` with the
        keys, prompt and spend path `judge_attempts` uses, in this event loop under the same per-model
        limits. Only attempts stored as they are get judged: with an output, of a scenario none of whose
        attempts was excluded (a ceiling excludes the whole scenario from the stored rows). The judge
        results are not returned: the journal keeps each settled call, and the judge version's own
        materialization reads it back instead of paying again. Counted in `ahead_progress`.
        """
        self.progress.planned += sum(s.repeats for s in scenarios)

        async def one(scenario: Scenario) -> list[SubjectResult]:
            results = await asyncio.gather(
                *(self.run_subject(build, scenario, r, generation) for r in range(1, scenario.repeats + 1))
            )
            judges = [(j, r) for j, r in judge_ahead if j.name == scenario.judge]
            if not judges or any(r.call.status == "excluded" for r in results):
                return results
            todo = [r.stored() for r in results if r.call.status == "ok" and r.call.text is not None]
            self.ahead_progress.planned += len(todo) * len(judges)
            await asyncio.gather(
                *(
                    self.judge_one(
                        build=build,
                        judge=judge,
                        rubric=rubric,
                        scenario=scenario,
                        attempt=attempt,
                        generation=generation,
                        ahead=True,
                    )
                    for attempt in todo
                    for judge, rubric in judges
                )
            )
            return results

        per_scenario = await asyncio.gather(*(one(s) for s in scenarios))
        return sorted((r for rs in per_scenario for r in rs), key=lambda x: (x.scenario.id, x.repeat))

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
        ahead: bool = False,
    ) -> JudgeResult:
        """Score one stored subject attempt. Fails closed; never calls for an attempt with no output.

        `ahead`: judged while the subject run is still under way (counted in `ahead_progress`). A
        verdict has one `eval.judge` span, its judge run's (marked `eval.reused` when its call was
        read back): judged ahead, only the model calls' spans are emitted, under the subject run."""
        score = self._judge if ahead else self._judge_verdict
        return await score(
            build=build,
            judge=judge,
            rubric=rubric,
            scenario=scenario,
            attempt=attempt,
            generation=generation,
            ahead=ahead,
        )

    async def _judge(
        self,
        *,
        build: BuildManifest,
        judge: Judge,
        rubric: Rubric,
        scenario: Scenario,
        attempt: StoredAttempt,
        generation: int = 0,
        ahead: bool = False,
    ) -> JudgeResult:

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
        spec = judge_spec(
            judge,
            rubric,
            scenario,
            attempt.output,
            nonce=fence_nonce(self.fence_secret, ref.fence_id),
            build=build.id,
            repeat=attempt.repeat,
            timeout_s=self.settings.timeout_s,
            trajectory=attempt.trajectory,
        )
        prompt_bytes = sum(
            len(str(m.get("content") or "").encode("utf-8", "surrogatepass")) for m in spec.messages
        )
        if prompt_bytes > self.bounds.max_judge_prompt_bytes:
            return unscored(
                "failed",
                f"judge prompt of {prompt_bytes} bytes exceeds bounds.max_judge_prompt_bytes="
                f"{self.bounds.max_judge_prompt_bytes}; no call made",
            )
        result = await self.call(ref, spec, ahead=ahead)
        (self.ahead_progress if ahead else self.progress).tick(result)
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
                result.reused,
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
                result.reused,
            )
        verdict = parse_verdict(
            result.text, rubric, instructions=spec.messages[0]["content"], parser_version=judge.parser_version
        )
        return JudgeResult(
            attempt.scenario_id,
            attempt.repeat,
            verdict.status,
            verdict,
            verdict.failure_reason,
            attempt.policy_failures,
            result.cost_usd,
            result.tries,
            result.reused,
        )

    _judge_verdict = traced("eval.judge", judge_started, judge_ended, judge_error)(_judge)

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
            stored = subject.stored()
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


def _recorded_calls(scenario: Scenario) -> list[dict[str, str]]:
    """The scenario's recorded tool calls (the sim subject makes them: providers/sim.py)."""
    return Replay(scenario).recorded_calls()


def _bounded(result: CallResult, bounds: Bounds) -> CallResult:
    """An agent's output under bounds.max_output_bytes: cut, marked, an error never judged."""
    if result.status != "ok" or result.text is None:
        return result
    text = cut_output(result.text, bounds.max_output_bytes)
    if (cut := cut_reason(text)) is None:
        return result
    return replace(result, status="error", text=text, error_kind="output_cap", error=cut)
