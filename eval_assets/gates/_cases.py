"""Cases: a scenario, a subject output produced deterministically, and assertions over it.

A case is one of two kinds of YAML file:

- a **case file** (`gates/cases/*.yaml`) names a scenario of the project and asserts on one run:

  ```yaml
  id: canned-sim-verdict
  scenario: support.refund-policy     # a scenario id under scenarios/
  subject: {model: sim/agent, family: sim, params: {skill: 0.9, noise: 0.0, seed: 7}}  # optional
  judge: helpfulness-v1               # optional: a judge version id, needed by verdict/score assertions
  build: gates-canned                 # optional: the identity the sim sees (default: the suite's build)
  repeat: 1                           # optional, default 1
  output: "..."                       # optional: a canned subject output (no subject call)
  model_fixture: NAME                 # optional: the subject is script/NAME (gates/fixtures/models/NAME.yaml)
  judge_fixture: NAME                 # optional: the judge version with its model replaced by script/NAME
  tries: 1                            # optional: tries per call (the engine's retry rule)
  assertions:                         # at least one
    - contains: "refund"
    - not_contains: "BEGIN PRIVATE KEY"
    - policy_failures: 0
    - replay_misses: 0                # scenarios with tools: calls the recording did not hold
    - tries: 2                        # the subject's tries (all turns)
    - paid_tries: 2                   # subject tries reserved (priced) and settled in the journal
    - tool_call_ids: [call_a]         # the subject's tool-call ids, in order
    - verdict: scored
    - score_at_least: 0.7
    - score_at_most: 1.0
  ```

- a **scenario file** with an `assertions:` block (the same list). A converted scenario
  (`source: trajectory`) without one is *awaiting assertions*: listed, never run, never
  blocking. Assertions are never generated; a person writes them.

A scenario with tools runs the engine's replay loop (recorded tool results, never executed). A case
runs on local models only (`sim/...`, `simjudge/...`, `script/...`): the deterministic suite never
needs a network or an API key. Its calls go through the engine and the one spend path on a
throwaway journal (one try per call unless `tries:`). The subject is the case's `model_fixture`,
its own `subject:` or, failing those, the build's subject; a non-local subject makes the case an
error, never a silent skip.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eval_assets.config import (
    SCRIPTS_DIR,
    Agent,
    Assertion,
    ConfigError,
    Id,
    Judge,
    Project,
    Rubric,
    Scenario,
    Subject,
    parse_assertions,
    parse_interventions,
    read_yaml,
    script_file,
    validate_model,
)
from eval_assets.fence import fence_nonce
from eval_assets.judging import PolicyCheck, parse_verdict, policy_failures, policy_failures_stored
from eval_assets.providers import LOCAL_PROVIDERS, SCRIPT_PROVIDER

from ._outcome import GateContext, Outcome
from ._scratch import scratch

if TYPE_CHECKING:
    from eval_assets.engine import Engine
    from eval_assets.providers.gateway import CallSpec, ModelGateway
    from eval_assets.spend import AttemptRef, SpendJournal

_JUDGED = frozenset({"verdict", "score_at_least", "score_at_most"})
REVIEW_QUEUE_HOOK = "review_queue"
"""`run_suite(hooks=...)`: `opener(journal_url)` -> the review queue an agent case's UNCERTAIN
outcomes are queued in (`eval_assets.review.UncertainEffects`); without it such a case is an error."""
DEFAULT_CLOCK = datetime(2026, 1, 1, tzinfo=UTC)
"""A case's pinned clock (`clock:`) when it names none: the task's `now` is the same on every run."""
CASE_FENCE_SECRET = hashlib.sha256(b"evaltrack gate cases: fence secret").digest()
"""Cases run only local sim models (`_require_local`), so their fence secret need not be secret; a
fixed one keeps each case's judge prompt the same on every run."""


class CaseError(Exception):
    """A case that cannot run (unknown scenario, no subject, a failed model call): an `error`."""


