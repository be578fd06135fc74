"""Recording a model script from a live run: `evaltrack fixtures record --case ID --model MODEL`.

The only way a script is ever written by the program, and an explicit command: running the suite
never records (a suite that re-records itself asserts whatever happened last). One run of the case's
scenario against MODEL, one try per call, through the gateway and the one spend path (the home's
journal, under the day ceiling: a live call is paid). Tools are answered from the scenario's
recording, never executed. Every text and tool argument is redacted with the one redaction before it
is written; the file is validated against the script shape, written atomically, and never overwrites
an existing script unless asked (`force`). A person reviews it before a case relies on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from eval_assets.clock import utc_now
from eval_assets.config import (
    ConfigError,
    EngineSettings,
    Project,
    Scenario,
    ScriptBook,
    Subject,
    script_file,
    validate_model,
)
from eval_assets.providers import ModelScript
from eval_assets.redact import findings, redact
from eval_assets.safe_write import UnsafeTarget, check_target, write_file

from ._cases import LoadedCase, load_case

RECORD_BUILD = "fixtures-record"
"""The build id recordings are journaled under (each recording is a new generation: always paid)."""


class RecordRefused(Exception):
    """The recording was refused or its live run failed; nothing was written. The message says why."""


@dataclass(frozen=True)
class Recording:
    """A script written from a live run."""

    path: Path
    name: str
    turns: int
    tool_calls: int
    cost_usd: float


def find_case(root: Path, project: Project, case_id: str) -> LoadedCase:
    """The case `case_id`: a case file under gates/cases/, or a converted scenario."""
    for path in sorted((root / "gates" / "cases").glob("*.yaml")):
        case, _ = load_case(path, str(path.relative_to(root)))
        if case is not None and case.id == case_id:
            return case
    scenario = project.scenarios.get(case_id)
    if scenario is not None and scenario.source == "trajectory":
        return LoadedCase(project.sources.get(case_id, root), case_id, "trajectory", None, scenario=scenario)
    raise RecordRefused(f"no case {case_id!r}: not a case file under gates/cases/ nor a converted scenario")


def _subject(case: LoadedCase, model: str, api_base: str | None) -> Subject:
    """MODEL as the subject; the case's own subject params and system prompt when it names the same model."""
    own = case.case.subject if case.case is not None else None
    same = own is not None and own.model == model
    return Subject(
        model=model,
        family=model.partition("/")[0],
        api_base=api_base,
        system_prompt=own.system_prompt if same and own is not None else None,
        params=dict(own.params) if same and own is not None else {},
    )


def _turns(messages: tuple[dict[str, Any], ...], start: int) -> list[dict[str, Any]]:
    """The assistant turns of a finished conversation, as script turns (texts and arguments redacted)."""
    out: list[dict[str, Any]] = []
    for message in messages[start:]:
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if not calls:
            out.append({"text": redact(str(message.get("content") or ""))})
            continue
        turn: dict[str, Any] = {
            "tool_calls": [
                {
                    "id": str(c["id"]),
                    "type": "function",
                    "function": {
                        "name": str(c["function"]["name"]),
                        "arguments": redact(str(c["function"]["arguments"])),
                    },
                }
                for c in calls
            ]
        }
        if message.get("content"):
            turn["text"] = redact(str(message["content"]))
        out.append(turn)
    return out