class CaseFile(BaseModel):
    """A case file (see module doc). Unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Id
    description: str = ""
    scenario: Id
    subject: Subject | None = None
    judge: Id | None = None
    build: Id | None = None
    repeat: Annotated[int, Field(ge=0)] = 1
    output: str | None = None
    model_fixture: Id | None = None
    judge_fixture: Id | None = None
    tries: Annotated[int, Field(ge=1, le=10)] = 1
    agent: Agent | None = None
    interventions: list[Any] = Field(default_factory=list)
    clock: datetime = DEFAULT_CLOCK
    seed: Annotated[str, Field(pattern=r"^[0-9a-f]{1,64}$")] | None = None
    assertions: Annotated[list[Any], Field(min_length=1)]

    @field_validator("assertions")
    @classmethod
    def _valid_assertions(cls, items: list[Any]) -> list[Any]:
        parse_assertions(items)
        return items

    @field_validator("interventions")
    @classmethod
    def _valid_interventions(cls, items: list[Any]) -> list[Any]:
        parse_interventions(items)
        return items

    @field_validator("clock")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("clock: give a time zone (e.g. 2026-01-01T00:00:00+00:00)")
        return value

    @model_validator(mode="after")
    def _one_subject(self) -> CaseFile:
        given = [f for f in ("subject", "output", "model_fixture") if getattr(self, f) is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)}: a case names at most one source of the subject output")
        if self.agent is not None and self.output is not None:
            raise ValueError("agent and output: a case with an agent runs it, it has no canned output")
        return self

    def fixtures(self) -> list[tuple[str, str]]:
        """(field, script name) for every model script the case names (a `subject:` on `script/NAME` too)."""
        named = [(f, n) for f in ("model_fixture", "judge_fixture") if (n := getattr(self, f)) is not None]
        if self.subject is not None and self.subject.model.startswith(f"{SCRIPT_PROVIDER}/"):
            named.append(("subject", self.subject.model.partition("/")[2]))
        return named


@dataclass(frozen=True)
class LoadedCase:
    """A case ready to run. `scenario` is set for scenario files; case files name `scenario_id`."""

    path: Path
    id: str
    source: Literal["authored", "trajectory"]
    assertions: tuple[Assertion, ...] | None  # None: a scenario file with no assertions block
    scenario: Scenario | None = None
    case: CaseFile | None = None

    @property
    def awaiting_assertions(self) -> bool:
        """A converted scenario nobody has written assertions for yet: listed, never blocking."""
        return self.source == "trajectory" and self.assertions is None


def load_case(path: Path, shown: str | None = None) -> tuple[LoadedCase | None, list[str]]:
    """Load a case file or a scenario file; return the case or the problems (`field: message`)."""
    shown = shown or str(path)
    data, problems = read_yaml(path, shown)
    if problems:
        return None, [f"{p.field}: {p.message}" for p in problems]
    assert isinstance(data, dict)
    if "input" in data:  # a scenario file, perhaps with an assertions block
        body = dict(data)
        raw = body.pop("assertions", None)
        scenario, found = validate_model(Scenario, body, shown)
        messages = [f"{p.field}: {p.message}" for p in found]
        parsed: tuple[Assertion, ...] | None = None
        if raw is not None:
            if not isinstance(raw, list) or not raw:
                messages.append("assertions: expected a non-empty list")
            else:
                try:
                    parsed = parse_assertions(raw)
                except ValueError as exc:
                    messages.append(f"assertions: {exc}")
        if messages or scenario is None:
            return None, messages
        if scenario.source != "trajectory":
            if parsed is not None:
                return None, ["assertions: only a converted scenario (source: trajectory) is a case"]
            return None, ["assertions: a capability scenario has no assertions, so it is not a case"]
        return LoadedCase(path, scenario.id, scenario.source, parsed, scenario=scenario), []
    case, found = validate_model(CaseFile, data, shown)
    if case is None:
        return None, [f"{p.field}: {p.message}" for p in found]
    return LoadedCase(path, case.id, "authored", parse_assertions(case.assertions), case=case), []


def case_file_problems(root: Path, relative: str) -> list[str]:
    """Why the case file `relative` (to `root`) cannot be loaded; [] when it loads."""
    path = root / relative
    if not path.is_file():
        return [f"case file {relative!r} does not exist"]
    case, problems = load_case(path, relative)
    out = [f"case file {relative!r}: {p}" for p in problems]
    if case is not None and case.case is not None:
        for fld, name in case.case.fixtures():  # the scripts' contents: read_registry (script_problems)
            try:
                missing = not script_file(root, name).is_file()
            except ValueError as exc:
                out.append(f"case file {relative!r}: {fld}: {exc}")
                continue
            if missing:
                out.append(f"case file {relative!r}: {fld}: no script {SCRIPTS_DIR}/{name}.yaml")
    return out


def converted_cases(root: Path, pattern: str) -> list[Path]:
    """Scenario files matching `pattern` (relative to `root`) that are marked `source: trajectory`."""
    out = []
    for path in sorted(root.glob(pattern)):
        if not path.is_file() or path.suffix not in {".yaml", ".yml"}:
            continue
        data, problems = read_yaml(path, str(path))
        if not problems and isinstance(data, dict) and data.get("source") == "trajectory":
            out.append(path)
    return out


# --- running ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseRun:
    """What one case run produced: the output, its policy failures and the verdict (if judged)."""

    output: str
    policy_failures: int
    replay_misses: int = 0
    tries: int = 0
    paid_tries: int = 0
    tool_call_ids: tuple[str, ...] = ()
    verdict_status: str | None = None
    score: float | None = None
    failure_reason: str | None = None
    agent: bool = False  # an agent ran: the agent assertions apply (and `effects: []` when unsaid)
    tool_calls: tuple[dict[str, Any], ...] = ()  # executed invocations: {name, arguments}
    effects: tuple[dict[str, Any], ...] = ()  # invocations that reported effect_sent_at: {tool, id, outcome}
    events: tuple[str, ...] = ()  # event labels, `kind[:detail...]`, in the order the endpoint saw them
    interventions: tuple[dict[str, Any], ...] = ()  # {asked, tool?, answered}
    review_items: int = 0
    told: tuple[str, ...] = ()  # the tool results the agent sent the model
    unscripted: tuple[str, ...] = ()  # asks nothing scripted answered; scripted steps never reached


def _require_local(model: str, what: str) -> None:
    if model.partition("/")[0] not in LOCAL_PROVIDERS:
        raise CaseError(
            f"{what} {model!r} is not on the sim provider: cases run without a network or an API key"
        )


def _project(ctx: GateContext) -> Project:
    """The one project loader's project (loaded once per suite run); an invalid one is a CaseError."""
    try:
        return ctx.project()
    except ConfigError as exc:
        raise CaseError(f"the project does not load: {'; '.join(str(p) for p in exc.problems)}") from None


def _scenario(project: Project, scenario_id: str) -> Scenario:
    if scenario_id not in project.scenarios:
        raise CaseError(f"unknown scenario {scenario_id!r}")
    return project.scenarios[scenario_id]


def _judge_for(case: LoadedCase, scenario: Scenario, project: Project) -> Judge:
    judges = project.judges
    wanted = case.case.judge if case.case is not None else None
    if wanted is not None:
        if wanted not in judges:
            raise CaseError(f"case {case.id}: unknown judge version {wanted!r}")
        return judges[wanted]
    active = sorted(
        (j for j in judges.values() if j.name == scenario.judge and j.status == "active"),
        key=lambda j: j.version,
    )
    if not active:
        raise CaseError(f"case {case.id}: judge {scenario.judge!r} has no active version")
    return active[-1]


def _rubric_for(project: Project, judge: Judge) -> Rubric:
    try:
        return project.rubric_for(judge)
    except KeyError:
        raise CaseError(
            f"judge {judge.version_id}: rubric {judge.rubric.id}-v{judge.rubric.version} not found"
        ) from None


@dataclass(frozen=True)
class _Answer:
    text: str | None
    misses: int
    tries: int  # calls made over every turn
    call_ids: tuple[str, ...]
    error: str
    policy_failures: int = 0  # counted on the raw answer, before redaction
    turns: int = 1  # turns whose call was made
    last_tries: int = 0  # tries of the last turn's call: its retries, not the turns before it