def _render(data: dict[str, Any], *, case_id: str, model: str, at: datetime) -> str:
    header = (
        f"# Recorded by `evaltrack fixtures record` from one live run of case {case_id} against {model}\n"
        f"# at {at.isoformat(timespec='seconds')}. Texts and tool arguments went through the one redaction.\n"
        "# REVIEW BEFORE USE: a recording pins whatever the model did that day, defects included. Call\n"
        "# ids are as the model sent them. Failure turns are never recorded; a person authors them.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def record_script(
    project: Project,
    case_id: str,
    model: str,
    *,
    journal_url: str,
    name: str | None = None,
    api_base: str | None = None,
    force: bool = False,
    clock: Callable[[], datetime] = utc_now,
) -> Recording:
    """Run the case once live against `model` and write `gates/fixtures/models/<name>.yaml` (name:
    the case id by default). Raises RecordRefused (nothing written) or ConfigError (a bad subject)."""
    # The engine and the gateway (litellm at the recording's call): only when a recording is made.
    from eval_assets.engine import Engine, replay_loop, subject_spec
    from eval_assets.providers.gateway import ModelGateway, UnpricedModel
    from eval_assets.spend import AttemptRef, Ceilings, SpendPath, open_journal

    root = project.root
    name = name or case_id
    if labels := findings(name):  # a file name is an identifier: refused, never redacted
        raise RecordRefused(
            f"the script name looks like a credential ({', '.join(labels)}); nothing was written"
        )
    try:
        target = script_file(root, name)
    except ValueError as exc:
        raise RecordRefused(str(exc)) from None
    try:  # before anything is paid: a FIFO, device, directory or symlink there is never written
        check_target(target)
    except UnsafeTarget as exc:
        raise RecordRefused(str(exc)) from None
    if target.exists() and not force:
        raise RecordRefused(
            f"{target.relative_to(root)} exists: a recording never overwrites a script (use --force)"
        )
    case = find_case(root, project, case_id)
    scenario: Scenario
    if case.scenario is not None:
        scenario = case.scenario
    else:
        assert case.case is not None
        if case.case.scenario not in project.scenarios:
            raise RecordRefused(f"case {case_id}: unknown scenario {case.case.scenario!r}")
        scenario = project.scenarios[case.case.scenario]
    subject, problems = validate_model(Subject, _subject(case, model, api_base).model_dump(), "--model")
    if subject is None:
        raise ConfigError(problems)
    settings = project.settings
    gateway = ModelGateway(settings.price_table(), scripts=ScriptBook(root))
    try:
        gateway.price(model)
    except UnpricedModel as exc:
        raise RecordRefused(str(exc)) from None
    journal = open_journal(journal_url)
    try:
        generation = 1 + max((r.generation for r in journal.rows(build=RECORD_BUILD)), default=0)
        spend = SpendPath(
            journal,
            gateway,
            run_id=f"record-{case_id}-{generation}",
            ceilings_for=lambda ref: Ceilings(day_usd=settings.spend.day_ceiling_usd),
        )
        one_try = EngineSettings(concurrency_per_model=1, timeout_s=settings.engine.timeout_s, max_tries=1)
        engine = Engine(spend, one_try)
        ref = AttemptRef(RECORD_BUILD, scenario.id, 1, "subject", None, generation)
        spec = subject_spec(subject, scenario, build=RECORD_BUILD, repeat=1, timeout_s=one_try.timeout_s)
        if scenario.tools:
            run = asyncio.run(
                replay_loop(
                    scenario,
                    spec,
                    lambda turn, s: engine.call(
                        AttemptRef(RECORD_BUILD, scenario.id, 1, "subject", None, generation, turn), s
                    ),
                )
            )
            result, messages = run.call, run.messages
        else:
            result = asyncio.run(engine.call(ref, spec))
            messages = (*spec.messages, {"role": "assistant", "content": result.text})
    finally:
        journal.close()
    if result.status != "ok" or result.text is None:
        why = (
            f"{result.error_kind}: {result.error}"
            if result.status == "error"
            else str(result.excluded_reason)
        )
        raise RecordRefused(
            f"the live run of case {case_id} against {model} failed ({why}); nothing was written"
        )
    turns = _turns(tuple(messages), len(spec.messages))
    data = {
        "description": f"Recorded from case {case_id} against {model}; review before use.",
        "turns": turns,
    }
    script, found = validate_model(ModelScript, data, str(target.relative_to(root)))
    if script is None:
        raise RecordRefused(
            "the recording does not fit the script shape; nothing was written: "
            + "; ".join(str(p) for p in found)
        )
    text = _render(data, case_id=case_id, model=model, at=clock())
    write_file(target, text)
    calls = sum(len(t.get("tool_calls", [])) for t in turns)
    return Recording(target, name, len(turns), calls, result.cost_usd)