async def _subject_answer(engine: Engine, ref: AttemptRef, scenario: Scenario, spec: CallSpec) -> _Answer:
    """The subject's answer through the engine (its retry rule, the one spend path). A scenario with
    tools runs the engine's replay loop (tools answered from its recording, never executed); one
    without is a single call."""
    from eval_assets.engine import replay_loop

    policy = PolicyCheck(scenario)
    if scenario.tools:
        run = await replay_loop(
            scenario, spec, lambda turn, s: engine.call(replace(ref, turn=turn), s, policy=policy)
        )
        result, misses, turns, last_tries = run.call, run.replay_misses, run.turns, run.last_tries
        call_ids = tuple(
            str(c["id"])
            for m in run.messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        )
    else:
        result, misses, call_ids = await engine.call(ref, spec, policy=policy), 0, ()
        turns, last_tries = 1, result.tries
    if result.status != "ok" or result.text is None:
        why = (
            f"{result.error_kind}: {result.error}"
            if result.status == "error"
            else str(result.excluded_reason)
        )
        return _Answer(None, misses, result.tries, call_ids, why, turns=turns, last_tries=last_tries)
    failures = (
        len(result.policy_hits)
        if result.policy_hits is not None
        else policy_failures_stored(result.text, scenario)
    )
    return _Answer(result.text, misses, result.tries, call_ids, "", failures, turns, last_tries)


def _paid_tries(journal: SpendJournal, build: str) -> int:
    """Journal rows of the case's subject calls that were reserved at a priced worst case and settled."""
    return sum(
        1
        for row in journal.rows(build=build, role="subject")
        if row.status in ("settled", "failed") and row.reserved_usd > 0 and row.settled_at is not None
    )


def _subject_of(case: LoadedCase, ctx: GateContext) -> Subject | None:
    spec_case = case.case
    if spec_case is not None and spec_case.model_fixture is not None:
        return Subject(model=f"{SCRIPT_PROVIDER}/{spec_case.model_fixture}", family=SCRIPT_PROVIDER)
    return (spec_case.subject if spec_case else None) or ctx.subject


def execute_case(case: LoadedCase, ctx: GateContext) -> CaseRun:
    """Run `case` once, deterministically, on local models. Raises CaseError when it cannot run.

    Calls go through the engine and the one spend path, journaled in a throwaway SQLite journal: a
    case's tries are the engine's tries (one, unless the case sets `tries:`), each reserved and
    settled once.
    """
    # Imported when a case runs: the engine, the gateway and the journal (and litellm at the case's
    # first call), which reading, listing and validating cases (`evaltrack validate`) never needs.
    from eval_assets.config import EngineSettings, ScriptBook
    from eval_assets.engine import Engine
    from eval_assets.providers.gateway import ModelGateway
    from eval_assets.spend import AttemptRef, SpendPath, journal_url, open_journal

    project = _project(ctx)
    spec_case = case.case
    if case.scenario is not None:
        scenario = case.scenario
    else:
        assert spec_case is not None
        scenario = _scenario(project, spec_case.scenario)
    build = (spec_case.build if spec_case else None) or ctx.build or "gates"
    repeat = spec_case.repeat if spec_case else 1
    settings = project.settings
    gateway = ModelGateway(settings.price_table(), scripts=ScriptBook(project.root))
    timeout = settings.engine.timeout_s
    tries = spec_case.tries if spec_case else 1
    # Retries of a case do not wait: retry timing is bounded, never pinned, and a case pins outcomes.
    engine_settings = EngineSettings(
        concurrency_per_model=1, timeout_s=timeout, max_tries=tries, backoff_base_s=0.0, backoff_max_s=0.0
    )
    with scratch("evaltrack-case-") as tmp:
        journal = open_journal(journal_url(Path(tmp)))  # a scratch journal, as under EVAL_HOME
        try:
            engine = Engine(
                SpendPath(journal, gateway, run_id=f"case-{case.id}"),
                engine_settings,
                agent_search=(str(project.root),),  # an agent entry point in the project, as in a run
                agent_scratch=str(Path(tmp) / "agents"),
            )
            return _execute(
                case, ctx, project, scenario, build, repeat, gateway, engine, journal, AttemptRef, Path(tmp)
            )
        finally:
            journal.close()


def _execute(
    case: LoadedCase,
    ctx: GateContext,
    project: Project,
    scenario: Scenario,
    build: str,
    repeat: int,
    gateway: ModelGateway,
    engine: Engine,
    journal: SpendJournal,
    attempt_ref: type[AttemptRef],
    tmp: Path,
) -> CaseRun:
    from eval_assets.engine import judge_spec, subject_spec

    spec_case = case.case
    timeout = engine.settings.timeout_s
    misses, tries, paid = 0, 0, 0
    call_ids: tuple[str, ...] = ()
    agent = _agent_of(case, ctx)
    if agent is not None:
        run = _agent_case(case, ctx, scenario, build, repeat, gateway, engine, journal, agent, tmp)
        output = run.output
    elif spec_case is not None and spec_case.output is not None:
        output = spec_case.output
        failures = policy_failures(output, scenario)  # the case's own text is the raw output
    else:
        subject = _subject_of(case, ctx)
        if subject is None:
            raise CaseError(
                f"case {case.id}: no subject (the case names none and no build subject was given)"
            )
        _require_local(subject.model, "subject")
        gateway.price(subject.model)  # an unpriced model is refused before its first call
        spec = subject_spec(subject, scenario, build=build, repeat=repeat, timeout_s=timeout)
        ref = attempt_ref(build, scenario.id, repeat, "subject")
        answer = asyncio.run(_subject_answer(engine, ref, scenario, spec))
        tries, paid, call_ids = answer.tries, _paid_tries(journal, build), answer.call_ids
        if answer.text is None:
            calls = f" ({answer.tries} calls over {answer.turns} turns)" if answer.turns > 1 else ""
            raise CaseError(
                f"case {case.id}: subject call failed after {answer.last_tries} try(s){calls}: {answer.error}"
            )
        output, misses, failures = answer.text, answer.misses, answer.policy_failures
    if agent is None:
        run = CaseRun(
            output=output,
            policy_failures=failures,
            replay_misses=misses,
            tries=tries,
            paid_tries=paid,
            tool_call_ids=tuple(call_ids),
        )
    assertions = case.assertions or ()
    judged = any(a.kind in _JUDGED for a in assertions) or (
        spec_case is not None and (spec_case.judge or spec_case.judge_fixture)
    )
    if not judged:
        return run
    judge = _judge_for(case, scenario, project)
    if spec_case is not None and spec_case.judge_fixture is not None:
        # the judge version's prompt, rubric and parser; its model replaced by the script
        judge = judge.model_copy(
            update={"model": f"{SCRIPT_PROVIDER}/{spec_case.judge_fixture}", "params": {}, "api_base": None}
        )
    _require_local(judge.model, "judge")
    gateway.price(judge.model)
    rubric = _rubric_for(project, judge)
    nonce = fence_nonce(CASE_FENCE_SECRET, case.id)
    spec = judge_spec(
        judge, rubric, scenario, output, nonce=nonce, build=build, repeat=repeat, timeout_s=timeout
    )
    reply = asyncio.run(engine.call(attempt_ref(build, scenario.id, repeat, "judge", judge.version_id), spec))
    if reply.status != "ok":
        raise CaseError(f"case {case.id}: judge call failed: {reply.error_kind}: {reply.error}")
    verdict = parse_verdict(
        reply.text, rubric, instructions=spec.messages[0]["content"], parser_version=judge.parser_version
    )
    return replace(
        run, verdict_status=verdict.status, score=verdict.score, failure_reason=verdict.failure_reason
    )


def _agent_of(case: LoadedCase, ctx: GateContext) -> Agent | None:
    """The agent a case runs: its own `agent:` (pinned), else the build's, unless the case pins a model
    subject (`subject:`) or a canned `output:`."""
    spec_case = case.case
    if spec_case is not None and spec_case.agent is not None:
        return spec_case.agent
    if spec_case is not None and (spec_case.subject is not None or spec_case.output is not None):
        return None
    return ctx.subject.agent if ctx.subject is not None else None


def _agent_subject(case: LoadedCase, ctx: GateContext, agent: Agent) -> Subject:
    """The agent with the model its calls are answered by: the case's script, its `subject:`'s model,
    else the build's subject model."""
    spec_case = case.case
    if spec_case is not None and spec_case.model_fixture is not None:
        return Subject(
            model=f"{SCRIPT_PROVIDER}/{spec_case.model_fixture}", family=SCRIPT_PROVIDER, agent=agent
        )
    base = (spec_case.subject if spec_case else None) or ctx.subject
    if base is None:
        raise CaseError(f"case {case.id}: the agent has no model (no model_fixture and no build subject)")
    return base.model_copy(update={"agent": agent})


def _event_label(event: dict[str, Any]) -> str:
    kind = str(event["type"])
    if kind == "asked":
        return f"asked:{event['kind']}"
    if kind == "answered":
        return f"answered:{event['decision']}"
    if kind in ("tool_started", "effect_sent", "review_item"):
        return f"{kind}:{event['tool']}"
    if kind == "tool_finished":
        return f"tool_finished:{event['tool']}:{event.get('outcome')}"
    return kind


def _asked_and_answered(events: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "asked":
            out.append(
                {
                    "asked": event["kind"],
                    **({"tool": event["tool"]} if "tool" in event else {}),
                    "answered": None,
                }
            )
        elif event["type"] == "answered" and out:
            out[-1]["answered"] = event["decision"]
    return tuple(out)


def _agent_case(
    case: LoadedCase,
    ctx: GateContext,
    scenario: Scenario,
    build: str,
    repeat: int,
    gateway: ModelGateway,
    engine: Engine,
    journal: SpendJournal,
    agent: Agent,
    tmp: Path,
) -> CaseRun:
    """Run the agent as the capability track runs it (`Engine.agent_attempt`), its calls answered by
    the case's model, its asks by the case's `interventions:`; after a scripted `kill_worker`, run the
    attempt again (its paid calls answered from the journal, its `state_dir` kept), as a restarted
    worker would. Raises CaseError when the attempt cannot be read as the agent's doing (an exhausted
    script, a failed model call, an agent that failed on its own)."""
    from eval_assets.engine import AttemptControl, subject_spec
    from eval_assets.spend import AttemptRef, attempt_id, journal_url

    spec_case = case.case
    subject = _agent_subject(case, ctx, agent)
    _require_local(subject.model, "the agent's model")
    gateway.price(subject.model)
    spec = subject_spec(subject, scenario, build=build, repeat=repeat, timeout_s=engine.settings.timeout_s)
    ref = AttemptRef(build, scenario.id, repeat, "subject")
    opener = ctx.hooks.get(REVIEW_QUEUE_HOOK)
    # the review queue in the case's journal database (the wiring opens it: review/ is a floor above)
    queue = opener(journal_url(tmp)) if opener is not None else None

    def review(record: dict[str, Any]) -> None:
        if queue is None:
            raise CaseError(f"no review queue is wired into this suite run (hook {REVIEW_QUEUE_HOOK!r})")
        queue.enqueue(build, scenario.id, repeat, record)

    script = parse_interventions(spec_case.interventions if spec_case else [])
    control = AttemptControl(script=script, review=review)
    state_dir = tmp / "agent-state"
    state_dir.mkdir(exist_ok=True)
    clock = spec_case.clock if spec_case else DEFAULT_CLOCK
    seed = (spec_case.seed if spec_case else None) or hashlib.sha256(case.id.encode()).hexdigest()[:16]
    fields = {
        "attempt_id": attempt_id(build, scenario.id, repeat),
        "build": build,
        "repeat": repeat,
        "now": clock.astimezone(UTC).isoformat(),
        "seed": seed,
        "state_dir": str(state_dir),
    }
    kills = sum(1 for step in script if step.kind == "kill_worker")

    async def attempts() -> list[Any]:
        done = []
        for _ in range(kills + 1):
            agent_run = await engine.agent_attempt(agent, ref, scenario, spec, fields, control)
            done.append(agent_run)
            if agent_run.call.error_kind != "agent_killed":
                break
            control.restart()  # the restarted worker: the same attempt, its state_dir and its paid calls
        return done

    try:
        runs = asyncio.run(attempts())
        queued = queue.count(build) if queue is not None else 0
    finally:
        if queue is not None:
            queue.close()
    records = [c for r in runs for c in r.calls]
    for record in records:
        if record.error and "exhausted" in record.error:
            raise CaseError(
                f"case {case.id}: the model script is exhausted at call {record.index}: {record.error}"
            )
    unscripted = tuple(control.problems) + tuple(
        f"scripted step never reached: {s}" for s in control.unreached()
    )
    final = runs[-1].call
    if final.status != "ok" and not control.problems:  # an unscripted ask: the failure is the finding
        raise CaseError(
            f"case {case.id}: the agent's attempt ended {final.status}: {final.error_kind}: {final.error}"
        )
    invocations = control.tool_invocations()
    return CaseRun(
        output=final.text or "",
        policy_failures=final.policy_failures or 0,
        tries=sum(r.tries for r in records),
        paid_tries=_paid_tries(journal, build),
        tool_call_ids=tuple(str(c.get("id")) for r in records for c in r.tool_calls or []),
        agent=True,
        tool_calls=tuple(
            {"name": i["tool"], "arguments": i["arguments"]} for i in invocations if i["started"]
        ),
        effects=tuple(
            {"tool": i["tool"], "id": i["id"], "outcome": i["outcome"]}
            for i in invocations
            if i["effect_sent_at"]
        ),
        events=tuple(_event_label(e) for e in control.events),
        interventions=_asked_and_answered(control.events),
        review_items=queued,
        told=tuple(
            str(m.get("content"))
            for r in records
            for m in r.sent
            if isinstance(m, dict) and m.get("role") == "tool"
        ),
        unscripted=unscripted,
    )


def _items_match(kind: str, expected: list[Any], actual: Sequence[dict[str, Any]], name: str) -> bool:
    """Whether `actual` holds exactly the `expected` items in order (a bare name matches by name; a
    mapping by each field it gives; `arguments` as JSON when given as a mapping)."""
    if len(expected) != len(actual):
        return False
    for want, got in zip(expected, actual, strict=True):
        want = {name: want} if isinstance(want, str) else want
        for key, value in want.items():
            have = got.get(key)
            if key == "arguments" and isinstance(value, dict):
                try:
                    have = json.loads(have or "{}")
                except ValueError:
                    return False
            if have != value:
                return False
    return True


def _subsequence(wanted: Sequence[str], labels: Sequence[str]) -> str | None:
    """None when `wanted` occurs in `labels` in order (each item matching a label equal to it or
    starting with it and ':'); else the first item not found."""
    position = 0
    for item in wanted:
        while position < len(labels) and not (
            labels[position] == item or labels[position].startswith(item + ":")
        ):
            position += 1
        if position == len(labels):
            return item
        position += 1
    return None


def _agent_failures(assertions: Sequence[Assertion], run: CaseRun) -> list[str]:
    out = []
    for a in assertions:
        if a.kind == "effects" and not _items_match(a.kind, a.value, run.effects, "tool"):
            out.append(f"{a.text()} — the agent reported effects {[e['tool'] for e in run.effects]}")
        elif a.kind == "tool_calls" and not _items_match(a.kind, a.value, run.tool_calls, "name"):
            out.append(
                f"{a.text()} — the agent executed {[(c['name'], c['arguments']) for c in run.tool_calls]}"
            )
        elif a.kind == "event_order" and (missing := _subsequence(a.value, run.events)) is not None:
            out.append(f"{a.text()} — no {missing!r} in order; the events were {list(run.events)}")
        elif a.kind == "interventions" and not _items_match(a.kind, a.value, run.interventions, "asked"):
            out.append(f"{a.text()} — asked and answered {list(run.interventions)}")
        elif a.kind == "output_matches" and re.search(a.value, run.output) is None:
            out.append(f"{a.text()} — the output does not match: {run.output[:200]!r}")
        elif a.kind == "review_items" and run.review_items != a.value:
            out.append(f"{a.text()} — {run.review_items} review item(s) were queued")
        elif a.kind == "model_told" and not any(re.search(a.value, t) for t in run.told):
            out.append(f"{a.text()} — the agent sent the model {[t[:120] for t in run.told]}")
    if run.agent and not any(a.kind == "effects" for a in assertions) and run.effects:
        out.append(f"effects: [] (unsaid) — the agent reported effects {[e['tool'] for e in run.effects]}")
    out += [f"interventions: {line}" for line in run.unscripted]
    return out


def failed_assertions(assertions: Sequence[Assertion], run: CaseRun) -> list[str]:
    """One line per assertion that does not hold for `run`, in declaration order."""
    out = []
    for a in assertions:
        if a.kind == "contains" and a.value not in run.output:
            out.append(f"{a.text()} — the output does not contain it")
        elif a.kind == "not_contains" and a.value in run.output:
            out.append(f"{a.text()} — the output contains it")
        elif a.kind == "policy_failures" and run.policy_failures != a.value:
            out.append(f"{a.text()} — found {run.policy_failures}")
        elif a.kind == "replay_misses" and run.replay_misses != a.value:
            out.append(f"{a.text()} — found {run.replay_misses}")
        elif a.kind in ("tries", "paid_tries") and getattr(run, a.kind) != a.value:
            out.append(f"{a.text()} — found {getattr(run, a.kind)}")
        elif a.kind == "tool_call_ids" and list(run.tool_call_ids) != list(a.value):
            out.append(f"{a.text()} — the subject made {list(run.tool_call_ids)}")
        elif a.kind == "verdict" and run.verdict_status != a.value:
            why = f" ({run.failure_reason})" if run.failure_reason else ""
            out.append(f"{a.text()} — the verdict is {run.verdict_status}{why}")
        elif a.kind == "score_at_least" and (run.score is None or run.score < a.value):
            out.append(f"{a.text()} — the score is {_score(run)}")
        elif a.kind == "score_at_most" and (run.score is None or run.score > a.value):
            out.append(f"{a.text()} — the score is {_score(run)}")
    return out + _agent_failures(assertions, run)


def _score(run: CaseRun) -> str:
    return "none" if run.score is None else f"{run.score:.4f}"


def case_outcome(case: LoadedCase, ctx: GateContext) -> Outcome:
    """Run a case and check its assertions: passed when every assertion holds. Raises CaseError."""
    if case.assertions is None:
        raise CaseError(f"case {case.id} has no assertions")
    run = execute_case(case, ctx)
    failures = failed_assertions(case.assertions, run)
    checked = checked_kinds(case.assertions, run)
    if failures:
        kinds = list(dict.fromkeys(f.split(":", 1)[0] for f in failures))
        return Outcome.failed(  # the kinds first named: a release reason cut to one line still says which
            f"{len(kinds)} of {len(checked)} assertion(s) failed ({', '.join(kinds)})", failures
        )
    return Outcome.ok(f"{len(checked)} assertion(s) hold")


def checked_kinds(assertions: Sequence[Assertion], run: CaseRun) -> list[str]:
    """The assertion kinds `run` is held to, each once: those declared and, for an agent, the two every
    agent case implies (`effects: []` when unsaid; no ask the case did not script)."""
    kinds = list(dict.fromkeys(a.kind for a in assertions))
    if run.agent:
        kinds += [k for k in ("effects", "interventions") if k not in kinds]
    return kinds
